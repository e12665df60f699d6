// The shim on the real Soft-RoCE device (rxe0, rdma-core 44): verdicts, modes, log and
// stacks of fork_after_rdma run under libforkguard.so with the real libibverbs and
// librdmacm. Runs in the RDMA lane (scripts/lanes/rdma-lane //tests/shim:shim_rdma_test);
// without a device every test fails.
#include <signal.h>

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/shim/shim_harness.h"
#include "tests/shim/shim_run.h"
#include "tests/support/rdma_device.h"

namespace forkguard::test_support {
namespace {

constexpr char kProgram[] = "tests/shim/fork_after_rdma";
constexpr char kDlopenProgram[] = "tests/shim/fork_after_rdma_dlopen";

class ShimRdma : public ::testing::Test {
 protected:
  void SetUp() override { dev_ = RequireRdmaDevice(); }

  ShimRun Real(const std::vector<std::string>& args, const std::string& mode = "",
               const std::vector<std::string>& env = {}, const char* program = kProgram) {
    std::vector<std::string> e = env;
    e.push_back("RXE_DEV=" + dev_.name);
    if (!dev_.ip.empty()) e.push_back("RXE_IP=" + dev_.ip);
    return RunUnderShim(program, args, mode, e, Verbs::kReal);
  }

  RdmaDevice dev_;
};

std::string Ctx(const ShimRun& r) { return r.proc.Describe(); }

// 1. RDMAV_FORK_SAFE=1, fork, the child touches the buffer.
TEST_F(ShimRdma, ForkSafeEnvChildSegvWarnedAndExplained) {
  ShimRun r = Real({"--touch-buffer"}, "warn", {"RDMAV_FORK_SAFE=1"});
  ExpectChildSegvWarned(r, {"child-segv", "inherited-rdma"});
  ASSERT_NE(std::string::npos, r.proc.out.find("device: " + dev_.name)) << Ctx(r);
  HazardMessage m = ParseHazardMessage(r.proc.err);
  EXPECT_NE(std::string::npos, m.init_section.find(dev_.name))
      << "'RDMA first initialized' does not name the device\n"
      << Ctx(r);
  EXPECT_EQ(dev_.name, OneEvent(r, "rdma_init").String("device")) << Ctx(r);
  // rdma-core 44 says UNNEEDED here and still marks the range: the shim must
  // have read the kernel's view.
  std::vector<Event> regs = r.log.OfPid("mr_register", r.proc.pid);
  ASSERT_EQ(1u, regs.size()) << Ctx(r);
  EXPECT_TRUE(regs[0].json["dontfork"].boolean) << Ctx(r);
}

// 1'. The same with ibv_fork_init() called by the program.
TEST_F(ShimRdma, IbvForkInitChildSegvWarnedAndExplained) {
  ExpectChildSegvWarned(Real({"--fork-safe", "--touch-buffer"}), {"child-segv"});
}

// 1''. Unrelated heap data on a page shared with a registered buffer.
TEST_F(ShimRdma, HeapNeighborSigsegvExplained) {
  ExpectHeapNeighborExplained(Real({"--touch-heap-neighbor"}, "", {"RDMAV_FORK_SAFE=1"}));
}

// 1 (second half). No fork support: no child-segv, the child runs fine;
// ibv_fork_init after a registration returns EINVAL, unchanged by the shim.
// Kernel 6.1 has copy-on-fork for pinned pages: no parent-corruption either.
TEST_F(ShimRdma, WithoutForkSupportNoChildSegvAndChildRuns) {
  ShimRun r = Real({"--touch-buffer", "--fork-init-after"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("fork_init_after: ret=22")) << Ctx(r);
  ExpectHazardWarning(r, {"inherited-rdma"}, {"child-segv", "parent-corruption"});
  EXPECT_NE(std::string::npos, r.proc.out.find("child exited 0")) << Ctx(r);
  EXPECT_TRUE(r.proc.err.find("SIGSEGV") == std::string::npos) << Ctx(r);
  EXPECT_EQ(22, OneEvent(r, "fork_init").Int("result")) << Ctx(r);
  Json fork = OneEvent(r, "fork");
  EXPECT_EQ(Json::Type::kBool, fork["kernel_cof"].type) << Ctx(r);
  EXPECT_TRUE(fork["kernel_cof"].boolean) << Ctx(r);
  EXPECT_GE(fork["live"].Int("uverbs_fds"), 1) << Ctx(r);
}

// 2. FORKGUARD_MODE=error: fork returns -1/EPERM, no child, the program goes on.
TEST_F(ShimRdma, ErrorModeForkFailsWithEperm) {
  ExpectForkFailedWithEperm(Real({"--touch-buffer"}, "error", {"RDMAV_FORK_SAFE=1"}));
}

// 3. The right order: workers first, then RDMA init: silent, only clean forks.
TEST_F(ShimRdma, ForkFirstOrderIsSilentAndClean) {
  ShimRun r = Real({"--order=fork-first", "--forks=2"}, "", {"RDMAV_FORK_SAFE=1"});
  ExpectCleanRun(r);
  EXPECT_EQ(2u, r.log.OfPid("fork", r.proc.pid).size()) << Ctx(r);
  EXPECT_EQ(1u, r.log.OfPid("rdma_init", r.proc.pid).size()) << Ctx(r);
}

// 4. librdmacm only: create_id + resolve_addr on the device's IP, then fork.
TEST_F(ShimRdma, RdmacmOnlyProgramCaught) {
  ShimRun r = Real({"--rdmacm-only"});
  Json fork = ExpectRdmacmCaught(r, "rdmacm: addr resolved");
  EXPECT_NE(std::string::npos,
            ParseHazardMessage(r.proc.err).fork_section.find("fg_test_fork_worker"))
      << Ctx(r);
  EXPECT_EQ(1, fork["live"].Int("cm_channels")) << Ctx(r);
  EXPECT_GE(fork["live"].Int("rdma_cm_fds"), 1) << Ctx(r);
  EXPECT_EQ("rdma_create_event_channel", OneEvent(r, "rdma_init").String("call")) << Ctx(r);
}

// 4'. rdma_create_ep (which creates its id and channel inside librdmacm).
TEST_F(ShimRdma, RdmacmCreateEpCaught) {
  ShimRun r = Real({"--rdmacm-ep"});
  Json fork = ExpectRdmacmCaught(r, "rdmacm: ep created");
  EXPECT_GE(fork["live"].Int("rdma_cm_fds"), 1) << Ctx(r);
  // The device context librdmacm opens inside rdma_create_ep is the child's inheritance
  // too: counted, and named in the message.
  EXPECT_GE(fork["live"].Int("contexts"), 1) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.err.find("1 device context (" + dev_.name + ")")) << Ctx(r);
  // rdma-core's rdma_getaddrinfo already creates (and destroys) an id to probe
  // AF_IB support, so that may be the first initialization; otherwise the context
  // rdma_create_ep opens, or the ep itself.
  const std::string call = OneEvent(r, "rdma_init").String("call");
  EXPECT_TRUE(call == "rdma_create_ep" || call == "rdma_create_id" || call == "ibv_open_device")
      << call << "\n"
      << Ctx(r);
}

// 5. posix_spawn after init is not a hazard; fork + exec is logged as exec'd.
TEST_F(ShimRdma, PosixSpawnIsNotAHazard) {
  ExpectSpawnIsNotAHazard(Real({"--spawn"}, "", {"RDMAV_FORK_SAFE=1"}), "posix_spawn");
}

TEST_F(ShimRdma, ForkExecLoggedAsExecd) {
  ExpectForkExecLogged(Real({"--fork-exec"}, "", {"RDMAV_FORK_SAFE=1"}));
}

// 6. Dereg + close before fork: clean, even with fork support on.
TEST_F(ShimRdma, DeregAndCloseBeforeForkIsClean) {
  ShimRun r = Real({"--touch-buffer", "--dereg-before-fork"}, "", {"RDMAV_FORK_SAFE=1"});
  ExpectCleanRun(r);
  ASSERT_EQ(1u, r.log.OfPid("fork", r.proc.pid).size()) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("child exited 0")) << Ctx(r);
}

// libibverbs loaded RTLD_LOCAL and called by handle: LD_PRELOAD never sees the
// open; the descriptor backstop (/dev/infiniband/uverbs*) still flags it, and
// the nested ibv_reg_mr -> ibv_reg_mr_iova2 PLT call is forwarded correctly.
TEST_F(ShimRdma, DlopenLocalCaughtByDescriptorBackstop) {
  ShimRun r = Real({"--dlopen-local", "--reg=mr"}, "", {}, kDlopenProgram);
  Json fork = ExpectInheritedRdma(r);
  EXPECT_TRUE(r.report.done) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("child exited 0")) << Ctx(r);
  EXPECT_GE(fork["live"].Int("uverbs_fds"), 1) << Ctx(r);
  ExpectWellFormedLog(r);
}

// The same with fork support on: the registration seen through the nested
// PLT call is enough to predict and explain the child's SIGSEGV.
TEST_F(ShimRdma, DlopenLocalForkSafeChildSegvExplained) {
  ShimRun r = Real({"--dlopen-local", "--fork-safe", "--touch-buffer"}, "", {}, kDlopenProgram);
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_TRUE(r.report.done) << Ctx(r);
  HazardMessage m = ParseHazardMessage(r.proc.err);
  ASSERT_TRUE(m.found) << Ctx(r);
  EXPECT_TRUE(m.HasReason("child-segv")) << Ctx(r);
  EXPECT_TRUE(m.HasReason("inherited-rdma")) << Ctx(r);
  ASSERT_EQ(1u, r.report.children.size()) << Ctx(r);
  ASSERT_EQ(1u, r.report.registered.size()) << Ctx(r);
  ExpectChildSegvExplained(r, r.report.children[0], r.report.registered[0].second);
}

// rdma-core's ibv_reg_mr and ibv_reg_mr_iova call ibv_reg_mr_iova2 through the
// PLT: one mr_register per user call, named after the outermost entry point.
TEST_F(ShimRdma, NestedRegistrationCountedOnce) {
  ShimRun r = Real({"--reg=mr,iova,iova2"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ASSERT_EQ(3u, r.report.registered.size()) << Ctx(r);
  ExpectOneRegisterLinePerCall(r);
  EXPECT_EQ(3, OneEvent(r, "fork")["live"].Int("mrs")) << Ctx(r);
}

// The child's SIGSEGV is explained, then the program's own handler runs.
TEST_F(ShimRdma, ChildSegvChainsToTheProgramsHandler) {
  ExpectChildSegvChained(Real({"--touch-buffer", "--segv-handler"}, "", {"RDMAV_FORK_SAFE=1"}));
}

// The descriptor backstop alone: a program that opens the device files itself
// (static libibverbs, mlx5dv_open_device) and calls nothing the shim wraps.
TEST_F(ShimRdma, RawUverbsDescriptorCaughtByBackstop) {
  ShimRun r = Real({"--open-uverbs=/dev/infiniband/uverbs0", "--raw-dontfork", "--touch-buffer"});
  Json fork = ExpectInheritedRdma(r);
  ASSERT_NE(std::string::npos, r.proc.out.find("opened: /dev/infiniband/uverbs0")) << Ctx(r);
  HazardMessage m = ParseHazardMessage(r.proc.err);
  // No intercepted call explains the descriptor: every MADV_DONTFORK mapping counts.
  EXPECT_TRUE(m.HasReason("child-segv")) << Ctx(r);
  EXPECT_NE(std::string::npos, m.fork_section.find("fg_test_fork_worker")) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("child killed by signal 11")) << Ctx(r);
  EXPECT_EQ(1, fork["live"].Int("uverbs_fds")) << Ctx(r);
  EXPECT_EQ(0, fork["live"].Int("contexts")) << Ctx(r);
  ExpectWellFormedLog(r);
}

// "A backstop that needs no symbol": descriptors opened without libc's open
// (a raw syscall) ...
TEST_F(ShimRdma, UverbsOpenedByRawSyscallCaughtByBackstop) {
  ShimRun r = Real({"--open-uverbs-syscall=/dev/infiniband/uverbs0"});
  EXPECT_EQ(1, ExpectInheritedRdma(r)["live"].Int("uverbs_fds")) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("opened: /dev/infiniband/uverbs0")) << Ctx(r);
}

// ... or inherited across exec (a launcher that opened the device).
TEST_F(ShimRdma, UverbsInheritedAcrossExecCaughtByBackstop) {
  ShimRun r = Real({"--exec-keep-fd=/dev/infiniband/uverbs0"});
  EXPECT_EQ(1, ExpectInheritedRdma(r)["live"].Int("uverbs_fds")) << Ctx(r);
  EXPECT_EQ(1u, r.report.children.size()) << Ctx(r);
}

TEST_F(ShimRdma, RawRdmaCmDescriptorCaughtByBackstop) {
  ShimRun r = Real({"--open-uverbs=/dev/infiniband/rdma_cm"});
  EXPECT_EQ(1, ExpectInheritedRdma(r)["live"].Int("rdma_cm_fds")) << Ctx(r);
  EXPECT_FALSE(ParseHazardMessage(r.proc.err).HasReason("child-segv")) << Ctx(r);
}

}  // namespace
}  // namespace forkguard::test_support
