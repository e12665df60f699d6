// What a read log holds (cli/process_log.h): fork bins over any timestamps.
#include <cstdint>

#include "cli/process_log.h"
#include "gtest/gtest.h"

namespace forkguard::cli {
namespace {

TEST(HostileLog, ForkHistogramBinsAnyTimestamps) {
  ForkHistogram h;
  h.Add(INT64_MIN, 1, 1);
  h.Add(INT64_MAX, 1, 0);
  h.Add(0, INT64_MAX, 0);
  int64_t forks = 0;
  for (int64_t n : h.forks) {
    EXPECT_GE(n, 0);
    if (__builtin_add_overflow(forks, n, &forks)) forks = INT64_MAX;
  }
  EXPECT_EQ(forks, INT64_MAX);
  EXPECT_EQ(h.forks.size(), ForkHistogram::kBins);
}

}  // namespace
}  // namespace forkguard::cli
