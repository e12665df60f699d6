// Stress on the real device (scripts/lanes/rdma-lane): 16 threads forking while 4
// threads register/deregister on rxe0, a few hundred forks (3 phases x 16 x 6).
#include <gtest/gtest.h>

#include "tests/safety/stress_check.h"
#include "tests/support/rdma_device.h"

namespace forkguard::safety {
namespace {

TEST(StressRdma, SixteenForkersFourRegistrarsOnRxe) {
  test_support::RdmaDevice dev = test_support::RequireRdmaDevice();
  CheckStress(6, dev.name, {}, 600);
}

}  // namespace
}  // namespace forkguard::safety
