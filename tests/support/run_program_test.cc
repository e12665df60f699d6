#include "tests/support/run_program.h"

#include <signal.h>
#include <stdlib.h>

#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace forkguard::test_support {
namespace {

TEST(RunProgram, CapturesBothStreamsAndStatus) {
  ProgramResult r = RunProgram({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_TRUE(r.Exited(3)) << r.Describe();
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  ProgramResult k = RunProgram({"/bin/sh", "-c", "kill -SEGV $$"});
  EXPECT_TRUE(k.KilledBy(SIGSEGV)) << k.Describe();
  EXPECT_EQ(k.status, 128 + SIGSEGV);
  EXPECT_FALSE(k.Exited(0));
}

TEST(RunProgram, AddsReplacesAndRemovesVariables) {
  setenv("FG_RUN_TEST_A", "test", 1);
  setenv("FG_RUN_TEST_B", "test", 1);
  ProgramResult r = RunProgram(
      {"/bin/sh", "-c", "echo \"$FG_RUN_TEST_A|${FG_RUN_TEST_B-unset}|$FG_RUN_TEST_C\"; env"},
      {"FG_RUN_TEST_A=new", "FG_RUN_TEST_B=", "FG_RUN_TEST_C=c"});
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "new|unset|c");
  EXPECT_EQ(r.out.find("FG_RUN_TEST_A=test"), std::string::npos) << "one definition each";
  unsetenv("FG_RUN_TEST_A");
  unsetenv("FG_RUN_TEST_B");
}

TEST(RunProgram, WithoutShimEnvDropsWhatWouldChangeTheShim) {
  setenv("FORKGUARD_MODE", "leaked", 1);
  setenv("RDMAV_FORK_SAFE", "1", 1);
  ProgramResult r = RunProgram(
      {"/bin/sh", "-c", "echo \"$FORKGUARD_MODE|${RDMAV_FORK_SAFE-unset}|$X|${HOME:+home}\""},
      WithoutShimEnv({"X=y"}));
  unsetenv("FORKGUARD_MODE");
  unsetenv("RDMAV_FORK_SAFE");
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_EQ(r.out, "|unset|y|" + std::string(getenv("HOME") ? "home" : "") + "\n");
}

TEST(RunProgram, EmptyBaseEnvironmentHasOnlyTheGivenVariables) {
  RunOptions opt;
  opt.env = {"ONLY=1"};
  opt.base_env = RunOptions::BaseEnv::kEmpty;
  ProgramResult r = RunProgram({"/usr/bin/env"}, opt);
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_EQ(r.out, "ONLY=1\n");
}

TEST(RunProgram, OneStreamKeepsTheOrder) {
  RunOptions opt;
  opt.stderr_to_stdout = true;
  ProgramResult r = RunProgram({"/bin/sh", "-c", "echo 1; echo 2 >&2; echo 3"}, opt);
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
  EXPECT_EQ(r.out, "1\n2\n3\n");
  EXPECT_EQ(r.err, "");
}

TEST(RunProgram, AHangIsKilledWithItsChildren) {
  RunOptions opt;
  opt.timeout_s = 1;
  // The background sleep holds stdout open too: its process group goes with it.
  ProgramResult r = RunProgram({"/bin/sh", "-c", "sleep 600 & sleep 600"}, opt);
  EXPECT_TRUE(r.timed_out) << r.Describe();
  EXPECT_TRUE(r.KilledBy(SIGKILL)) << r.Describe();
  EXPECT_FALSE(r.Exited(0));
  EXPECT_NE(r.Describe().find("TIMED OUT"), std::string::npos);
}

TEST(RunProgram, AMissingProgramDoesNotStart) {
  ProgramResult r = RunProgram({"/nonexistent/program"});
  EXPECT_EQ(r.status, -1);
  EXPECT_EQ(r.pid, -1);
  EXPECT_NE(r.err.find("/nonexistent/program"), std::string::npos) << r.err;
  EXPECT_NE(r.Describe().find("did not start"), std::string::npos);
}

TEST(RunProgram, StartedToFilesAndWaitedFor) {
  std::string dir = MakeTempDir("run-program");
  StartedProgram s = StartProgramToFiles({"/bin/sh", "-c", "echo o; echo e >&2; exit 4"}, {},
                                         dir + "/out", dir + "/err");
  ASSERT_GT(s.pid, 0);
  ProgramResult r = WaitForFiles(s);
  EXPECT_TRUE(r.Exited(4)) << r.Describe();
  EXPECT_EQ(r.pid, s.pid);
  EXPECT_EQ(r.out, "o\n");
  EXPECT_EQ(r.err, "e\n");
  EXPECT_EQ(ReadFileOrEmpty(dir + "/out"), "o\n");
  EXPECT_EQ(ReadFileOrEmpty(dir + "/nonexistent"), "");
}

TEST(Runfile, FindsADataFileThroughTheRunfilesLibrary) {
  std::string path = Runfile("tests/support/run_program_test.cc");
  EXPECT_EQ(path[0], '/');
  EXPECT_NE(ReadFileOrEmpty(path).find("FindsADataFileThroughTheRunfilesLibrary"),
            std::string::npos);
}

}  // namespace
}  // namespace forkguard::test_support
