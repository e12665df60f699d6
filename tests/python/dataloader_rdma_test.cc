// Real device (RDMA lane): /usr/bin/python3 with pyverbs and a real torch DataLoader
// under the shim. Each case is one Python launch (~20-45 s in the TCG guest).
// Built twice: dataloader_rdma_test (LD_PRELOAD, all cases) and dataloader_audit_rdma_test
// (FORKGUARD_TEST_WITH_AUDIT: LD_PRELOAD + LD_AUDIT as `forkguard run` does, warn case
// only, to keep one lane target under its time limit).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/audit/log_lines.h"
#include "tests/support/rdma_device.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::test_support {
namespace {

struct ShimRun {
  ProgramResult result;
  std::vector<std::string> log;
};

// Runs /usr/bin/python3 tests/python/<script> under the shim (a hang is a failure).
ShimRun RunPython(const RdmaDevice& dev, const std::string& script, const std::string& mode,
                  const std::vector<std::string>& args = {},
                  const std::vector<std::string>& extra_env = {}) {
  std::string log_dir = MakeTempDir("fglog");
  ShimRun run;
  std::vector<std::string> env = {"LD_PRELOAD=" + Runfile("shim/libforkguard.so"),
                                  "FORKGUARD_MODE=" + mode,
                                  "FORKGUARD_LOG=" + log_dir,
                                  "RXE_DEV=" + dev.name,
                                  "PYTHONDONTWRITEBYTECODE=1",
                                  "RDMAV_FORK_SAFE=",
                                  "IBV_FORK_SAFE="};
  env.insert(env.end(), extra_env.begin(), extra_env.end());
#ifdef FORKGUARD_TEST_WITH_AUDIT
  env.push_back("LD_AUDIT=" + Runfile("shim/libforkguard_audit.so"));
#endif
#ifdef FORKGUARD_ASAN
  // An ASan-built shim in an uninstrumented interpreter: CPython's own allocations at exit
  // are not ours to judge, so LeakSanitizer stays off in the child (the shim is still checked).
  env.push_back("ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0:handle_segv=0");
#endif
  std::vector<std::string> argv = {"/usr/bin/python3", Runfile("tests/python/" + script)};
  argv.insert(argv.end(), args.begin(), args.end());
  run.result = RunProgram(argv, env, /*timeout_s=*/200);
  EXPECT_FALSE(run.result.timed_out) << script << " hung";
  run.log = ReadLogLines(log_dir);
  return run;
}

// `File "<...>/<file>", line <line of marker>, in <func>` as Python and forkguard print it.
std::string PyFrame(const std::string& file, const std::string& marker, const std::string& func) {
  int line = LineOf(Runfile("tests/python/" + file), marker);
  return file + "\", line " + std::to_string(line) + ", in " + func + "\n";
}

TEST(DataLoaderRdma, WarnModeNamesThePythonLines) {
  RdmaDevice dev = RequireRdmaDevice();
  ShimRun run = RunPython(dev, "dataloader_after_rdma.py", "warn");
  const ProgramResult& r = run.result;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("sum 140"), std::string::npos) << r.out;  // the epoch completed
  EXPECT_NE(r.err.find("forkguard: fork after RDMA init"), std::string::npos) << r.err;
  // Where the device was opened and where the DataLoader was iterated, in Python terms.
  size_t init_at = r.err.find("RDMA first initialized");
  size_t fork_at = r.err.find("fork called at:");
  ASSERT_NE(init_at, std::string::npos) << r.err;
  ASSERT_NE(fork_at, std::string::npos) << r.err;
  std::string init_part = r.err.substr(init_at, fork_at - init_at);
  std::string fork_part = r.err.substr(fork_at);
  EXPECT_NE(init_part.find("Python stack (most recent call last):"), std::string::npos) << r.err;
  EXPECT_NE(init_part.find(PyFrame("rdma_common.py", "MARK:open-device", "open_rdma")),
            std::string::npos)
      << r.err;
  EXPECT_NE(init_part.find(PyFrame("dataloader_after_rdma.py", "MARK:main-open", "main")),
            std::string::npos)
      << r.err;
  EXPECT_NE(fork_part.find(PyFrame("dataloader_after_rdma.py", "MARK:main-iterate", "main")),
            std::string::npos)
      << r.err;
  EXPECT_NE(fork_part.find(PyFrame("rdma_common.py", "MARK:iterate", "total")), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("persistent_workers=True"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("multiprocessing_context='spawn'"), std::string::npos) << r.err;
  EXPECT_FALSE(LinesWith(run.log, {"\"fix\":\"dataloader\""}).empty());

  // The event log carries the same Python frames.
  auto forks = LinesWith(run.log, {"\"event\":\"fork\"", "\"verdict\":\"hazard\""});
  ASSERT_FALSE(forks.empty()) << ::testing::PrintToString(run.log);
  EXPECT_NE(forks[0].find("{\"py\":{\"file\":"), std::string::npos) << forks[0];
  EXPECT_NE(forks[0].find("\"func\":\"total\"}"), std::string::npos) << forks[0];
  EXPECT_NE(forks[0].find("\"func\":\"open_rdma\"}"), std::string::npos) << forks[0];
}

#ifndef FORKGUARD_TEST_WITH_AUDIT
TEST(DataLoaderRdma, ErrorModeFailsTheDataLoaderAtThatLine) {
  RdmaDevice dev = RequireRdmaDevice();
  ShimRun run = RunPython(dev, "dataloader_after_rdma.py", "error");
  const ProgramResult& r = run.result;
  EXPECT_EQ(r.status, 1) << r.out << r.err;  // an uncaught Python exception
  EXPECT_EQ(r.out.find("sum"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("mode: error - the fork fails with EPERM"), std::string::npos) << r.err;
  // Python's own traceback points at the user's line and says why.
  size_t tb = r.err.find("Traceback (most recent call last):");
  ASSERT_NE(tb, std::string::npos) << r.err;
  std::string traceback = r.err.substr(tb);
  EXPECT_NE(traceback.find(PyFrame("dataloader_after_rdma.py", "MARK:main-iterate", "main")),
            std::string::npos)
      << r.err;
  EXPECT_NE(traceback.find("PermissionError: [Errno 1] Operation not permitted"), std::string::npos)
      << r.err;
  auto failed = LinesWith(run.log, {"\"event\":\"fork\"", "\"action\":\"failed\""});
  EXPECT_FALSE(failed.empty()) << ::testing::PrintToString(run.log);
  // No worker was created, and no fork after RDMA init proceeded.
  EXPECT_TRUE(LinesWith(run.log, {"\"event\":\"fork_child\""}).empty())
      << ::testing::PrintToString(run.log);
  EXPECT_TRUE(LinesWith(run.log, {"\"verdict\":\"hazard\"", "\"action\":\"proceeded\""}).empty());
}

TEST(DataLoaderRdma, PersistentWorkersFirstIsSilent) {
  RdmaDevice dev = RequireRdmaDevice();
  ShimRun run = RunPython(dev, "dataloader_first.py", "error");
  const ProgramResult& r = run.result;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(CountOf(r.out, "sum 140\n"), 2) << r.out;
  EXPECT_EQ(r.err.find("forkguard"), std::string::npos) << r.err;
  auto forks = LinesWith(run.log, {"\"event\":\"fork\""});
  EXPECT_EQ(forks.size(), 2u) << ::testing::PrintToString(run.log);  // the two workers
  EXPECT_EQ(LinesWith(forks, {"\"verdict\":\"clean\""}).size(), forks.size());
  EXPECT_FALSE(LinesWith(run.log, {"\"event\":\"rdma_init\""}).empty());  // RDMA was seen
}

TEST(DataLoaderRdma, SubprocessAfterRdmaIsNotAHazard) {
  RdmaDevice dev = RequireRdmaDevice();
  ShimRun run = RunPython(dev, "subprocess_after_rdma.py", "error");
  const ProgramResult& r = run.result;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("true exited 0"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("forkguard"), std::string::npos) << r.err;
  EXPECT_FALSE(LinesWith(run.log, {"\"event\":\"rdma_init\""}).empty());
  EXPECT_TRUE(LinesWith(run.log, {"\"verdict\":\"hazard\""}).empty())
      << ::testing::PrintToString(run.log);
}

#endif  // FORKGUARD_TEST_WITH_AUDIT

}  // namespace
}  // namespace forkguard::test_support
