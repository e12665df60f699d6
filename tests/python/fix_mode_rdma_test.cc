// Real device (RDMA lane): two Python programs that register with pyverbs under
// RDMAV_FORK_SAFE=1 (rdma-core marks the registered pages MADV_DONTFORK) and then fork,
// each run under the shim in warn mode (the harm happens: the forked workers die when they
// read data in those pages) and then in fix mode (it does not: every worker lives and reads
// the parent's data, every batch is right). Figures go to the test's output for the record.
#include <stdio.h>

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

// Runs /usr/bin/python3 tests/python/<script> under the shim with RDMAV_FORK_SAFE=1.
ShimRun RunPython(const RdmaDevice& dev, const std::string& script, const std::string& mode) {
  std::string log_dir = MakeTempDir("fglog");
  ShimRun run;
  std::vector<std::string> env = {"LD_PRELOAD=" + Runfile("shim/libforkguard.so"),
                                  "FORKGUARD_MODE=" + mode,
                                  "FORKGUARD_LOG=" + log_dir,
                                  "FORKGUARD_REPORT=",
                                  "RXE_DEV=" + dev.name,
                                  "PYTHONDONTWRITEBYTECODE=1",
                                  "RDMAV_FORK_SAFE=1",
                                  "IBV_FORK_SAFE="};
#ifdef FORKGUARD_ASAN
  env.push_back("ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0:handle_segv=0");
#endif
  run.result = RunProgram({"/usr/bin/python3", Runfile("tests/python/" + script)}, env,
                          /*timeout_s=*/240);
  EXPECT_FALSE(run.result.timed_out) << script << " hung";
  run.log = ReadLogLines(log_dir);
  return run;
}

bool Has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// The program's one summary line starting with `prefix` (for the record).
std::string Line(const std::string& out, const std::string& prefix) {
  size_t at = out.find(prefix);
  return at == std::string::npos ? "(no " + prefix + " line)"
                                 : out.substr(at, out.find('\n', at) - at);
}

// Fix mode's part: one fixed fork per forked worker, each range's change "copied" (the
// kernel copies anonymous memory at fork), the one-line message, no hazard message and no
// dead child.
void ExpectForksMadeSafe(const ShimRun& run, size_t forks) {
  const ProgramResult& r = run.result;
  EXPECT_TRUE(Has(r.err, "forkguard: fork made safe in pid ")) << r.err;
  EXPECT_FALSE(Has(r.err, "verdict: hazard")) << r.err;
  EXPECT_FALSE(Has(r.err, "SIGSEGV")) << r.err;
  auto fixed = LinesWith(run.log, {"\"event\":\"fork\"", "\"action\":\"fixed\""});
  EXPECT_EQ(fixed.size(), forks) << ::testing::PrintToString(run.log);
  for (const std::string& f : fixed) {
    EXPECT_TRUE(Has(f, "\"fixed\":\"copied\"")) << f;
    EXPECT_FALSE(Has(f, "\"fixed\":\"withheld\"")) << f;
    EXPECT_FALSE(Has(f, "\"fixed\":\"failed\"")) << f;
  }
  EXPECT_TRUE(LinesWith(run.log, {"\"event\":\"fork\"", "\"action\":\"proceeded\""}).empty())
      << ::testing::PrintToString(run.log);
  printf("  %s\n", Line(r.err, "forkguard: fork made safe").c_str());
}

// `script` under fix mode: exit 0, its summary line (starting with `summary`; printed for the
// record, after `label`) has `want`, and fix mode's part with `forks` forks. The run, for the
// test's own checks.
ShimRun ExpectFixModeRun(const RdmaDevice& dev, const std::string& script, const std::string& label,
                         const std::string& summary, const std::string& want, size_t forks) {
  ShimRun fix = RunPython(dev, script, "fix");
  const ProgramResult& f = fix.result;
  EXPECT_EQ(f.status, 0) << f.out << f.err;
  printf("%s, fix: %s\n", label.c_str(), Line(f.out, summary).c_str());
  EXPECT_TRUE(Has(f.out, want)) << f.out << f.err;
  ExpectForksMadeSafe(fix, forks);
  return fix;
}

// multiprocessing workers read heap bytes that share a page with the MR.
TEST(PythonFixModeRdma, MultiprocessingWorkersLiveAndReadTheParentsData) {
  RdmaDevice dev = RequireRdmaDevice();
  ShimRun warn = RunPython(dev, "multiprocessing_neighbor.py", "warn");
  const ProgramResult& w = warn.result;
  ASSERT_EQ(w.status, 0) << w.out << w.err;
  printf("multiprocessing, warn: %s\n", Line(w.out, "workers ").c_str());
  EXPECT_TRUE(Has(w.out, "workers 4: alive 0, died 4, checksums right 0")) << w.out << w.err;
  EXPECT_EQ(CountOf(w.out, "died (signal 11)"), 4) << w.out;
  EXPECT_TRUE(Has(w.err, "forkguard: fork after RDMA init")) << w.err;
  EXPECT_TRUE(Has(w.err, "in a page shared with a range registered")) << w.err;

  ShimRun fix = ExpectFixModeRun(dev, "multiprocessing_neighbor.py", "multiprocessing", "workers ",
                                 "workers 4: alive 4, died 0, checksums right 4", 4);
  EXPECT_TRUE(Has(fix.result.out, "parent data intact")) << fix.result.out;
}

// A DataLoader's 2 workers read samples in (and beside) the registered memory.
TEST(PythonFixModeRdma, DataLoaderGivesEveryBatchRight) {
  RdmaDevice dev = RequireRdmaDevice();
  ShimRun warn = RunPython(dev, "dataloader_registered.py", "warn");
  const ProgramResult& w = warn.result;
  ASSERT_EQ(w.status, 0) << w.out << w.err;
  printf("DataLoader, warn: %s / %s\n", Line(w.out, "batches ").c_str(),
         Line(w.out, "loader failed").c_str());
  EXPECT_TRUE(Has(w.out, "loader failed: DataLoader worker")) << w.out << w.err;
  EXPECT_FALSE(Has(w.out, "batches 8: right 8,")) << w.out;
  EXPECT_TRUE(Has(w.err, "forkguard: fork after RDMA init")) << w.err;
  EXPECT_TRUE(Has(w.err, "SIGSEGV")) << w.err;

  ShimRun fix = ExpectFixModeRun(dev, "dataloader_registered.py", "DataLoader", "batches ",
                                 "batches 8: right 8, wrong 0, missing 0", 2);
  EXPECT_FALSE(Has(fix.result.out, "loader failed")) << fix.result.out;
}

}  // namespace
}  // namespace forkguard::test_support
