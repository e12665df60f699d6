// `forkguard probe` run as a user and as root would: the user's cache, the system cache under
// /run (in a mount namespace of its own with a tmpfs on /run, so that this host's /run is not
// touched), and --system refused to a user other than root.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "cli/json.h"
#include "gtest/gtest.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using test_support::ProgramResult;
using test_support::RunOptions;
using test_support::RunProgram;

std::string Forkguard() { return test_support::Runfile("cli/forkguard"); }

std::string BootId() {
  std::string b = test_support::ReadFileOrEmpty("/proc/sys/kernel/random/boot_id");
  while (!b.empty() && b.back() == '\n') b.pop_back();
  return b;
}

std::string TmpDir(const std::string& name) {
  std::string d = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  mkdir(d.c_str(), 0755);
  return d;
}

Json ParsedOrFail(const std::string& text) {
  Json j;
  std::string error;
  EXPECT_TRUE(ParseJson(text, &j, &error)) << error << "\n" << text;
  return j;
}

// Without --system: probed now into the user's cache, then read from it; text and JSON.
TEST(Probe, UsersCacheWrittenThenRead) {
  std::string cache = TmpDir("user-cache");
  RunOptions o = test_support::WithoutShimEnv({"FORKGUARD_CACHE_DIR=" + cache});
  o.timeout_s = 60;
  std::string file = cache + "/pin-probe-" + BootId();
  unlink(file.c_str());
  ProgramResult first = RunProgram({Forkguard(), "probe"}, o);
  ASSERT_TRUE(first.Exited(0)) << first.Describe();
  EXPECT_NE(first.out.find("anonymous  intact ("), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("\nthp "), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("\nhugetlb "), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("probed now; written to " + file + "\n"), std::string::npos)
      << first.out;
  struct stat st;
  ASSERT_EQ(0, stat(file.c_str(), &st)) << file;

  ProgramResult second = RunProgram({Forkguard(), "probe", "--json"}, o);
  ASSERT_TRUE(second.Exited(0)) << second.Describe();
  Json j = ParsedOrFail(second.out);
  EXPECT_EQ("forkguard.probe/1", GetString(j, "schema"));
  EXPECT_EQ(BootId(), GetString(j, "boot_id"));
  EXPECT_EQ("intact", GetString(j["kinds"]["anonymous"], "fate")) << second.out;
  EXPECT_TRUE(j["kinds"]["anonymous"]["why"].is_null()) << second.out;
  ASSERT_TRUE(j["read_from"].is_array()) << second.out;
  ASSERT_GE(j["read_from"].size(), 1u) << second.out;
  EXPECT_EQ(file, j["read_from"][0].get<std::string>()) << second.out;

  ProgramResult quiet = RunProgram({Forkguard(), "probe", "-q", "--json"}, o);
  EXPECT_TRUE(quiet.Exited(0)) << quiet.Describe();
  EXPECT_EQ("", quiet.out);
  EXPECT_EQ("", quiet.err);
}

// --system by root: /run/forkguard made root's 0755, this boot's file 0644, and a user with no
// cache of their own (nobody, HOME empty) reads it without probing the kinds it measured.
TEST(Probe, SystemCacheWrittenByRootReadByEveryone) {
  ASSERT_EQ(0u, geteuid()) << "--system needs root: this test runs as root";
  // forkguard and nobody's home where nobody can reach them (the runfiles may be under /root).
  std::string pub = "/tmp/fg-probe-test." + std::to_string(getpid());
  ASSERT_EQ(0, mkdir(pub.c_str(), 0755));
  ASSERT_EQ(0, chmod(pub.c_str(), 0755));
  std::string fg = pub + "/forkguard";
  std::filesystem::copy_file(Forkguard(), fg);
  ASSERT_EQ(0, chmod(fg.c_str(), 0755));
  std::string home = pub + "/home";
  ASSERT_EQ(0, mkdir(home.c_str(), 0700));
  ASSERT_EQ(0, chown(home.c_str(), 65534, 65534));
  std::string out = TmpDir("system-out");
  // In a mount namespace of its own, with a tmpfs on /run: root writes, nobody reads.
  const std::string script =
      "set -e; mount -t tmpfs -o mode=0755 forkguard-test /run; "
      "\"$0\" probe --system --json > \"$1/system.json\"; "
      "stat -c '%a %u %F' /run/forkguard /run/forkguard/pin-probe-*; "
      "ls -A /run/forkguard; "
      "setpriv --reuid=65534 --regid=65534 --clear-groups env -i HOME=\"$2\" "
      "\"$0\" probe --json > \"$1/nobody.json\"; "
      "set +e; setpriv --reuid=65534 --regid=65534 --clear-groups env -i HOME=\"$2\" "
      "\"$0\" probe --system; echo \"nobody --system: $?\"";
  RunOptions o = test_support::WithoutShimEnv({});
  o.timeout_s = 60;
  o.stderr_to_stdout = true;
  ProgramResult r = RunProgram({"/usr/bin/unshare", "--mount", "--propagation", "private",
                                "/bin/sh", "-c", script, fg, out, home},
                               o);
  std::filesystem::remove_all(pub);
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  std::string file = "/run/forkguard/pin-probe-" + BootId();
  EXPECT_NE(r.out.find("755 0 directory\n644 0 regular file\npin-probe-" + BootId() + "\n"),
            std::string::npos)
      << r.out;
  Json sys = ParsedOrFail(test_support::ReadFileOrEmpty(out + "/system.json"));
  EXPECT_EQ(file, GetString(sys, "written_to")) << r.out;
  EXPECT_TRUE(GetBool(sys, "probed_now", false));
  EXPECT_EQ("intact", GetString(sys["kinds"]["anonymous"], "fate"));

  Json nobody = ParsedOrFail(test_support::ReadFileOrEmpty(out + "/nobody.json"));
  ASSERT_TRUE(nobody["read_from"].is_array()) << r.out;
  ASSERT_EQ(1u, nobody["read_from"].size()) << WriteJson(nobody);
  EXPECT_EQ(file, nobody["read_from"][0].get<std::string>());
  EXPECT_EQ("intact", GetString(nobody["kinds"]["anonymous"], "fate"));
  // The system's answers, kind by kind (a kind it left unknown for a reason that can change
  // is probed again by nobody, on the same kernel: the same answer).
  for (const char* k : {"anonymous", "thp", "hugetlb"}) {
    EXPECT_EQ(GetString(sys["kinds"][k], "fate"), GetString(nobody["kinds"][k], "fate")) << k;
  }

  EXPECT_NE(r.out.find("forkguard probe: --system writes /run/forkguard and must run as root"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("nobody --system: 2\n"), std::string::npos) << r.out;
  // This host's /run was not touched.
  struct stat st;
  EXPECT_NE(0, lstat(file.c_str(), &st)) << file << " on the host";
}

TEST(Probe, BadCommandLine) {
  ProgramResult r = RunProgram({Forkguard(), "probe", "extra"});
  EXPECT_TRUE(r.Exited(2)) << r.Describe();
  r = RunProgram({Forkguard(), "probe", "--format", "json"});
  EXPECT_TRUE(r.Exited(2)) << r.Describe();
}

}  // namespace
}  // namespace forkguard::cli
