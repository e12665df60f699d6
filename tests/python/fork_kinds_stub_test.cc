// Host (no RDMA device): fork_kinds.py against the stub libibverbs through ctypes
// (FORKGUARD_TEST_VERBS=ctypes), under the shim. The same Python paths as the real-device
// ForkKindsRdma tests in dataloader_rdma_test.cc: how each way of starting a child is judged
// and which fix line it gets.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/audit/log_lines.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::test_support {
namespace {

struct KindRun {
  ProgramResult result;
  std::vector<std::string> log;
};

KindRun RunKind(const std::string& kind, const std::string& mode, const std::string& fork_safe,
                const std::vector<std::string>& extra_env = {}) {
  std::string log_dir = MakeTempDir("fglog");
  std::string lib = Runfile("tests/stub_ibverbs/lib/libibverbs.so.1");
  std::vector<std::string> env = {"LD_PRELOAD=" + Runfile("shim/libforkguard.so"),
                                  "LD_LIBRARY_PATH=" + lib.substr(0, lib.rfind('/')),
                                  "FORKGUARD_TEST_VERBS=ctypes",
                                  "FORKGUARD_MODE=" + mode,
                                  "FORKGUARD_LOG=" + log_dir,
                                  "PYTHONDONTWRITEBYTECODE=1",
                                  "RDMAV_FORK_SAFE=" + fork_safe,
                                  "IBV_FORK_SAFE="};
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  KindRun run;
  run.result =
      RunProgram({"/usr/bin/python3", Runfile("tests/python/fork_kinds.py"), kind}, env, 120);
  EXPECT_FALSE(run.result.timed_out) << kind << " hung";
  run.log = ReadLogLines(log_dir);
  return run;
}

TEST(ForkKindsStub, PreexecFnWithoutDontforkIsCleanInErrorMode) {
  KindRun run = RunKind("preexec", "error", "");
  const ProgramResult& r = run.result;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("true exited 0"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.err.find("forkguard"), std::string::npos) << r.err;
  auto execs = LinesWith(run.log, {"\"event\":\"fork\"", "\"child_execs\":true"});
  ASSERT_EQ(execs.size(), 1u) << ::testing::PrintToString(run.log);
  EXPECT_NE(execs[0].find("\"verdict\":\"clean\""), std::string::npos) << execs[0];
}

TEST(ForkKindsStub, PreexecFnWithDontforkWarnsAndProceeds) {
  KindRun run = RunKind("preexec", "error", "1");
  const ProgramResult& r = run.result;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("true exited 0"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("verdict: hazard (child-segv)\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mode: error - not applied to this fork (the child execs right away)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("fix: preexec_fn makes CPython fork for real"), std::string::npos) << r.err;
  EXPECT_FALSE(LinesWith(run.log, {"\"action\":\"proceeded\"", "\"fix\":\"preexec-fn\""}).empty())
      << ::testing::PrintToString(run.log);
}

TEST(ForkKindsStub, OsForkIsFailedWithTheOsForkFix) {
  KindRun run = RunKind("osfork", "error", "");
  const ProgramResult& r = run.result;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("fork raised PermissionError"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("fix: call os.fork() before RDMA init"), std::string::npos) << r.err;
  EXPECT_FALSE(LinesWith(run.log, {"\"action\":\"failed\"", "\"fix\":\"python-fork\""}).empty());
}

std::string SuppressionFile(const std::string& text) {
  std::string path = MakeTempDir("fgsupp") + "/fg.supp";
  FILE* f = fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr);
  if (f != nullptr) {
    fputs(text.c_str(), f);
    fclose(f);
  }
  return path;
}

// FORKGUARD_SUPPRESSIONS matches Python frames: function, file and line of the os.fork().
TEST(ForkKindsStub, SuppressedPythonForkIsNeitherWarnedNorFailed) {
  std::string entry = "kind=* frame=func:main frame=file:fork_kinds.py:27";
  KindRun run =
      RunKind("osfork", "error", "", {"FORKGUARD_SUPPRESSIONS=" + SuppressionFile(entry + "\n")});
  const ProgramResult& r = run.result;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("child exited 0"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.err.find("forkguard"), std::string::npos) << r.err;
  EXPECT_EQ(LinesWith(run.log, {"\"verdict\":\"hazard\"", "\"action\":\"proceeded\"",
                                "\"suppressed\":\"" + entry + "\""})
                .size(),
            1u)
      << ::testing::PrintToString(run.log);
}

TEST(ForkKindsStub, SuppressionOfAnotherPythonLineChangesNothing) {
  KindRun run = RunKind(
      "osfork", "error", "",
      {"FORKGUARD_SUPPRESSIONS=" + SuppressionFile("kind=* frame=file:fork_kinds.py:28\n")});
  const ProgramResult& r = run.result;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("fork raised PermissionError"), std::string::npos) << r.out << r.err;
  EXPECT_TRUE(LinesWith(run.log, {"\"suppressed\""}).empty());
}

TEST(ForkKindsStub, MultiprocessingForkContextGetsTheForkserverFix) {
  KindRun run = RunKind("mpfork", "warn", "");
  const ProgramResult& r = run.result;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("child exited 0"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("fix: use the 'forkserver' start method"), std::string::npos) << r.err;
  EXPECT_FALSE(LinesWith(run.log, {"\"fix\":\"multiprocessing-fork\""}).empty());
}

}  // namespace
}  // namespace forkguard::test_support
