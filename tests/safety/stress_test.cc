// 16 threads forking while 4 threads register/deregister (stub
// libibverbs on the host). Thousands of forks: 3 phases x 16 threads x 70.
#include <gtest/gtest.h>

#include "tests/safety/safety_util.h"
#include "tests/safety/stress_check.h"

namespace forkguard::safety {
namespace {

TEST(StressStub, SixteenForkersFourRegistrarsEveryForkLoggedOnceWithConsistentVerdict) {
  // Under a sanitizer everything is 5-20x slower; fewer forks, same shape.
  int n = 70;
  int watchdog = 240;
#if defined(FORKGUARD_TSAN) || defined(FORKGUARD_ASAN)
  n = 25;
  watchdog = 600;
#endif
#if defined(FORKGUARD_ASAN)
  ASSERT_NE(Preload().find("libasan.so"), std::string::npos) << Preload();
#elif defined(FORKGUARD_TSAN)
  ASSERT_NE(Preload().find("libtsan.so"), std::string::npos) << Preload();
#endif
  CheckStress(n, "stub0", {"LD_LIBRARY_PATH=" + StubLibDir()}, watchdog);
}

}  // namespace
}  // namespace forkguard::safety
