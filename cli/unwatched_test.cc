// `forkguard run` with the real shim on the host: a static binary, an `env -i` child, a
// set-user-ID program and a `subprocess.run(env={})` child are each named as unwatched,
// and --require-watched fails (exit 4); the same run with every process watched passes.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli/json.h"
#include "gtest/gtest.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using test_support::ProgramResult;
using test_support::RunProgram;

ProgramResult RunUnderForkguard(const std::string& script, const std::string& format = "text") {
  std::string shim = forkguard::test_support::Runfile("shim/libforkguard.so");
  return RunProgram({forkguard::test_support::Runfile("cli/forkguard"), "run", "--no-audit",
                     "--format", format, "--require-watched", "--", "/bin/sh", "-c", script},
                    {"FORKGUARD_SHIM_DIR=" + shim.substr(0, shim.rfind('/'))});
}

// A copy of /bin/true that runs as another user: set-user-ID, owned by nobody (or, when the
// test is not root, owned by us - then it runs as us and is watched: the test says so).
std::string SetuidTrue() {
  std::string dir = std::string(getenv("TEST_TMPDIR")) + "/setuid";
  std::filesystem::create_directories(dir);
  std::string path = dir + "/sutrue";
  std::filesystem::copy_file("/bin/true", path, std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(chown(path.c_str(), 65534, 65534), 0) << "run as root (the host tests do)";
  EXPECT_EQ(chmod(path.c_str(), 04755), 0);
  return path;
}

TEST(Unwatched, EachKindIsNamedAndRequireWatchedFails) {
  std::string static_prog = forkguard::test_support::Runfile("cli/testdata/static_true");
  std::string setuid_prog = SetuidTrue();
  ProgramResult r = RunUnderForkguard(
      "env -i /bin/true; " + static_prog + "; " + setuid_prog +
      "; /usr/bin/python3 -c 'import subprocess; subprocess.run([\"/bin/true\"], env={})'");
  EXPECT_EQ(r.status, 4) << r.err;
  EXPECT_NE(r.err.find("unwatched: 4 processes of this run ran without the shim"),
            std::string::npos)
      << r.err;
  // Each one: pid, program, parent, why, and its RDMA state at exec.
  EXPECT_NE(r.err.find("true (/bin/true) on "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(", exec'd by env:\n      its environment has no LD_PRELOAD with the shim"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(", exec'd by python3:\n      its environment has no LD_PRELOAD"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("static_true (" + static_prog + ") on "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("a static binary (no dynamic loader: nothing is preloaded)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("sutrue (" + setuid_prog + ") on "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("set-user/group-ID (AT_SECURE"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("RDMA state when it exec'd: none"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("forkguard run: --require-watched: 4 processes ran without the shim"),
            std::string::npos)
      << r.err;
}

// The run's JSON report (on stderr, before --require-watched's line) lists the same
// processes: program, parent, why, and that none held RDMA state.
TEST(Unwatched, RunJsonListsEachKind) {
  std::string static_prog = forkguard::test_support::Runfile("cli/testdata/static_true");
  std::string setuid_prog = SetuidTrue();
  ProgramResult r =
      RunUnderForkguard("env -i /bin/true; " + static_prog + "; " + setuid_prog, "json");
  EXPECT_EQ(r.status, 4) << r.err;
  size_t end = r.err.rfind("}\n");
  ASSERT_NE(end, std::string::npos) << r.err;
  Json doc;
  std::string error;
  ASSERT_TRUE(ParseJson(r.err.substr(0, end + 1), &doc, &error)) << error << r.err;
  const Json* list = FindMember(doc, "unwatched");
  ASSERT_NE(list, nullptr) << r.err;
  ASSERT_EQ(list->size(), 3u) << r.err;
  std::string seen;
  for (const Json& u : *list) {
    EXPECT_GT(GetInt(u, "pid", -1), 0);
    EXPECT_GT(GetInt(u, "parent_pid", -1), 0);
    EXPECT_FALSE(GetBool(u, "held_rdma", true));
    seen += GetString(u, "program") + ":" +
            (*FindMember(u, "why"))[0].get_ref<const std::string&>() + " ";
  }
  // By pid: the shell runs them one after the other.
  EXPECT_EQ(seen, "true:preload-removed static_true:static sutrue:setuid ") << r.err;
}

// forkguard report names them too, from the kept logs.
TEST(Unwatched, ReportNamesThemFromTheLogs) {
  std::string shim = forkguard::test_support::Runfile("shim/libforkguard.so");
  std::string fg = forkguard::test_support::Runfile("cli/forkguard");
  std::string logs = std::string(getenv("TEST_TMPDIR")) + "/report-logs";
  ProgramResult run = RunProgram(
      {fg, "run", "--no-audit", "--log", logs, "--", "/bin/sh", "-c", "env -i /bin/true"},
      {"FORKGUARD_SHIM_DIR=" + shim.substr(0, shim.rfind('/'))});
  EXPECT_EQ(run.status, 0) << run.err;  // without --require-watched: the program's status
  ProgramResult r = RunProgram({fg, "report", logs});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("unwatched: 1 process of this run ran without the shim"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(", exec'd by env:\n      its environment has no LD_PRELOAD with the shim"),
            std::string::npos)
      << r.out;
}

// The program `run` starts is itself static: it logs nothing, and --require-watched fails
// as for an unwatched child; without the flag the run keeps the program's status.
TEST(Unwatched, TopLevelProgramUnwatchedFailsRequireWatched) {
  std::string shim = forkguard::test_support::Runfile("shim/libforkguard.so");
  std::string static_prog = forkguard::test_support::Runfile("cli/testdata/static_true");
  std::vector<std::string> env = {"FORKGUARD_SHIM_DIR=" + shim.substr(0, shim.rfind('/'))};
  std::string fg = forkguard::test_support::Runfile("cli/forkguard");
  ProgramResult r =
      RunProgram({fg, "run", "--no-audit", "--require-watched", "--", static_prog}, env);
  EXPECT_EQ(r.status, 4) << r.err;
  EXPECT_NE(r.err.find("no events were logged: the program may be static"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("forkguard run: --require-watched: " + static_prog + " (pid "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(") ran without the shim: it logged nothing\n"), std::string::npos) << r.err;
  ProgramResult plain = RunProgram({fg, "run", "--no-audit", "--", static_prog}, env);
  EXPECT_EQ(plain.status, 0) << plain.err;
}

TEST(Unwatched, EveryProcessWatchedPasses) {
  ProgramResult r = RunUnderForkguard(
      "/bin/true; env /bin/true; /usr/bin/python3 -c 'import subprocess; "
      "subprocess.run([\"/bin/true\"])'");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("unwatched"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace forkguard::cli
