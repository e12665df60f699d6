// CRC32C (Castagnoli), the checksum of the TFRecord framing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace forkguard::loader {

// CRC32C of `n` bytes, continuing from `crc` (0 to start). Uses SSE4.2's crc32
// instruction when the CPU has it (checked once at run time), a table otherwise.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// The table implementation, always available (tests compare the two).
uint32_t Crc32cPortable(const void* data, size_t n, uint32_t crc = 0);

// True when Crc32c() uses the SSE4.2 instruction.
bool Crc32cIsHardware();

// TFRecord stores CRCs "masked" so that a CRC of data containing CRCs stays
// well distributed: rotate right by 15 and add a constant.
inline uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t UnmaskCrc32c(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace forkguard::loader
