// Deterministic batch contents and sizes for transport tests and benchmarks:
// both ends compute the same bytes for batch `seq`, so the receiver can check
// every byte independently of the transport's own checksum.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace forkguard::rdma {

inline uint64_t PatternWord(uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

inline uint64_t PatternSeed(uint64_t seed, uint64_t seq) {
  return (seed ^ (seq + 1) * 0x9e3779b97f4a7c15ull) | 1;
}

inline void FillPattern(void* out, size_t n, uint64_t seed, uint64_t seq) {
  uint64_t st = PatternSeed(seed, seq);
  auto* p = static_cast<unsigned char*>(out);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = PatternWord(st);
    memcpy(p + i, &w, 8);
  }
  uint64_t w = PatternWord(st);
  for (; i < n; ++i) p[i] = static_cast<unsigned char>(w >> (8 * (i % 8)));
}

// Offset of the first byte that differs from the pattern, or n if none.
inline size_t CheckPattern(const void* in, size_t n, uint64_t seed, uint64_t seq) {
  uint64_t st = PatternSeed(seed, seq);
  auto* p = static_cast<const unsigned char*>(in);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = PatternWord(st);
    if (memcmp(p + i, &w, 8) != 0) {
      for (size_t k = 0; k < 8; ++k)
        if (p[i + k] != static_cast<unsigned char>(w >> (8 * k))) return i + k;
    }
  }
  uint64_t w = PatternWord(st);
  for (; i < n; ++i)
    if (p[i] != static_cast<unsigned char>(w >> (8 * (i % 8)))) return i;
  return n;
}

// The "mixed" size mix of the 1,000-batch tests: batch 0 is 1 KiB, every 50th
// batch (49, 99, ...) is 4 MiB, the rest log-uniform in [1 KiB, 1 MiB].
// 1,000 batches total about 0.23 GB, ~6 s at Soft-RoCE's ~40 MB/s.
inline size_t MixedBatchSize(uint64_t seed, uint64_t seq) {
  if (seq == 0) return 1024;
  if (seq % 50 == 49) return 4u << 20;
  uint64_t st = PatternSeed(seed ^ 0x5a5a5a5a, seq);
  double u = static_cast<double>(PatternWord(st) >> 11) / 9007199254740992.0;  // [0, 1)
  double bytes = std::exp2(10.0 + 10.0 * u);  // 1 KiB .. 1 MiB, log-uniform
  size_t b = static_cast<size_t>(bytes);
  return b < 1024 ? 1024 : (b > (1u << 20) ? (1u << 20) : b);
}

}  // namespace forkguard::rdma
