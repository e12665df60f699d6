#include "shim/fix/dontfork_view.h"

#include <cstring>

#include "shim/base/skippable_lock.h"
#include "shim/base/sys.h"
#include "shim/fix/fork_fix.h"

namespace forkguard::hooks {
namespace {

// The kernel's view of MADV_DONTFORK (smaps "dc"), cached while no MR was registered or
// deregistered in this process: registration is what sets and clears the flag (rdma-core's
// ibv_dontfork_range/ibv_dofork_range), and reading smaps walks every page table of the
// process. Not cached when no MR is tracked (registrations we cannot see).
// The memory kinds of the mappings under the registered ranges are kept with it (the same
// registrations decide which mappings those are).
struct DontforkCache {
  SkippableLock lock;
  pid_t pid = 0;
  uint64_t generation = 0;
  uint64_t advice_generation = 0;  // madvise(MADV_DONTFORK/MADV_DOFORK) calls seen
  int stored = 0;
  int kinds_stored = 0;
  Vma* vmas = nullptr;       // mmap'd, kMaxDcVmas entries
  KindVma* kinds = nullptr;  // mmap'd, kMaxDcVmas entries
};
constinit DontforkCache g_dc_cache;

// The registered ranges as sorted, disjoint intervals (into `keep`, mr_count entries):
// which mappings the smaps scan records the kinds of.
int MergeRanges(const StateSnapshot& snap, Vma* keep) {
  int n = 0;
  for (int i = 0; i < snap.mr_count; ++i) {
    if (snap.mrs[i].len == 0) continue;
    keep[n++] = Vma{snap.mrs[i].addr, snap.mrs[i].addr + snap.mrs[i].len};
  }
  // Insertion sort would be quadratic for thousands of MRs; a heap sort needs no memory.
  auto less = [](const Vma& a, const Vma& b) { return a.start < b.start; };
  auto sift = [&](int root, int size) {
    for (;;) {
      int child = 2 * root + 1;
      if (child >= size) return;
      if (child + 1 < size && less(keep[child], keep[child + 1])) ++child;
      if (!less(keep[root], keep[child])) return;
      Vma t = keep[root];
      keep[root] = keep[child];
      keep[child] = t;
      root = child;
    }
  };
  for (int i = n / 2 - 1; i >= 0; --i) sift(i, n);
  for (int end = n - 1; end > 0; --end) {
    Vma t = keep[0];
    keep[0] = keep[end];
    keep[end] = t;
    sift(0, end);
  }
  int m = 0;
  for (int i = 0; i < n; ++i) {
    if (m > 0 && keep[i].start <= keep[m - 1].end) {
      if (keep[i].end > keep[m - 1].end) keep[m - 1].end = keep[i].end;
    } else {
      keep[m++] = keep[i];
    }
  }
  return m;
}

}  // namespace

void ReadDontforkView(const StateSnapshot& snap, Vma* keep, Vma* out, int* stored, KindVma* kinds,
                      int* kinds_stored, int* vma_count) {
  *stored = 0;
  *kinds_stored = 0;
  *vma_count = -1;
  bool cacheable = snap.mr_count > 0;
  pid_t pid = CurrentPid();
  // Read before smaps: an madvise during the read makes the stored view miss next time.
  uint64_t advice_generation = ForkAdviceGeneration();
  if (cacheable && g_dc_cache.lock.TryLock()) {
    bool hit = g_dc_cache.vmas != nullptr && g_dc_cache.kinds != nullptr && g_dc_cache.pid == pid &&
               g_dc_cache.generation == snap.mr_generation &&
               g_dc_cache.advice_generation == advice_generation;
    if (hit) {
      memcpy(out, g_dc_cache.vmas, sizeof(Vma) * static_cast<size_t>(g_dc_cache.stored));
      *stored = g_dc_cache.stored;
      memcpy(kinds, g_dc_cache.kinds,
             sizeof(KindVma) * static_cast<size_t>(g_dc_cache.kinds_stored));
      *kinds_stored = g_dc_cache.kinds_stored;
    }
    g_dc_cache.lock.Unlock();
    if (hit) return;
  }
  const SmapsOut o{.dc = out,
                   .dc_cap = kMaxDcVmas,
                   .kinds = kinds,
                   .kinds_cap = kMaxDcVmas,
                   .keep = keep,
                   .keep_count = keep != nullptr ? MergeRanges(snap, keep) : 0};
  int total = 0;
  if (!ReadSmapsView(o, stored, kinds_stored, &total, vma_count)) {
    *stored = 0;
    *kinds_stored = 0;
    *vma_count = -1;
    return;
  }
  if (!cacheable || !g_dc_cache.lock.TryLock()) return;
  if (g_dc_cache.vmas == nullptr) {
    g_dc_cache.vmas = static_cast<Vma*>(MapAnonymous(sizeof(Vma) * kMaxDcVmas));
  }
  if (g_dc_cache.kinds == nullptr) {
    g_dc_cache.kinds = static_cast<KindVma*>(MapAnonymous(sizeof(KindVma) * kMaxDcVmas));
  }
  if (g_dc_cache.vmas != nullptr && g_dc_cache.kinds != nullptr) {
    memcpy(g_dc_cache.vmas, out, sizeof(Vma) * static_cast<size_t>(*stored));
    g_dc_cache.stored = *stored;
    memcpy(g_dc_cache.kinds, kinds, sizeof(KindVma) * static_cast<size_t>(*kinds_stored));
    g_dc_cache.kinds_stored = *kinds_stored;
    g_dc_cache.pid = pid;
    g_dc_cache.generation = snap.mr_generation;
    g_dc_cache.advice_generation = advice_generation;
  }
  g_dc_cache.lock.Unlock();
}

}  // namespace forkguard::hooks
