// A lock for work that can simply be skipped when someone else is doing it (caches).
#pragma once

#include <atomic>

namespace forkguard {

// TryLock never waits: safe when a signal handler interrupts the holder on the same thread
// (the handler's TryLock fails and it goes on without the cache). Async-signal-safe.
class SkippableLock {
 public:
  bool TryLock() { return !busy_.exchange(true, std::memory_order_acquire); }
  void Unlock() { busy_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> busy_{false};
};

}  // namespace forkguard
