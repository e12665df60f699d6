#include "shim/state/state.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>

#include "shim/base/child_path.h"
#include "shim/base/sys.h"
#include "shim/state/fork_frames.h"

namespace forkguard {

constinit RdmaState g_rdma_state;
__thread pid_t t_tid __attribute__((tls_model("initial-exec"))) = 0;
__thread pid_t t_pid __attribute__((tls_model("initial-exec"))) = 0;
namespace {

// A growable array of (handle, T) in mmap'd pages. Not thread-safe: used under StateLock.
template <typename T>
class MmapTable {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  int size() const { return size_; }
  uintptr_t handle(int i) const { return handles_[i]; }
  T& at(int i) { return items_[i]; }

  int Find(uintptr_t h) const {
    for (int i = 0; i < size_; ++i) {
      if (handles_[i] == h) return i;
    }
    return -1;
  }
  // The entry for handle h: the existing one (a destroy we did not see) or a new one at the
  // end; nullptr when the table cannot grow. The caller fills it.
  T* Slot(uintptr_t h, bool* replaced) {
    int i = Find(h);
    *replaced = i >= 0;
    if (i < 0) {
      if (size_ == cap_ && !Grow()) return nullptr;
      i = size_++;
    }
    handles_[i] = h;
    return &items_[i];
  }
  // Replaces an existing entry with the same handle (a destroy we did not see).
  bool Insert(uintptr_t h, const T& v, bool* replaced) {
    T* slot = Slot(h, replaced);
    if (slot == nullptr) return false;
    memcpy(static_cast<void*>(slot), &v, sizeof(T));
    return true;
  }
  void RemoveAt(int i) {
    --size_;
    if (i != size_) {
      handles_[i] = handles_[size_];
      memcpy(static_cast<void*>(&items_[i]), &items_[size_], sizeof(T));
    }
  }

 private:
  // Out of line: the registration path only calls it for its 65th, 129th ... live MR.
  __attribute__((noinline)) bool Grow() {
    int cap = cap_ == 0 ? 64 : cap_ * 2;
    auto* h = static_cast<uintptr_t*>(MapAnonymous(sizeof(uintptr_t) * cap));
    auto* it = static_cast<T*>(MapAnonymous(sizeof(T) * cap));
    if (h == nullptr || it == nullptr) {
      if (h != nullptr) munmap(h, sizeof(uintptr_t) * cap);
      if (it != nullptr) munmap(it, sizeof(T) * cap);
      return false;
    }
    if (size_ > 0) {
      memcpy(h, handles_, sizeof(uintptr_t) * size_);
      memcpy(static_cast<void*>(it), items_, sizeof(T) * size_);
    }
    if (cap_ > 0) {
      munmap(handles_, sizeof(uintptr_t) * cap_);
      munmap(items_, sizeof(T) * cap_);
    }
    handles_ = h;
    items_ = it;
    cap_ = cap;
    return true;
  }

  uintptr_t* handles_ = nullptr;
  T* items_ = nullptr;
  int size_ = 0;
  int cap_ = 0;
};

struct Tables {
  MmapTable<ContextRecord> contexts;
  MmapTable<PdRecord> pds;
  MmapTable<MrRecord> mrs;
  MmapTable<CmRecord> cms;
  InitRecord init;
  static constexpr int kMaxSites = 1024;
  uint64_t sites[kMaxSites] = {};
  int site_count = 0;
};

// Constant-initialized: usable from wrappers that run before any constructor.
constinit Tables g_tables;
constinit RdmaState& g_state = g_rdma_state;

}  // namespace

namespace {

// Takes the state lock, except when this thread's atfork prepare handler already holds it
// (a fork from a signal handler delivered inside another fork's window): then no update is
// in progress on this thread and other threads are blocked, so reading is safe as is.
// ok() is false when the lock's bounded wait gave up: the caller must not touch the tables.
class Guard {
 public:
  explicit Guard(StateLock& l) : l_(l), take_(!(l.HeldByThisThread() && HeldByOurAtfork())) {
    if (take_) ok_ = take_ = l_.Lock();
  }
  ~Guard() {
    if (take_) l_.Unlock();
  }
  bool ok() const { return ok_; }

 private:
  StateLock& l_;
  bool take_;
  bool ok_ = true;
};

// A context, PD or cm id into its table, counted live unless it replaced a record of the
// same handle; and out of it again (false when it was not there).
template <typename Record>
void AddLive(StateLock& lock, std::atomic<int>& live, MmapTable<Record>& table, uintptr_t handle,
             const Record& r) {
  Guard g(lock);
  if (!g.ok()) return;
  bool replaced = false;
  if (table.Insert(handle, r, &replaced) && !replaced) live.fetch_add(1);
}

template <typename Record>
bool RemoveLive(StateLock& lock, std::atomic<int>& live, MmapTable<Record>& table,
                uintptr_t handle) {
  Guard g(lock);
  if (!g.ok()) return false;
  int i = table.Find(handle);
  if (i < 0) return false;
  table.RemoveAt(i);
  live.fetch_sub(1);
  return true;
}

}  // namespace

pid_t CurrentTidSlow() {
  if (t_tid == 0) t_tid = static_cast<pid_t>(syscall(SYS_gettid));
  return t_tid;
}

pid_t CurrentPidSlow() {
  if (t_pid == 0) t_pid = getpid();
  return t_pid;
}

pid_t CachedPid() { return t_pid; }

FORKGUARD_CHILD_PATH void ResetCachedTid() {
  if (t_tid != 0) t_tid = 0;
  if (t_pid != 0) t_pid = 0;
}

namespace {
ZeroFilledAtomic<int64_t, 30LL * 1000 * 1000 * 1000> g_lock_bound_ns;
}  // namespace

int64_t LockBoundNs() { return g_lock_bound_ns.load(std::memory_order_relaxed); }
void SetLockBoundNsForTesting(int64_t ns) { g_lock_bound_ns.store(ns); }

bool StateLock::LockSlow(pid_t me) {
  int64_t start = 0;
  for (int spins = 0;; ++spins) {
    pid_t expected = 0;
    if (owner_.compare_exchange_weak(expected, me, std::memory_order_acquire)) return true;
    if (spins < 64) continue;
    if (gave_up_.load(std::memory_order_relaxed)) {
      // Once given up, never wait again; a second attempt covers a spurious CAS failure.
      expected = 0;
      return owner_.compare_exchange_strong(expected, me, std::memory_order_acquire);
    }
    sched_yield();
    if ((spins & 255) != 0) continue;
    int64_t now = MonotonicNs();
    if (start == 0) {
      start = now;
    } else if (now - start > LockBoundNs()) {
      stuck_owner_.store(owner_.load(std::memory_order_relaxed), std::memory_order_relaxed);
      gave_up_.store(true, std::memory_order_relaxed);
      return false;
    }
  }
}

FORKGUARD_CHILD_PATH void StateLock::ResetInChild() {
  if (owner_.load(std::memory_order_relaxed) != 0) owner_.store(0, std::memory_order_release);
}

bool StateLock::HeldByAnyone() const { return owner_.load(std::memory_order_relaxed) != 0; }

void RdmaState::AddContext(uintptr_t handle, const char* device, bool by_library) {
  ContextRecord r;
  r.owner = CurrentPid();
  r.by_library = by_library;
  CopyCString(r.device, sizeof(r.device), device);
  AddLive(lock_, live_, g_tables.contexts, handle, r);
}

bool RdmaState::RemoveContext(uintptr_t handle) {
  return RemoveLive(lock_, live_, g_tables.contexts, handle);
}

void RdmaState::AddPd(uintptr_t handle, bool by_library) {
  PdRecord r;
  r.owner = CurrentPid();
  r.by_library = by_library;
  AddLive(lock_, live_, g_tables.pds, handle, r);
}

bool RdmaState::RemovePd(uintptr_t handle) {
  return RemoveLive(lock_, live_, g_tables.pds, handle);
}

// The registration path (FORKGUARD_REG_PATH): no call once the lock is free and the table
// has room. The record is copied in pieces of constant size (inline moves, not a call of
// memcpy into libc): the fields, then the frames - a registration's (at most 12) as 16.
FORKGUARD_REG_PATH void RdmaState::AddMr(const MrRecord& record) {
  Guard g(lock_);
  if (!g.ok()) return;
  bool replaced = false;
  ++mr_generation_;
  MrRecord* slot = g_tables.mrs.Slot(record.handle, &replaced);
  if (slot == nullptr) return;
  constexpr size_t kHead = offsetof(MrRecord, stack) + offsetof(RawStack, ips);
  memcpy(static_cast<void*>(slot), &record, kHead);
  // Only the frames the stack has: most of a RawStack is unused capacity.
  constexpr int kFixedFrames = 16;
  static_assert(kFixedFrames <= RawStack::kCapacity);
  int depth = record.stack.depth;
  if (depth >= 0 && depth <= kFixedFrames) {
    memcpy(slot->stack.ips, record.stack.ips, sizeof(uintptr_t) * kFixedFrames);
  } else {
    if (depth < 0 || depth > RawStack::kCapacity) depth = RawStack::kCapacity;
    memcpy(slot->stack.ips, record.stack.ips, sizeof(uintptr_t) * static_cast<size_t>(depth));
  }
  if (!replaced) live_.fetch_add(1);
}

FORKGUARD_REG_PATH bool RdmaState::RemoveMr(uintptr_t handle, MrRecord* removed) {
  Guard g(lock_);
  if (!g.ok()) return false;
  int i = g_tables.mrs.Find(handle);
  if (i < 0) return false;
  if (removed != nullptr)
    memcpy(static_cast<void*>(removed), &g_tables.mrs.at(i), sizeof(*removed));
  g_tables.mrs.RemoveAt(i);
  ++mr_generation_;
  live_.fetch_sub(1);
  return true;
}

void RdmaState::AddCm(uintptr_t handle, RdmaCall call) {
  CmRecord r;
  r.call = call;
  r.owner = CurrentPid();
  AddLive(lock_, live_, g_tables.cms, handle, r);
}

bool RdmaState::RemoveCm(uintptr_t handle) {
  return RemoveLive(lock_, live_, g_tables.cms, handle);
}

bool RdmaState::IsInheritedHandle(uintptr_t handle, pid_t self) {
  if (!AnyLive()) return false;
  Guard g(lock_);
  if (!g.ok()) return false;
  int i = g_tables.contexts.Find(handle);
  if (i >= 0) return g_tables.contexts.at(i).owner != self;
  i = g_tables.pds.Find(handle);
  if (i >= 0) return g_tables.pds.at(i).owner != self;
  i = g_tables.mrs.Find(handle);
  if (i >= 0) return g_tables.mrs.at(i).owner != self;
  i = g_tables.cms.Find(handle);
  if (i >= 0) return g_tables.cms.at(i).owner != self;
  return false;
}

bool RdmaState::NoteInit(RdmaCall call, const char* device, const RawStack& stack,
                         const PythonStack& py, int64_t mono_ns) {
  if (ever_init_.load(std::memory_order_acquire)) return false;
  Guard g(lock_);
  if (!g.ok()) return false;
  if (g_tables.init.set) return false;
  g_tables.init.set = true;
  g_tables.init.call = call;
  CopyCString(g_tables.init.device, sizeof(g_tables.init.device), device);
  g_tables.init.mono_ns = mono_ns;
  g_tables.init.stack = stack;
  memcpy(static_cast<void*>(&g_tables.init.py), &py, sizeof(py));
  ever_init_.store(true, std::memory_order_release);
  return true;
}

bool RdmaState::TakeSnapshot(StateSnapshot* out) {
  // Field by field: the snapshot is large (Python stack) and lives in mmap'd scratch.
  out->counts = LiveCounts();
  out->devices[0] = '\0';
  out->mrs = nullptr;
  out->mr_count = 0;
  out->mapped_bytes = 0;
  Guard g(lock_);
  if (!g.ok()) return false;
  LiveCounts& c = out->counts;
  c.contexts = g_tables.contexts.size();
  c.pds = g_tables.pds.size();
  c.mrs = g_tables.mrs.size();
  for (int i = 0; i < g_tables.contexts.size(); ++i) {
    if (g_tables.contexts.at(i).by_library) ++c.library_contexts;
  }
  for (int i = 0; i < g_tables.pds.size(); ++i) {
    if (g_tables.pds.at(i).by_library) ++c.library_pds;
  }
  for (int i = 0; i < g_tables.cms.size(); ++i) {
    if (g_tables.cms.at(i).call == RdmaCall::kCreateEventChannel) {
      ++c.cm_channels;
    } else {
      ++c.cm_ids;
    }
  }
  // Distinct device names, in order of first appearance.
  size_t used = 0;
  for (int i = 0; i < g_tables.contexts.size(); ++i) {
    const char* name = g_tables.contexts.at(i).device;
    if (name[0] == '\0') continue;
    bool seen = false;
    for (int j = 0; j < i && !seen; ++j) seen = strcmp(g_tables.contexts.at(j).device, name) == 0;
    if (seen) continue;
    size_t n = strlen(name);
    if (used + n + 2 >= sizeof(out->devices)) break;
    if (used > 0) {
      out->devices[used++] = ',';
      out->devices[used++] = ' ';
    }
    memcpy(out->devices + used, name, n);
    used += n;
    out->devices[used] = '\0';
  }
  out->mr_generation = mr_generation_;
  memcpy(static_cast<void*>(&out->init), &g_tables.init, sizeof(out->init));
  if (c.mrs > 0) {
    size_t bytes = sizeof(MrRecord) * static_cast<size_t>(c.mrs);
    void* p = MapAnonymous(bytes);
    if (p == nullptr) return false;
    out->mrs = static_cast<MrRecord*>(p);
    out->mapped_bytes = bytes;
    for (int i = 0; i < c.mrs; ++i) {
      memcpy(static_cast<void*>(&out->mrs[i]), &g_tables.mrs.at(i), sizeof(MrRecord));
    }
    out->mr_count = c.mrs;
  }
  return true;
}

void RdmaState::FreeSnapshot(StateSnapshot* snap) {
  if (snap->mrs != nullptr) munmap(snap->mrs, snap->mapped_bytes);
  snap->mrs = nullptr;
  snap->mr_count = 0;
  snap->mapped_bytes = 0;
}

bool RdmaState::FirstTimeForSite(uint64_t site) {
  Guard g(lock_);
  if (!g.ok()) return true;
  for (int i = 0; i < g_tables.site_count; ++i) {
    if (g_tables.sites[i] == site) return false;
  }
  if (g_tables.site_count < Tables::kMaxSites) g_tables.sites[g_tables.site_count++] = site;
  return true;
}

}  // namespace forkguard
