// The `dc` view: which pages the kernel has marked MADV_DONTFORK (smaps "dc") and the memory
// kinds (anonymous, THP, hugetlb, file) of the mappings under the registered ranges, read
// from /proc/self/smaps for a fork decision and cached while the registrations stay the same.
#pragma once

#include "shim/state/state.h"
#include "shim/verdict/proc_facts.h"

namespace forkguard::hooks {

// The most mappings the view holds, of either kind.
constexpr int kMaxDcVmas = 4096;

// Fills `out` (kMaxDcVmas entries) with the DONTFORK mappings and `kinds` (kMaxDcVmas
// entries) with the kinds of the mappings under `snap`'s registered ranges (`keep`: scratch
// for the merged ranges, snap.mr_count + 1 entries, or null for no kinds); `*vma_count`: the
// process's mappings, -1 when smaps could not be read (then nothing is stored). No malloc;
// the cache is taken with a try-lock, so a fork that finds it busy reads smaps itself.
void ReadDontforkView(const StateSnapshot& snap, Vma* keep, Vma* out, int* stored, KindVma* kinds,
                      int* kinds_stored, int* vma_count);

}  // namespace forkguard::hooks
