// The C++ ABI's guards for function-local statics, defined here so that libstdc++.a's
// guard.o is not linked into libforkguard.so: it references the exception machinery, and
// linking that brings eh_alloc.o, whose static initializer mallocs a 70 KiB emergency pool
// in every preloaded process (a heap and its page faults in programs that never allocate,
// ~2 faults per exec; see docs/shim-cost.md). Hidden like everything in the shim.
//
// Itanium C++ ABI 3.3.2: the first byte of the 64-bit guard says "initialized"; the second
// is our lock. A recursive initialization on the same thread (impossible in this code)
// would spin; libstdc++ would throw.
#include <sched.h>

#include <atomic>
#include <cstdint>

namespace {

std::atomic_ref<uint8_t> Byte(uint64_t* guard, int i) {
  return std::atomic_ref<uint8_t>(reinterpret_cast<uint8_t*>(guard)[i]);
}

}  // namespace

extern "C" {

int __cxa_guard_acquire(uint64_t* guard) {
  if (Byte(guard, 0).load(std::memory_order_acquire) != 0) return 0;
  while (Byte(guard, 1).exchange(1, std::memory_order_acquire) != 0) sched_yield();
  if (Byte(guard, 0).load(std::memory_order_acquire) != 0) {
    Byte(guard, 1).store(0, std::memory_order_release);
    return 0;
  }
  return 1;  // the caller initializes, then calls __cxa_guard_release
}

void __cxa_guard_release(uint64_t* guard) {
  Byte(guard, 0).store(1, std::memory_order_release);
  Byte(guard, 1).store(0, std::memory_order_release);
}

void __cxa_guard_abort(uint64_t* guard) { Byte(guard, 1).store(0, std::memory_order_release); }

}  // extern "C"
