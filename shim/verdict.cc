#include "shim/verdict.h"

namespace forkguard {

const char* ReasonName(Reason r) {
  switch (r) {
    case kChildSegv:
      return "child-segv";
    case kParentCorruption:
      return "parent-corruption";
    case kInheritedRdma:
      return "inherited-rdma";
  }
  return "?";
}

bool RangeOverlapsAny(uintptr_t addr, uint64_t len, const Vma* vmas, int n) {
  if (len == 0) return false;
  uintptr_t end = addr + len;
  for (int i = 0; i < n; ++i) {
    if (addr < vmas[i].end && vmas[i].start < end) return true;
  }
  return false;
}

ForkVerdict DecideVerdict(const VerdictInput& in, bool* mr_dontfork) {
  ForkVerdict v;
  for (int i = 0; i < in.mr_count; ++i) {
    // The kernel's view decides, never ibv_is_fork_initialized(): rdma-core 44 marks
    // ranges DONTFORK even when it reports IBV_FORK_UNNEEDED.
    bool dc = RangeOverlapsAny(in.mrs[i].addr, in.mrs[i].len, in.dc_vmas, in.dc_count);
    if (mr_dontfork != nullptr) mr_dontfork[i] = dc;
    if (dc) {
      ++v.dontfork_mrs;
    } else if (in.kernel_cof == KernelCof::kNo) {
      ++v.corruptible_mrs;
    }
  }
  // Registrations we did not see (static libibverbs, handle lookups): device descriptors
  // open that no tracked context explains, so dc VMAs are most likely registered memory.
  // (With tracked contexts, dc VMAs outside MRs are provider queues the child never touches.)
  if (in.mr_count == 0 && in.counts.contexts == 0 && in.counts.uverbs_fds > 0) {
    v.unattributed_dc = in.dc_count;
  }
  if (v.dontfork_mrs > 0 || v.unattributed_dc > 0) v.reasons |= kChildSegv;
  if (v.corruptible_mrs > 0) v.reasons |= kParentCorruption;
  const LiveCounts& c = in.counts;
  if (c.contexts > 0 || c.pds > 0 || c.mrs > 0 || c.cm_channels > 0 || c.cm_ids > 0 ||
      c.uverbs_fds > 0 || c.rdma_cm_fds > 0) {
    v.reasons |= kInheritedRdma;
  }
  v.library_cache_only = v.reasons == kInheritedRdma && c.contexts > 0 &&
                         c.contexts == c.library_contexts && c.pds == c.library_pds && c.mrs == 0 &&
                         c.cm_channels == 0 && c.cm_ids == 0 && c.rdma_cm_fds == 0 &&
                         c.uverbs_fds <= c.contexts;
  if (in.child_execs) {
    // Exec replaces the address space and closes nothing the child could misuse in
    // between (it runs no RDMA code): only what it can touch before exec counts - the
    // DONTFORK ranges (preexec_fn may touch them) and the parent's own pages.
    v.child_execs = true;
    v.reasons &= ~static_cast<unsigned>(kInheritedRdma);
    v.library_cache_only = false;
  }
  return v;
}

}  // namespace forkguard
