// RdmaState: the live RDMA resources of this process and who created them.
//
// Knows nothing about interposition or policy. Thread-safe through one small lock that is
// also taken by a pthread_atfork prepare handler (so no other thread is mid-update when the
// address space is copied) and released/reset in the parent/child handlers. Tables live in
// the shim's own mmap'd pages, never on the heap: a heap page can share a page with a
// registered (MADV_DONTFORK) buffer and vanish in a forked child.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "shim/base/sys.h"
#include "shim/stack/python_stack.h"
#include "shim/stack/stack.h"
#include "shim/state/rdma_call.h"

namespace forkguard {

constexpr size_t kDeviceNameLen = 64;

struct ContextRecord {
  pid_t owner = 0;
  char device[kDeviceNameLen] = {};
  bool by_library = false;  // opened by librdmacm for itself (see RdmaState::AddContext)
};

struct PdRecord {
  pid_t owner = 0;
  bool by_library = false;
};

struct MrRecord {
  uintptr_t handle = 0;
  uintptr_t addr = 0;
  uint64_t len = 0;
  int access = 0;
  RdmaCall call = RdmaCall::kRegMr;
  bool dontfork_at_register = false;
  pid_t owner = 0;
  RawStack stack;
};

struct CmRecord {
  RdmaCall call = RdmaCall::kCreateId;
  pid_t owner = 0;
};

// The first RDMA initialization of the process (kept after everything is closed).
struct InitRecord {
  bool set = false;
  RdmaCall call = RdmaCall::kOpenDevice;
  char device[kDeviceNameLen] = {};
  int64_t mono_ns = 0;
  RawStack stack;
  PythonStack py{};  // depth 0 outside CPython or without the GIL
};

struct LiveCounts {
  int contexts = 0;
  int pds = 0;
  int mrs = 0;
  int cm_channels = 0;
  int cm_ids = 0;
  int uverbs_fds = 0;   // from the descriptor backstop
  int rdma_cm_fds = 0;  // from the descriptor backstop
  // Of contexts/pds: the ones librdmacm opened for itself (ibv_open_device/ibv_alloc_pd
  // called from librdmacm's own code), which it keeps after the program destroyed every
  // id and channel.
  int library_contexts = 0;
  int library_pds = 0;
};

// A consistent copy taken under the lock for one fork decision. `mrs` points into memory
// owned by the snapshot (mmap'd); released by FreeSnapshot.
struct StateSnapshot {
  LiveCounts counts;
  char devices[128] = {};  // distinct device names of live contexts, comma separated
  InitRecord init;
  uint64_t mr_generation = 0;  // changes with every MR registered or deregistered
  MrRecord* mrs = nullptr;
  int mr_count = 0;
  size_t mapped_bytes = 0;
};

// Small helpers with no policy (the clocks are in shim/base/sys.h). Inline: the registration
// path asks on every call (the syscalls are made once per thread, out of line).
extern __thread pid_t t_tid __attribute__((tls_model("initial-exec")));
extern __thread pid_t t_pid __attribute__((tls_model("initial-exec")));
pid_t CurrentTidSlow();
pid_t CurrentPidSlow();
inline pid_t CurrentTid() {
  pid_t tid = t_tid;
  return tid != 0 ? tid : CurrentTidSlow();
}
// getpid() cached per thread (reset with the tid in a forked child by the atfork handler).
inline pid_t CurrentPid() {
  pid_t pid = t_pid;
  return pid != 0 ? pid : CurrentPidSlow();
}
// Forget the cached thread id (in a forked child).
void ResetCachedTid();
// The pid CurrentPid() cached on this thread, 0 when none yet (no syscall, no write). In a
// process created by a raw clone()/clone3() it is still the parent's.
pid_t CachedPid();

// Lock held by the atfork prepare handler and by every table update. Reentrant for the
// owning thread only in the sense that the prepare handler skips it when the forking thread
// already holds it (fork from a signal handler that interrupted an update).
//
// The wait is bounded: a lock held for longer than LockBoundNs() (30 s; a fork of the
// largest process holds it for a few seconds at most) can only be a leak of ours, and
// forkguard must never hang its host. Lock() then returns false without the lock, GaveUp()
// turns true, and every later Lock() tries once and never waits: the caller goes on without
// the tables (a record is lost, a fork is decided from the live count and the descriptor
// scan) and the program goes on.
class StateLock {
 public:
  // Inline: the uncontended case is one compare-and-swap (LockSlow waits).
  [[nodiscard]] bool Lock() {
    pid_t expected = 0;
    pid_t me = CurrentTid();
    if (owner_.compare_exchange_strong(expected, me, std::memory_order_acquire)) return true;
    return LockSlow(me);
  }
  void Unlock() { owner_.store(0, std::memory_order_release); }
  bool HeldByThisThread() const { return owner_.load(std::memory_order_relaxed) == CurrentTid(); }
  bool HeldByAnyone() const;
  void ResetInChild();
  bool GaveUp() const { return gave_up_.load(std::memory_order_relaxed); }
  // The thread that held the lock when the wait gave up (0 if it never did).
  pid_t StuckOwner() const { return stuck_owner_.load(std::memory_order_relaxed); }

 private:
  bool LockSlow(pid_t me);
  std::atomic<pid_t> owner_{0};
  std::atomic<bool> gave_up_{false};
  std::atomic<pid_t> stuck_owner_{0};
};

// The bound of StateLock::Lock's wait; tests shorten it.
int64_t LockBoundNs();
void SetLockBoundNsForTesting(int64_t ns);

// All functions are safe to call before the constructor ran. Handles are opaque addresses.
class RdmaState {
 public:
  // `by_library`: opened by librdmacm's own code (its cached per-device context and PD).
  void AddContext(uintptr_t handle, const char* device, bool by_library = false);
  bool RemoveContext(uintptr_t handle);
  void AddPd(uintptr_t handle, bool by_library = false);
  bool RemovePd(uintptr_t handle);
  void AddMr(const MrRecord& record);
  // Fills *removed (when non-null) with the record; false when the handle is unknown.
  bool RemoveMr(uintptr_t handle, MrRecord* removed);
  void AddCm(uintptr_t handle, RdmaCall call);
  bool RemoveCm(uintptr_t handle);

  // True when a record for this handle was created by another process (this is a forked
  // child using its parent's object).
  bool IsInheritedHandle(uintptr_t handle, pid_t self);

  // Records the first RDMA initialization; returns true when this call was the first.
  bool NoteInit(RdmaCall call, const char* device, const RawStack& stack, const PythonStack& py,
                int64_t mono_ns);

  // Fast path: anything tracked at all? Lock-free, no allocation.
  bool AnyLive() const { return live_.load(std::memory_order_acquire) > 0; }
  bool EverInitialized() const { return ever_init_.load(std::memory_order_acquire); }

  // Copies everything needed for a verdict. Allocates with mmap only.
  bool TakeSnapshot(StateSnapshot* out);
  static void FreeSnapshot(StateSnapshot* snap);

  // Once-per-site reporting: returns true the first time `site` is seen.
  bool FirstTimeForSite(uint64_t site);

  StateLock& lock() { return lock_; }

 private:
  StateLock lock_;
  std::atomic<int> live_{0};
  std::atomic<bool> ever_init_{false};
  uint64_t mr_generation_ = 0;  // under the lock
};

// Inline: every RDMA hook asks.
extern RdmaState g_rdma_state;
inline RdmaState& GlobalState() { return g_rdma_state; }

// The state lock across fork (the atfork handlers, HeldByOurAtfork): shim/state/fork_frames.h.

}  // namespace forkguard
