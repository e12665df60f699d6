// Must-show (1) on the real device: `forkguard run --log D -- hazard_prog`
// (open rxe0, register memory, fork) with the real libforkguard.so prints the
// report of the run and keeps the program's exit status; with
// --fail-on hazard it exits 3; a child killed touching registered memory
// (RDMAV_FORK_SAFE=1) is in the report; --mode error makes the fork fail.
#include <dirent.h>

#include <string>

#include "gtest/gtest.h"
#include "tests/support/rdma_device.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using test_support::ProgramResult;
using test_support::RunProgram;

std::string Forkguard() { return forkguard::test_support::Runfile("cli/forkguard"); }
std::string Prog() { return forkguard::test_support::Runfile("cli/testdata/hazard_prog"); }

ProgramResult RunUnderForkguard(const std::string& dev, const std::vector<std::string>& opts,
                                const std::vector<std::string>& prog_args,
                                std::vector<std::string> env = {}) {
  // The shim is found in the runfiles (no FORKGUARD_SHIM_DIR): the Bazel-tree layout.
  std::vector<std::string> argv = {Forkguard(), "run"};
  argv.insert(argv.end(), opts.begin(), opts.end());
  argv.push_back("--");
  argv.push_back(Prog());
  argv.insert(argv.end(), prog_args.begin(), prog_args.end());
  env.push_back("RXE_DEV=" + dev);
  env.push_back("FORKGUARD_SHIM_DIR=");
  return RunProgram(argv, env);
}

int CountLogs(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += std::string(e->d_name).find(".jsonl") != std::string::npos;
    closedir(d);
  }
  return n;
}

TEST(RunRdma, ReportsTheHazardAndKeepsTheExitStatus) {
  auto dev = forkguard::test_support::RequireRdmaDevice();
  std::string logs = forkguard::test_support::MakeTempDir("fglogs");
  ProgramResult r =
      RunUnderForkguard(dev.name, {"--log", logs}, {"5"}, {"RDMAV_FORK_SAFE=", "IBV_FORK_SAFE="});
  EXPECT_EQ(r.status, 5) << r.out << r.err;
  EXPECT_NE(r.out.find("child: exit 0"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("forkguard: 1 process on 1 host, 1 fork: 1 hazardous at 1 call site"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("hazard_prog.cc:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": hazard: fork() after RDMA initialization"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("= inherited-rdma:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("RDMA was first initialized here, by ibv_open_device on " + dev.name),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("#0 main at cli/testdata/hazard_prog.cc:"), std::string::npos) << r.err;
  EXPECT_GE(CountLogs(logs), 1);

  // The kept logs give the same picture through `forkguard report`.
  ProgramResult rep =
      RunProgram({Forkguard(), "report", "--format", "json", "--fail-on", "hazard", logs});
  EXPECT_EQ(rep.status, 3) << rep.err;
  EXPECT_NE(rep.out.find("\"hazard_forks\": 1,"), std::string::npos) << rep.out;
}

TEST(RunRdma, FailOnHazardExits3) {
  auto dev = forkguard::test_support::RequireRdmaDevice();
  ProgramResult r = RunUnderForkguard(dev.name, {"--fail-on", "hazard"}, {"5"});
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find(": hazard: fork() after RDMA initialization"), std::string::npos) << r.err;
}

TEST(RunRdma, ChildKilledTouchingRegisteredMemoryIsReported) {
  auto dev = forkguard::test_support::RequireRdmaDevice();
  ProgramResult r = RunUnderForkguard(dev.name, {}, {"0", "--touch"}, {"RDMAV_FORK_SAFE=1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("child: signal 11"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("= child-segv:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 child forked, 1 killed by SIGSEGV"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 child killed touching RDMA-registered memory"), std::string::npos)
      << r.err;
}

TEST(RunRdma, ModeErrorFailsTheFork) {
  auto dev = forkguard::test_support::RequireRdmaDevice();
  ProgramResult r = RunUnderForkguard(dev.name, {"--mode", "error"}, {"6"});
  EXPECT_EQ(r.status, 6) << r.err;
  EXPECT_NE(r.out.find("fork failed: "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("action: 1 failed"), std::string::npos) << r.err;
}

TEST(RunRdma, EmittedSuppressionsSilenceTheSiteInTheShim) {
  auto dev = forkguard::test_support::RequireRdmaDevice();
  std::string logs = forkguard::test_support::MakeTempDir("fglogs");
  ProgramResult first = RunUnderForkguard(dev.name, {"--log", logs}, {"0"});
  ASSERT_EQ(first.status, 0) << first.err;
  ProgramResult emitted = RunProgram({Forkguard(), "report", "--emit-suppressions", logs});
  ASSERT_EQ(emitted.status, 0) << emitted.err;
  ASSERT_NE(emitted.out.find("kind="), std::string::npos) << emitted.out;
  std::string supp = forkguard::test_support::MakeTempDir("fgsupp") + "/forkguard.supp";
  FILE* f = fopen(supp.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs(emitted.out.c_str(), f);
  fclose(f);

  // The same program in error mode: the suppressed fork proceeds, nothing is printed by the
  // shim, and --fail-on hazard does not fire.
  ProgramResult r = RunUnderForkguard(
      dev.name, {"--mode", "error", "--fail-on", "hazard", "--suppressions", supp}, {"0"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("child: exit 0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("fork failed"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("forkguard: fork after RDMA init"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("suppressed"), std::string::npos) << r.err;

  // Without the file the same run fails the fork (the suppression did the work).
  ProgramResult bare = RunUnderForkguard(dev.name, {"--mode", "error"}, {"0"});
  EXPECT_NE(bare.out.find("fork failed: "), std::string::npos) << bare.out;

  // A bad file is refused before the program runs, naming its line.
  std::string bad = forkguard::test_support::MakeTempDir("fgbad") + "/bad.supp";
  f = fopen(bad.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("kind=* frame=func:main\nkind=hazard colour=red\n", f);
  fclose(f);
  ProgramResult refused = RunUnderForkguard(dev.name, {"--suppressions", bad}, {"0"});
  EXPECT_EQ(refused.status, 2) << refused.err;
  EXPECT_NE(refused.err.find(bad + ":2: "), std::string::npos) << refused.err;
  EXPECT_EQ(refused.out.find("child:"), std::string::npos) << refused.out;
}

}  // namespace
}  // namespace forkguard::cli
