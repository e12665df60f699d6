// Real device (RDMA lane): a program that loads libibverbs like NCCL (dlopen RTLD_LOCAL +
// dlvsym), enables fork support, registers memory on $RXE_DEV and forks.
//  - LD_PRELOAD + LD_AUDIT: caught with the full verdict (child-segv: the registered
//    range is MADV_DONTFORK) and the stack where the device was opened.
//  - LD_PRELOAD alone: the calls are invisible, the fork is still caught by the
//    /dev/infiniband descriptor backstop (inherited-rdma, init unknown).
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

ShimRun RunNcclLike(const RdmaDevice& dev, bool audit, const std::string& mode) {
  std::string log_dir = MakeTempDir("fglog");
  std::vector<std::string> env = {
      "LD_PRELOAD=" + Runfile("shim/libforkguard.so"),
      "LD_AUDIT=" + (audit ? Runfile("shim/libforkguard_audit.so") : std::string()),
      "FORKGUARD_MODE=" + mode,
      "FORKGUARD_LOG=" + log_dir,
      "RDMAV_FORK_SAFE=",
      "IBV_FORK_SAFE="};
  ShimRun run;
  run.result = RunProgram({Runfile("tests/audit/nccl_like"), "--device", dev.name}, env);
  run.log = ReadLogLines(log_dir);
  return run;
}

// nccl_like exited 0 having printed `bound` (how it bound ibv_open_device) and "child
// exited 0"; the shim warned about its one hazardous fork, inherited-rdma among the reasons.
// Returns that fork's log line ("" when there is not exactly one).
std::string ExpectHazardCaught(const ShimRun& run, const std::string& bound) {
  const ProgramResult& r = run.result;
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(bound), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("child exited 0"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("forkguard: fork after RDMA init"), std::string::npos) << r.err;
  auto forks = LinesWith(run.log, {"\"event\":\"fork\"", "\"verdict\":\"hazard\""});
  EXPECT_EQ(forks.size(), 1u) << ::testing::PrintToString(run.log);
  if (forks.size() != 1) return "";
  EXPECT_NE(forks[0].find("\"inherited-rdma\""), std::string::npos) << forks[0];
  return forks[0];
}

TEST(NcclLikeRdma, AuditModuleGivesFullVerdictAndInitStack) {
  RdmaDevice dev = RequireRdmaDevice();
  ShimRun run = RunNcclLike(dev, /*audit=*/true, "warn");
  std::string fork = ExpectHazardCaught(run, "bind ibv_open_device@IBVERBS_1.1 -> libforkguard.so");
  const ProgramResult& r = run.result;
  EXPECT_NE(r.out.find("ibv_fork_init = 0"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("verdict: hazard (child-segv"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ibv_open_device(" + dev.name + ") at:"), std::string::npos) << r.err;
  // The init stack reaches the program's own main (nccl_like is not in the RDMA libs).
  size_t init_at = r.err.find("RDMA first initialized");
  size_t fork_at = r.err.find("fork called at:");
  ASSERT_NE(init_at, std::string::npos) << r.err;
  ASSERT_NE(fork_at, std::string::npos) << r.err;
  EXPECT_NE(r.err.substr(init_at, fork_at - init_at).find("main"), std::string::npos) << r.err;

  EXPECT_NE(fork.find("\"child-segv\""), std::string::npos) << fork;
  EXPECT_NE(fork.find("\"init\":{\"call\":\"ibv_open_device\",\"device\":\"" + dev.name),
            std::string::npos)
      << fork;
  EXPECT_NE(fork.find("\"action\":\"proceeded\""), std::string::npos) << fork;
  EXPECT_EQ(LinesWith(run.log, {"\"event\":\"mr_register\""}).size(), 1u);
}

TEST(NcclLikeRdma, AuditModuleErrorModeFailsTheFork) {
  RdmaDevice dev = RequireRdmaDevice();
  ShimRun run = RunNcclLike(dev, /*audit=*/true, "error");
  ASSERT_EQ(run.result.status, 0) << run.result.out << run.result.err;
  EXPECT_NE(run.result.out.find("fork failed: Operation not permitted"), std::string::npos)
      << run.result.out;
  EXPECT_EQ(run.result.out.find("child exited"), std::string::npos) << run.result.out;
}

TEST(NcclLikeRdma, PreloadAloneIsCaughtByTheDescriptorBackstop) {
  RdmaDevice dev = RequireRdmaDevice();
  // The handle lookups went straight to libibverbs, yet the fork is caught: the open uverbs
  // descriptor gives it away.
  ShimRun run = RunNcclLike(dev, /*audit=*/false, "warn");
  std::string fork = ExpectHazardCaught(run, "bind ibv_open_device@IBVERBS_1.1 -> libibverbs.so.1");
  ASSERT_FALSE(fork.empty());
  // The device open was invisible (libibverbs may still call its own exported
  // ibv_reg_mr_iova2 through its PLT, which the preload does see).
  EXPECT_EQ(fork.find("\"init\":{\"call\":\"ibv_open_device\""), std::string::npos) << fork;
  EXPECT_NE(fork.find("\"contexts\":0,"), std::string::npos) << fork;
  EXPECT_EQ(fork.find("\"uverbs_fds\":0"), std::string::npos) << fork;
}

}  // namespace
}  // namespace forkguard::test_support
