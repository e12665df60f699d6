// Real device: `forkguard ps` on rxe0 lists the processes that hold RDMA objects (with their
// objects, job, rank, shim and fork verdict) and no process that holds nothing, as root and
// as another user (nobody: no /proc/PID/fd, smaps or environ of root's processes; what it
// cannot read is said, not guessed).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/json.h"
#include "gtest/gtest.h"
#include "tests/support/rdma_device.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::test_support {
namespace {

using cli::FindMember;
using cli::GetBool;
using cli::GetInt;
using cli::GetString;

// A child started with posix_spawn whose stdin we hold (closing it ends the holder).
struct Holder {
  pid_t pid = -1;
  int in = -1;
  ~Holder() {
    if (in >= 0) close(in);
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
};

void Start(Holder* h, const std::vector<std::string>& argv, const std::vector<std::string>& env,
           bool wait_ready) {
  int in[2], out[2];
  ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  // `env` replaces the test's variables of the same name; "NAME=" removes NAME.
  RunOptions opt;
  opt.env = env;
  std::string error;
  h->pid = StartProgram(argv, opt, in[0], out[1], STDERR_FILENO, &error);
  ASSERT_GT(h->pid, 0) << error;
  close(in[0]);
  close(out[1]);
  h->in = in[1];
  if (wait_ready) {
    char buf[64] = {};
    ssize_t n = read(out[0], buf, sizeof(buf) - 1);
    ASSERT_GT(n, 0) << argv[0] << " did not start";
    ASSERT_EQ(std::string(buf).rfind("ready ", 0), 0u) << buf;
  }
  close(out[0]);
}

// `forkguard ps --format json`, optionally as nobody; returns the parsed document.
cli::Json Ps(const std::string& forkguard, bool as_nobody, std::string* text) {
  std::vector<std::string> args;
  if (as_nobody) {
    args = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  }
  args.push_back(forkguard);
  args.push_back("ps");
  std::vector<std::string> json_args = args;
  json_args.push_back("--format");
  json_args.push_back("json");
  ProgramResult json = RunProgram(json_args);
  EXPECT_EQ(json.status, 0) << json.Describe();
  const std::string& out = json.out;
  ProgramResult plain = RunProgram(args);
  EXPECT_EQ(plain.status, 0) << plain.Describe();
  *text = plain.out + plain.err;
  cli::Json doc;
  std::string error;
  EXPECT_TRUE(cli::ParseJson(out, &doc, &error)) << error << "\n" << out;
  return doc;
}

const cli::Json* FindPid(const cli::Json& doc, pid_t pid) {
  const cli::Json* procs = FindMember(doc, "processes");
  if (procs == nullptr) return nullptr;
  for (const cli::Json& p : *procs) {
    if (GetInt(p, "pid", -1) == pid) return &p;
  }
  return nullptr;
}

// forkguard copied where nobody can run it (the runfiles may be under /root).
std::string PublicCopy(const std::string& path) {
  std::string dir = "/tmp/fg-ps-test." + std::to_string(getpid());
  mkdir(dir.c_str(), 0755);
  chmod(dir.c_str(), 0755);
  std::string dst = dir + "/forkguard";
  std::filesystem::copy_file(path, dst, std::filesystem::copy_options::overwrite_existing);
  chmod(dst.c_str(), 0755);
  return dst;
}

TEST(PsRdma, ListsTheRdmaProcessesAsRootAndAsNobody) {
  RdmaDevice dev = RequireRdmaDevice();
  std::string holder = Runfile("cli/rdma_holder");
  Holder plain, shimmed, idle;
  ASSERT_NO_FATAL_FAILURE(Start(
      &plain, {holder},
      {"RANK=3", "SLURM_JOB_ID=777", "RXE_DEV=" + dev.name, "RDMAV_FORK_SAFE=", "IBV_FORK_SAFE="},
      true));
  ASSERT_NO_FATAL_FAILURE(
      Start(&shimmed, {holder},
            {"LD_PRELOAD=" + Runfile("shim/libforkguard.so"), "RDMAV_FORK_SAFE=1",
             "RXE_DEV=" + dev.name, "FORKGUARD_QUIET=1", "FORKGUARD_MODE=Fix"},
            true));
  // A process that holds nothing (cat, waiting on its stdin): never listed.
  ASSERT_NO_FATAL_FAILURE(Start(&idle, {"/bin/cat"}, {}, false));
  std::string fg = PublicCopy(Runfile("cli/forkguard"));

  for (bool nobody : {false, true}) {
    SCOPED_TRACE(nobody ? "as nobody" : "as root");
    std::string text;
    cli::Json doc = Ps(fg, nobody, &text);
    EXPECT_EQ(FindPid(doc, idle.pid), nullptr) << text;
    EXPECT_EQ(text.find("\n" + std::to_string(idle.pid) + " "), std::string::npos) << text;

    const cli::Json* p = FindPid(doc, plain.pid);
    ASSERT_NE(p, nullptr) << text;
    const cli::Json* o = FindMember(*p, "objects");
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(GetInt(*o, "contexts", -1), 1) << text;
    EXPECT_EQ(GetInt(*o, "pds", -1), 1) << text;  // the second PD's thread has exited
    EXPECT_EQ(GetInt(*o, "mrs", -1), 1) << text;
    EXPECT_EQ(GetInt(*o, "mr_bytes", -1), 64 * 1024) << text;
    EXPECT_EQ(GetInt(*o, "cqs", -1), 1) << text;
    EXPECT_EQ(GetInt(*o, "qps", -1), 1) << text;
    EXPECT_EQ(GetString(*p, "verdict"), "hazard (inherited-rdma)") << text;
    EXPECT_GE(GetInt(*FindMember(doc, "objects_without_pid"), "pds", -1), 1) << text;

    const cli::Json* s = FindPid(doc, shimmed.pid);
    ASSERT_NE(s, nullptr) << text;
    if (!nobody) {
      EXPECT_EQ(GetString(*p, "job"), "777") << text;
      EXPECT_EQ(GetInt(*p, "rank", -1), 3) << text;
      EXPECT_EQ(GetInt(*p, "uverbs_fds", -1), 1) << text;
      EXPECT_FALSE(GetBool(*p, "shim_loaded", true)) << text;
      EXPECT_TRUE(GetBool(*s, "shim_loaded", false)) << text;
      // The shim's mode, as the shim reads its variable (any case).
      EXPECT_EQ(GetString(*s, "shim_mode"), "fix") << text;
      EXPECT_TRUE(FindMember(*p, "shim_mode")->is_null()) << text;
      EXPECT_NE(text.find(" fix "), std::string::npos) << text;
      // Fork support on: the registered range is MADV_DONTFORK.
      EXPECT_EQ(GetString(*s, "verdict"), "hazard (child-segv, inherited-rdma)") << text;
      EXPECT_TRUE(FindMember(*s, "verdict_unknown")->is_null()) << text;
      EXPECT_EQ(FindMember(*s, "unreadable")->size(), 0u) << text;
      EXPECT_EQ(text.find("not readable"), std::string::npos) << text;
    } else {
      // Another user's environment, descriptors and mappings are not readable: unknown.
      EXPECT_TRUE(FindMember(*p, "job")->is_null()) << text;
      EXPECT_TRUE(FindMember(*p, "uverbs_fds")->is_null()) << text;
      EXPECT_TRUE(FindMember(*s, "shim_loaded")->is_null()) << text;
      EXPECT_TRUE(FindMember(*s, "shim_mode")->is_null()) << text;
      EXPECT_TRUE(FindMember(*s, "dc_vmas")->is_null()) << text;
      EXPECT_EQ(GetString(*s, "verdict"), "hazard (inherited-rdma)") << text;
      // ... and that is said, not guessed: what could not be read, and what the verdict
      // could not take into account (its registered range is MADV_DONTFORK).
      EXPECT_EQ(GetString(*s, "verdict_unknown"), "child-segv not known (smaps not readable)")
          << text;
      std::string unreadable;
      for (const cli::Json& f : *FindMember(*s, "unreadable")) {
        unreadable += f.get_ref<const std::string&>() + " ";
      }
      EXPECT_EQ(unreadable, "environ fd smaps maps ") << text;
      EXPECT_NE(text.find("hazard (inherited-rdma); child-segv not known (smaps not readable)"),
                std::string::npos)
          << text;
      EXPECT_NE(text.find("-: not readable as uid 65534 (another user's /proc/PID/environ"),
                std::string::npos)
          << text;
    }
    printf("%s\n", text.c_str());
  }
}

}  // namespace
}  // namespace forkguard::test_support
