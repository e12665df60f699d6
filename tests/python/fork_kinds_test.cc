// fork_kinds.py under the shim: how each way a Python program starts a child after RDMA
// init is judged, and which fix line it gets. Built twice from this file:
// fork_kinds_stub_test (host, no device: the stub libibverbs through ctypes,
// FORKGUARD_TEST_VERBS=ctypes) and, with FORKGUARD_TEST_RDMA, fork_kinds_rdma_test
// (tag rdma: pyverbs on rxe0; one Python launch per case, ~20 s in the TCG guest).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/audit/log_lines.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"
#ifdef FORKGUARD_TEST_RDMA
#include "tests/support/rdma_device.h"
#endif

namespace forkguard::test_support {
namespace {

struct KindRun {
  ProgramResult result;
  std::vector<std::string> log;
};

// /usr/bin/python3 fork_kinds.py <kind> under the shim (a hang is a failure).
KindRun RunKind(const std::string& kind, const std::string& mode, const std::string& fork_safe,
                const std::vector<std::string>& extra_env = {}) {
  std::string log_dir = MakeTempDir("fglog");
  std::vector<std::string> env = {"LD_PRELOAD=" + Runfile("shim/libforkguard.so"),
                                  "FORKGUARD_MODE=" + mode,
                                  "FORKGUARD_LOG=" + log_dir,
                                  "PYTHONDONTWRITEBYTECODE=1",
                                  "RDMAV_FORK_SAFE=" + fork_safe,
                                  "IBV_FORK_SAFE="};
#ifdef FORKGUARD_TEST_RDMA
  env.push_back("RXE_DEV=" + RequireRdmaDevice().name);
#else
  std::string lib = Runfile("tests/stub_ibverbs/lib/libibverbs.so.1");
  env.push_back("LD_LIBRARY_PATH=" + lib.substr(0, lib.rfind('/')));
  env.push_back("FORKGUARD_TEST_VERBS=ctypes");
#endif
#ifdef FORKGUARD_ASAN
  // An ASan-built shim in an uninstrumented interpreter: CPython's own allocations at exit
  // are not ours to judge, so LeakSanitizer stays off in the child (the shim is still checked).
  env.push_back("ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0:handle_segv=0");
#endif
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  KindRun run;
  run.result =
      RunProgram({"/usr/bin/python3", Runfile("tests/python/fork_kinds.py"), kind}, env, 200);
  EXPECT_FALSE(run.result.timed_out) << kind << " hung";
  run.log = ReadLogLines(log_dir);
  return run;
}

// `File "<...>/fork_kinds.py", line <line of marker>, in main` as Python and forkguard print it.
std::string MainFrame(const std::string& marker) {
  int line = LineOf(Runfile("tests/python/fork_kinds.py"), marker);
  return "fork_kinds.py\", line " + std::to_string(line) + ", in main\n";
}

// The run exited 0 having printed `printed`; stderr holds each of `said` (nothing from the
// shim when `said` is empty); the log has a line with each of `logged`.
void ExpectKind(const KindRun& run, const std::string& printed,
                const std::vector<std::string>& said, const std::vector<std::string>& logged) {
  const ProgramResult& r = run.result;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(printed), std::string::npos) << r.out << r.err;
  if (said.empty()) {
    EXPECT_EQ(r.err.find("forkguard"), std::string::npos) << r.err;
  }
  for (const std::string& s : said) {
    EXPECT_NE(r.err.find(s), std::string::npos) << s << r.err;
  }
  EXPECT_FALSE(LinesWith(run.log, logged).empty()) << ::testing::PrintToString(run.log);
}

// subprocess.run(..., preexec_fn=os.setsid) forks for real in _posixsubprocess.fork_exec;
// its child execs right away: it goes through our fork() and is judged clean, and error
// mode must not fail it.
TEST(ForkKinds, PreexecFnWithoutDontforkIsCleanInErrorMode) {
  KindRun run = RunKind("preexec", "error", "");
  ExpectKind(run, "true exited 0", {}, {"\"event\":\"fork\"", "\"child_execs\":true"});
  EXPECT_EQ(run.result.out.find("fork raised"), std::string::npos) << run.result.out;
  auto execs = LinesWith(run.log, {"\"event\":\"fork\"", "\"child_execs\":true"});
  ASSERT_EQ(execs.size(), 1u) << ::testing::PrintToString(run.log);
  EXPECT_NE(execs[0].find("\"verdict\":\"clean\""), std::string::npos) << execs[0];
}

// With fork support on the ranges are DONTFORK and preexec_fn could touch them: a warning,
// still never a failed fork.
TEST(ForkKinds, PreexecFnWithDontforkWarnsAndProceeds) {
  KindRun run = RunKind("preexec", "error", "1");
  ExpectKind(run, "true exited 0",
             {"verdict: hazard (child-segv)\n",
              "child-execs: the child execs right away (subprocess: "
              "_posixsubprocess.fork_exec)",
              "fix: preexec_fn makes CPython fork for real",
              "mode: error - not applied to this fork (the child execs right away)"},
             {"\"action\":\"proceeded\"", "\"fix\":\"preexec-fn\""});
  auto forks = LinesWith(run.log, {"\"event\":\"fork\"", "\"verdict\":\"hazard\""});
  ASSERT_EQ(forks.size(), 1u) << ::testing::PrintToString(run.log);
  EXPECT_NE(forks[0].find("\"action\":\"proceeded\""), std::string::npos) << forks[0];
}

// The fix line in Python terms: os.fork in user code, and the multiprocessing fork context.
TEST(ForkKinds, OsForkIsFailedWithTheOsForkFix) {
  ExpectKind(RunKind("osfork", "error", ""), "fork raised PermissionError",
             {"  fix: call os.fork() before RDMA init", MainFrame("MARK:osfork")},
             {"\"action\":\"failed\"", "\"fix\":\"python-fork\""});
}

TEST(ForkKinds, MultiprocessingForkContextGetsTheForkserverFix) {
  ExpectKind(RunKind("mpfork", "warn", ""), "child exited 0",
             {"  fix: use the 'forkserver' start method", MainFrame("MARK:mpfork")},
             {"\"fix\":\"multiprocessing-fork\""});
}

#ifndef FORKGUARD_TEST_RDMA
// Suppressions match the same frames with or without a device: host only, to keep the
// guest's time for what only the device shows.
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
TEST(ForkKinds, SuppressedPythonForkIsNeitherWarnedNorFailed) {
  std::string entry = "kind=* frame=func:main frame=file:fork_kinds.py:27";
  KindRun run =
      RunKind("osfork", "error", "", {"FORKGUARD_SUPPRESSIONS=" + SuppressionFile(entry + "\n")});
  ExpectKind(run, "child exited 0", {}, {"\"suppressed\":\"" + entry + "\""});
  EXPECT_EQ(LinesWith(run.log, {"\"verdict\":\"hazard\"", "\"action\":\"proceeded\"",
                                "\"suppressed\":\"" + entry + "\""})
                .size(),
            1u)
      << ::testing::PrintToString(run.log);
}

TEST(ForkKinds, SuppressionOfAnotherPythonLineChangesNothing) {
  KindRun run = RunKind(
      "osfork", "error", "",
      {"FORKGUARD_SUPPRESSIONS=" + SuppressionFile("kind=* frame=file:fork_kinds.py:28\n")});
  const ProgramResult& r = run.result;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("fork raised PermissionError"), std::string::npos) << r.out << r.err;
  EXPECT_TRUE(LinesWith(run.log, {"\"suppressed\""}).empty());
}

#endif  // FORKGUARD_TEST_RDMA

}  // namespace
}  // namespace forkguard::test_support
