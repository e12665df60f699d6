// forkguard.torch.patch() with Debian's PyTorch and pyverbs on the real device, under the
// shim and without it (one Python process each, tests/python/torch_patch.py): "error" stops
// the DataLoader's iterator before any worker exists, naming where RDMA was initialized (the
// shim) or saying it cannot (the /proc + RDMA netlink fallback); "switch" moves the loader to
// a forkserver whose workers fork with no RDMA state (the shim's log of the run has their
// forks, none hazardous). torch or the device missing is a failure.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/audit/log_lines.h"
#include "tests/support/rdma_device.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::test_support {
namespace {

std::string Dir(const std::string& path) { return path.substr(0, path.rfind('/')); }

ProgramResult RunTorch(bool shim, const std::string& log_dir) {
  RdmaDevice dev = RequireRdmaDevice();
  std::string script = Runfile("tests/python/torch_patch.py");
  std::vector<std::string> env = {
      "LD_PRELOAD=" + (shim ? Runfile("shim/libforkguard.so") : std::string()),
      "FORKGUARD_CHECK_LIB=" + Runfile("api/libforkguard_check.so"),
      // The forkguard package, and rdma_common.py beside the script.
      "PYTHONPATH=" + Dir(Dir(Runfile("python/forkguard/__init__.py"))) + ":" + Dir(script),
      "PYTHONDONTWRITEBYTECODE=1", "FORKGUARD_MODE=warn", "FORKGUARD_LOG=" + log_dir,
      "FORKGUARD_TORCH=", "RXE_DEV=" + dev.name,
      "RDMAV_FORK_SAFE=", "IBV_FORK_SAFE=", "OMP_NUM_THREADS=1"};
  ProgramResult r = RunProgram({"/usr/bin/python3", script}, env, 840);
  EXPECT_FALSE(r.timed_out) << "torch_patch.py hung\n" << r.out << r.err;
  printf("%s", r.out.c_str());  // the import and total times, for the lane's log
  return r;
}

// What both runs show: error raised at the iterator's start by `source` ("shim", "proc"), with
// `first` in its message's first line, the loader left as it was, then one batch from
// forkserver workers.
void ExpectErrorThenSwitch(const ProgramResult& r, const std::string& source,
                           const std::string& first) {
  EXPECT_EQ(TextAfter(r.out, "error: "), "raised") << r.out << r.err;
  EXPECT_EQ(TextAfter(r.out, "error-source: "), source) << r.out;
  EXPECT_NE(TextAfter(r.out, "error-first: ").find(first), std::string::npos) << r.out;
  EXPECT_EQ(TextAfter(r.out, "error-at-start: "), "True") << r.out;
  EXPECT_EQ(TextAfter(r.out, "context-after-error: "), "None") << r.out;
  EXPECT_EQ(TextAfter(r.out, "switch: "), "[0, 1] (context forkserver)") << r.out << r.err;
}

TEST(TorchPatch, UnderTheShimErrorNamesTheInitAndSwitchForksNoHazard) {
  std::string logs = std::string(getenv("TEST_TMPDIR")) + "/torch-shim-logs";
  ProgramResult r = RunTorch(/*shim=*/true, logs);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  ExpectErrorThenSwitch(r, "shim", "forkguard: fork after RDMA init in pid");
  int line = LineOf(Runfile("tests/python/rdma_common.py"), "MARK:open-device");
  EXPECT_NE(TextAfter(r.out, "error-init: ")
                .find("ibv_open_device(" + RequireRdmaDevice().name + ") at File "),
            std::string::npos)
      << r.out;
  EXPECT_NE(TextAfter(r.out, "error-init: ")
                .find("rdma_common.py\", line " + std::to_string(line) + ", in open_rdma"),
            std::string::npos)
      << r.out;
  // The shim printed nothing: no process forked with RDMA state. Its log has the forkserver's
  // forks of the two workers, clean.
  EXPECT_EQ(r.err.find("fork after RDMA init"), std::string::npos) << r.err;
  std::vector<std::string> log = ReadLogLines(logs);
  EXPECT_GE(LinesWith(log, {"\"event\":\"fork\"", "\"verdict\":\"clean\""}).size(), 2u);
  EXPECT_EQ(LinesWith(log, {"\"event\":\"fork\"", "\"verdict\":\"hazard\""}).size(), 0u);
}

TEST(TorchPatch, WithoutTheShimTheFallbackStopsAndSwitchesToo) {
  ProgramResult r = RunTorch(/*shim=*/false, "");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  ExpectErrorThenSwitch(r, "proc", "forkguard: fork check in pid");
  EXPECT_EQ(TextAfter(r.out, "error-init: "), "") << r.out;  // no sites without the shim
}

}  // namespace
}  // namespace forkguard::test_support
