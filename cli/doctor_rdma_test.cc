// `forkguard doctor` in the Soft-RoCE guest (real device): the verdicts that
// were warnings on the host are ok here, for the right reasons.
#include <sys/resource.h>

#include <string>

#include "cli/testdata/doctor_output.h"
#include "gtest/gtest.h"
#include "tests/support/rdma_device.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using testdata::DoctorBlock;
using testdata::DoctorLine;

TEST(DoctorRdma, DeviceCopyOnForkAndLimitsAreOk) {
  auto dev = forkguard::test_support::RequireRdmaDevice();
  std::string shim = forkguard::test_support::Runfile("shim/libforkguard.so");
  auto r = test_support::RunProgram({forkguard::test_support::Runfile("cli/forkguard"), "doctor"},
                                    {"FORKGUARD_SHIM_DIR=" + shim.substr(0, shim.rfind('/')),
                                     "RDMAV_FORK_SAFE=", "IBV_FORK_SAFE=", "LD_PRELOAD="});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  std::string devices = DoctorLine(r.out, "RDMA devices");
  EXPECT_EQ(devices.rfind("ok    RDMA devices      ", 0), 0u) << r.out;
  EXPECT_NE(devices.find(dev.name + " port 1 ACTIVE (Ethernet)"), std::string::npos) << r.out;
  EXPECT_EQ(DoctorLine(r.out, "uverbs access").rfind("ok  ", 0), 0u) << r.out;
  // The guest kernel answers the RDMA netlink query (the host has no ib_core).
  EXPECT_NE(DoctorBlock(r.out, "copy-on-fork").find("reports COPY_ON_FORK=1 (RDMA netlink)"),
            std::string::npos)
      << r.out;
  // The pin probe agrees with the kernel's report: anonymous memory is kept at fork.
  EXPECT_EQ(
      DoctorLine(r.out, "pinned pages")
          .rfind("ok    pinned pages      anonymous intact (copied for the child at fork)", 0),
      0u)
      << r.out;
  EXPECT_EQ(r.out.find("STALE"), std::string::npos) << r.out;
  rlimit rl{};
  getrlimit(RLIMIT_MEMLOCK, &rl);
  ASSERT_EQ(rl.rlim_cur, RLIM_INFINITY) << "the guest runs with memlock unlimited";
  EXPECT_EQ(DoctorLine(r.out, "memlock limit"), "ok    memlock limit     unlimited") << r.out;
  EXPECT_EQ(DoctorLine(r.out, "shim").rfind("ok  ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(" 0 fail"), std::string::npos) << r.out;
}

// rdma-core 44 x the guest's copy-on-fork kernel (netlink) x RDMAV_FORK_SAFE=1.
TEST(DoctorRdma, ForkSupportFromTheEnvironmentOnRdmaCore44IsAWarning) {
  forkguard::test_support::RequireRdmaDevice();
  std::string shim = forkguard::test_support::Runfile("shim/libforkguard.so");
  auto r = test_support::RunProgram({forkguard::test_support::Runfile("cli/forkguard"), "doctor"},
                                    {"FORKGUARD_SHIM_DIR=" + shim.substr(0, shim.rfind('/')),
                                     "RDMAV_FORK_SAFE=1", "IBV_FORK_SAFE=", "LD_PRELOAD="});
  std::string b = DoctorBlock(r.out, "fork support");
  EXPECT_EQ(b.rfind("warn  fork support      on, turned on by the environment (RDMAV_FORK_SAFE=1); "
                    "rdma-core 44, copy-on-fork kernel",
                    0),
            0u)
      << r.out;
  EXPECT_NE(r.out.find("-> unset RDMAV_FORK_SAFE"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace forkguard::cli
