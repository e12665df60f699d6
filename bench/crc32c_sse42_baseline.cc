// The loader's hand-written CRC32C before ISA-L (SSE4.2, three streams),
// kept only as the baseline of `scripts/bench loader`'s CRC case.
#include "bench/crc32c_sse42_baseline.h"

#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace forkguard::bench {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // CRC32C, reflected

#if defined(__x86_64__)
// One crc32 instruction has a latency of 3 cycles but a throughput of 1, so a
// single dependent chain runs at a third of the speed. Three independent
// streams over adjacent blocks are combined afterwards with the linear
// "append N zero bytes" operator (Mark Adler's crc32c.c, zlib's crc32_combine).

// GF(2) 32x32 matrix times vector.
uint32_t Gf2Times(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  for (; vec; vec >>= 1, mat++)
    if (vec & 1) sum ^= *mat;
  return sum;
}
void Gf2Square(uint32_t* square, const uint32_t* mat) {
  for (int n = 0; n < 32; n++) square[n] = Gf2Times(mat, mat[n]);
}

// Table that appends `len` (a power of two) zero bytes to a raw CRC register.
struct ZerosTable {
  uint32_t t[4][256];
  explicit ZerosTable(size_t len) {
    uint32_t odd[32], even[32];
    odd[0] = kPoly;  // one zero bit
    for (int n = 1; n < 32; n++) odd[n] = 1u << (n - 1);
    Gf2Square(even, odd);  // two bits
    Gf2Square(odd, even);  // four bits
    const uint32_t* op = even;
    for (;;) {  // 8 bits, 16 bits, ... until len bytes
      Gf2Square(even, odd);
      op = even;
      len >>= 1;
      if (len == 0) break;
      Gf2Square(odd, even);
      op = odd;
      len >>= 1;
      if (len == 0) break;
    }
    for (uint32_t n = 0; n < 256; n++) {
      t[0][n] = Gf2Times(op, n);
      t[1][n] = Gf2Times(op, n << 8);
      t[2][n] = Gf2Times(op, n << 16);
      t[3][n] = Gf2Times(op, n << 24);
    }
  }
  uint32_t Shift(uint32_t crc) const {
    return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
  }
};

constexpr size_t kLong = 8192, kShort = 256;

__attribute__((target("sse4.2"))) uint64_t ThreeWay(const unsigned char*& p, size_t& n, uint64_t c0,
                                                    size_t block, const ZerosTable& zeros) {
  while (n >= 3 * block) {
    uint64_t c1 = 0, c2 = 0;
    const unsigned char* end = p + block;
    do {
      uint64_t v0, v1, v2;
      memcpy(&v0, p, 8);
      memcpy(&v1, p + block, 8);
      memcpy(&v2, p + 2 * block, 8);
      c0 = _mm_crc32_u64(c0, v0);
      c1 = _mm_crc32_u64(c1, v1);
      c2 = _mm_crc32_u64(c2, v2);
      p += 8;
    } while (p < end);
    c0 = zeros.Shift(static_cast<uint32_t>(c0)) ^ c1;
    c0 = zeros.Shift(static_cast<uint32_t>(c0)) ^ c2;
    p += 2 * block;
    n -= 3 * block;
  }
  return c0;
}

__attribute__((target("sse4.2"))) uint32_t Crc32cSse42(const void* data, size_t n, uint32_t crc) {
  static const ZerosTable long_zeros(kLong), short_zeros(kShort);
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t c = static_cast<uint32_t>(~crc);
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    n--;
  }
  c = ThreeWay(p, n, c, kLong, long_zeros);
  c = ThreeWay(p, n, c, kShort, short_zeros);
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    n--;
  }
  return ~static_cast<uint32_t>(c);
}

#endif

}  // namespace

uint32_t Crc32cSse42Baseline(const void* data, size_t n, uint32_t crc) {
  return Crc32cSse42(data, n, crc);
}

}  // namespace forkguard::bench
