#include "shim/verdict/verdict.h"

#include <iterator>

#include "formats/event_schema.h"
#include "names/name_table.h"

namespace forkguard {

const char* ReasonName(Reason r) {
  // By bit: kChildSegv is bit 0.
  static constexpr char kNames[][18] = {
#define FORKGUARD_X(id, name) name,
      FORKGUARD_REASONS(FORKGUARD_X)
#undef FORKGUARD_X
  };
  static_assert(1u << (std::size(kNames) - 1) == kInheritedRdma);
  return FlagName(kNames, r, "?");
}

bool RangeOverlapsAny(uintptr_t addr, uint64_t len, const Vma* vmas, int n) {
  if (len == 0) return false;
  uintptr_t end = addr + len;
  for (int i = 0; i < n; ++i) {
    if (addr < vmas[i].end && vmas[i].start < end) return true;
  }
  return false;
}

namespace {

int Severity(facts::ForkEffect e) {
  switch (e) {
    case facts::ForkEffect::kChildSegv:
      return 3;
    case facts::ForkEffect::kParentCorruption:
      return 2;
    case facts::ForkEffect::kUnknown:
      return 1;
    case facts::ForkEffect::kNothing:
      break;
  }
  return 0;
}

// The rule over every mapping under [addr, addr+len): the worst answer, and whether the
// range would be left intact if it were not dc.
MrFate JudgeRange(const VerdictInput& in, const facts::MachineFacts& m, uintptr_t addr,
                  uint64_t len, bool dc, bool* intact_without_dc) {
  const facts::Tri dc_tri = dc ? facts::Tri::kYes : facts::Tri::kNo;
  uintptr_t end = addr + len;
  // First mapping that ends after addr (they are in address order).
  int lo = FirstEndingAfter(in.kind_vmas, in.kind_count, addr);
  MrFate worst;
  bool any = false;
  *intact_without_dc = true;
  for (int j = lo; j < in.kind_count && in.kind_vmas[j].start < end; ++j) {
    facts::MemoryKind kind = in.kind_vmas[j].kind;
    facts::RangeVerdict rv = facts::DecideRange(m, {kind, dc_tri});
    if (!any || Severity(rv.effect) > Severity(worst.verdict.effect)) {
      worst.kind = kind;
      worst.verdict = rv;
    }
    any = true;
    if (dc &&
        facts::DecideRange(m, {kind, facts::Tri::kNo}).effect != facts::ForkEffect::kNothing) {
      *intact_without_dc = false;
    }
  }
  if (!any) {
    worst.verdict = facts::DecideRange(m, {facts::MemoryKind::kUnknown, dc_tri});
    if (dc && facts::DecideRange(m, {facts::MemoryKind::kUnknown, facts::Tri::kNo}).effect !=
                  facts::ForkEffect::kNothing) {
      *intact_without_dc = false;
    }
  }
  return worst;
}

}  // namespace

ForkVerdict DecideVerdict(const VerdictInput& in, bool* mr_dontfork, MrFate* mr_fate) {
  ForkVerdict v;
  const facts::MachineFacts none;
  const facts::MachineFacts& m = in.machine != nullptr ? *in.machine : none;
  bool needless = true;
  for (int i = 0; i < in.mr_count; ++i) {
    // The kernel's view decides, never ibv_is_fork_initialized(): rdma-core 44 marks
    // ranges DONTFORK even when it reports IBV_FORK_UNNEEDED.
    bool dc = RangeOverlapsAny(in.mrs[i].addr, in.mrs[i].len, in.dc_vmas, in.dc_count);
    if (mr_dontfork != nullptr) mr_dontfork[i] = dc;
    bool intact_without_dc = true;
    MrFate fate = JudgeRange(in, m, in.mrs[i].addr, in.mrs[i].len, dc, &intact_without_dc);
    if (mr_fate != nullptr) mr_fate[i] = fate;
    switch (fate.verdict.effect) {
      case facts::ForkEffect::kChildSegv:
        ++v.dontfork_mrs;
        needless = needless && intact_without_dc;
        break;
      case facts::ForkEffect::kParentCorruption:
        ++v.corruptible_mrs;
        break;
      case facts::ForkEffect::kUnknown:
        ++v.unknown_mrs;
        break;
      case facts::ForkEffect::kNothing:
        break;
    }
  }
  v.dontfork_needless = v.dontfork_mrs > 0 && needless;
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
