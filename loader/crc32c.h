// CRC32C (Castagnoli), the checksum of the TFRecord framing and of the
// transport's batches. Backed by ISA-L (crc32_iscsi), which picks the fastest
// kernel for this CPU at run time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace forkguard::loader {

// CRC32C of `n` bytes, continuing from `crc` (0 to start): the standard,
// finalized value, so Crc32c(b, m, Crc32c(a, n)) == CRC of a ++ b.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// TFRecord stores CRCs "masked" so that a CRC of data containing CRCs stays
// well distributed: rotate right by 15 and add a constant.
inline uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace forkguard::loader
