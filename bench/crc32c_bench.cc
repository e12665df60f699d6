// CRC32C throughput, ISA-L (loader/crc32c.h) against the hand-written SSE4.2
// code it replaced, side by side in one process, at the record sizes the
// loader sees. Prints one line per size: "crc32c: size=N isal_MB_per_s=A
// baseline_MB_per_s=B ratio=A/B" (medians of interleaved rounds).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "bench/crc32c_sse42_baseline.h"
#include "loader/crc32c.h"

namespace {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

template <typename F>
double MBPerS(F f, const std::vector<uint8_t>& buf, size_t size, size_t bytes_per_round) {
  volatile uint32_t sink = 0;
  const size_t count = buf.size() / size;
  double t0 = Now();
  size_t done = 0;
  for (size_t i = 0; done < bytes_per_round; i = (i + 1) % count, done += size)
    sink = f(buf.data() + i * size, size, sink);
  return static_cast<double>(done) / (Now() - t0) / 1e6;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 5;
  std::vector<uint8_t> buf(8 << 20);  // larger than L2: records come from the page cache
  std::mt19937_64 rng(1);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  if (forkguard::loader::Crc32c(buf.data(), buf.size()) !=
      forkguard::bench::Crc32cSse42Baseline(buf.data(), buf.size())) {
    fprintf(stderr, "crc32c_bench: ISA-L and the baseline disagree\n");
    return 1;
  }
  for (size_t size : {1024u, 4096u, 65536u, 1048576u}) {
    std::vector<double> isal, base;
    for (int r = 0; r < rounds; r++) {
      isal.push_back(MBPerS(forkguard::loader::Crc32c, buf, size, 256 << 20));
      base.push_back(MBPerS(forkguard::bench::Crc32cSse42Baseline, buf, size, 256 << 20));
    }
    const double a = Median(isal), b = Median(base);
    printf("crc32c: size=%zu isal_MB_per_s=%.0f baseline_MB_per_s=%.0f ratio=%.2f\n", size, a, b,
           a / b);
  }
  return 0;
}
