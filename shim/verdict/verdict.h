// ForkVerdict: is this fork a hazard, and why. Pure logic over a snapshot of the state and
// the kernel's view; no I/O, no dlsym, no allocation.
#pragma once

#include <cstdint>

#include "facts/fork_rule.h"
#include "shim/state/state.h"
#include "shim/verdict/proc_facts.h"

namespace forkguard {

enum Reason : unsigned {
  kChildSegv = 1u << 0,         // live MADV_DONTFORK ranges: the child faults on them
  kParentCorruption = 1u << 1,  // registered pages not DONTFORK on a kernel without COF
  kInheritedRdma = 1u << 2,     // contexts/PDs/MRs/cm objects/descriptors the child inherits
};
const char* ReasonName(Reason r);

struct VerdictInput {
  LiveCounts counts;  // including the backstop's descriptor counts
  const MrRecord* mrs = nullptr;
  int mr_count = 0;
  // The kernel's view: VMAs with the "dc" flag (only read when something is registered or
  // RDMA descriptors are open).
  const Vma* dc_vmas = nullptr;
  int dc_count = 0;
  // The mappings under the registered ranges, in address order: their memory kinds.
  const KindVma* kind_vmas = nullptr;
  int kind_count = 0;
  // The machine facts for the rule (facts/fork_rule.h); null: nothing known.
  const facts::MachineFacts* machine = nullptr;
  // The child is known to exec right away (CPython's _posixsubprocess.fork_exec): judged by
  // what it can touch before exec. See ApplyChildExecs.
  bool child_execs = false;
};

struct ForkVerdict {
  unsigned reasons = 0;
  int dontfork_mrs = 0;     // tracked MRs that overlap a dc VMA
  int unattributed_dc = 0;  // dc VMAs counted when devices are open that we did not see
  int corruptible_mrs = 0;  // tracked MRs the rule says go stale in the parent
  int unknown_mrs = 0;      // tracked MRs for which nothing can tell (facts/fork_rule.h)
  // Every dc range would have been left intact without the dc: fork support (the marking)
  // is not needed on this kernel for this memory and only kills children.
  bool dontfork_needless = false;
  // All that is live is what librdmacm keeps for itself after the program destroyed every
  // id and channel (its cached device context and PD): a warning only, in every mode - the
  // program has nothing left to release. A child that calls librdmacm again reuses it.
  bool library_cache_only = false;
  // The child execs right away: inherited objects alone are not a hazard (exec drops them),
  // and the fork is never failed or aborted (see shim/README.md).
  bool child_execs = false;
  bool hazard() const { return reasons != 0; }
  // Whether FORKGUARD_MODE=error/abort apply (warn applies to every hazard).
  bool enforceable() const { return hazard() && !library_cache_only && !child_execs; }
};

bool RangeOverlapsAny(uintptr_t addr, uint64_t len, const Vma* vmas, int n);

// What the rule says for one registered range.
struct MrFate {
  facts::MemoryKind kind = facts::MemoryKind::kUnknown;  // of the mapping that decided
  facts::RangeVerdict verdict;
};

// `mr_dontfork` (may be null) receives, per MR, whether the kernel marks it dc; `mr_fate`
// (may be null) the rule's answer per MR (the worst over the mappings under it).
ForkVerdict DecideVerdict(const VerdictInput& in, bool* mr_dontfork, MrFate* mr_fate = nullptr);

}  // namespace forkguard
