// The pre-ISA-L CRC32C (hand-written SSE4.2, three streams): the baseline the
// loader bench compares ISA-L against. x86-64 with SSE4.2 only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace forkguard::bench {

uint32_t Crc32cSse42Baseline(const void* data, size_t n, uint32_t crc = 0);

}  // namespace forkguard::bench
