#include "loader/crc32c.h"

#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace forkguard::loader {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // CRC32C, reflected

struct Tables {
  uint32_t t[8][256];
  constexpr Tables() : t() {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c >> 1) ^ (kPoly & (0u - (c & 1)));
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
      for (int s = 1; s < 8; s++) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    }
  }
};
constexpr Tables kTables;

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t Crc32cSse42(const void* data, size_t n, uint32_t crc) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    n--;
  }
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

bool HasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t Crc32cPortable(const void* data, size_t n, uint32_t crc) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  while (n >= 8) {  // slicing-by-8
    uint32_t lo, hi;
    memcpy(&lo, p, 4);
    memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = kTables.t[7][lo & 0xff] ^ kTables.t[6][(lo >> 8) & 0xff] ^ kTables.t[5][(lo >> 16) & 0xff] ^
        kTables.t[4][lo >> 24] ^ kTables.t[3][hi & 0xff] ^ kTables.t[2][(hi >> 8) & 0xff] ^
        kTables.t[1][(hi >> 16) & 0xff] ^ kTables.t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = (c >> 8) ^ kTables.t[0][(c ^ *p++) & 0xff];
    n--;
  }
  return ~c;
}

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
#if defined(__x86_64__)
  if (HasSse42()) return Crc32cSse42(data, n, crc);
#endif
  return Crc32cPortable(data, n, crc);
}

bool Crc32cIsHardware() {
#if defined(__x86_64__)
  return HasSse42();
#else
  return false;
#endif
}

}  // namespace forkguard::loader
