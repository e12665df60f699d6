#include "loader/crc32c.h"

#include <isa-l/crc.h>

#include <climits>

namespace forkguard::loader {

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
  // crc32_iscsi works on the raw register: it neither inverts the initial
  // value nor the result, so the standard CRC is ~crc32_iscsi(p, n, ~crc).
  // Its length is an int: feed larger buffers in pieces.
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t reg = ~crc;
  while (n > 0) {
    const int len = n > static_cast<size_t>(INT_MAX) ? INT_MAX & ~4095 : static_cast<int>(n);
    reg = crc32_iscsi(p, len, reg);
    p += len;
    n -= static_cast<size_t>(len);
  }
  return ~reg;
}

}  // namespace forkguard::loader
