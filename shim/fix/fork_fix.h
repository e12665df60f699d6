// FORKGUARD_MODE=fix: at a fork after RDMA init, every registered range forks the way this
// machine keeps the parent's data intact, decided per mapping by the fork rule
// (facts/fork_rule.h) from the same facts as the verdict:
//   - the range is MADV_DONTFORK ("dc") and the kernel copies this kind of memory at fork
//     (the rule's answer without dc is "nothing"): MADV_DOFORK for the fork, so that the
//     child gets a copy and lives (the parent keeps its pinned pages) - "copied";
//   - the range is not dc and the kernel does not copy it (parent-corruption), or nothing
//     can tell (unknown): MADV_DONTFORK for the fork, so that the parent's data stays
//     intact; the child has no mapping there - "withheld".
// In the parent every change is undone right after the fork (the same raw madvise calls,
// last first), so the ranges are exactly as the libraries left them. While one thread's fork
// is being fixed (the window: from the decision to the undo), another thread's
// madvise(MADV_DONTFORK/MADV_DOFORK) through our wrapper - rdma-core registering or
// deregistering - waits for it, so that the undo cannot overwrite what the library did
// meanwhile; a second fork waits too. Every wait is bounded.
// Malloc-free and async-signal-safe: raw system calls and atomics only.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "facts/fork_rule.h"
#include "shim/state/state.h"
#include "shim/verdict/proc_facts.h"

namespace forkguard {

enum class FixAction : unsigned char { kNone, kCopied, kWithheld, kFailed };
// "", "copied", "withheld", "failed" (the event log's `ranges[].fixed`).
const char* FixActionName(FixAction a);

// One piece of a registered range (within one mapping, aligned to its page size) whose fork
// behaviour fix mode changes.
struct FixSegment {
  uintptr_t start;
  uintptr_t end;
  int mr;  // index in the snapshot's MRs
  facts::MemoryKind kind;
  bool withhold;  // MADV_DONTFORK for the fork; else MADV_DOFORK
  bool applied;   // the madvise succeeded: undone after the fork
};

struct FixPlan {
  static constexpr int kMaxSegments = 1024;
  int count;
  bool overflow;  // more segments were needed than fit: the rest is not changed
  FixSegment seg[kMaxSegments];
};

// What fix mode did for one fork (the message and the log).
struct FixSummary {
  int copied = 0;    // segments made MADV_DOFORK
  int withheld = 0;  // segments made MADV_DONTFORK
  int failed = 0;    // segments whose madvise failed (left as they were)
  uint64_t copied_bytes = 0;
  uint64_t withheld_bytes = 0;
  unsigned copied_kinds = 0;  // bit per facts::MemoryKind
  unsigned withheld_kinds = 0;
  // A range that had to be withheld (or could not be planned) was not: the fork fails as
  // in error mode, since the parent's data would not stay intact.
  bool failed_withhold = false;
  // Fix mode, but this fork was not fixed (then it is decided as in warn mode); why.
  const char* not_fixed = nullptr;
  bool changed() const { return copied + withheld > 0; }
};

// Pure (no I/O): the changes for a fork of `mrs`, over `kinds` (the mappings under them, in
// address order, with their dc flags and page sizes). `mr_action` (may be null; mr_count
// entries) receives each MR's planned action. Resets `out`.
void PlanFix(const facts::MachineFacts& m, const MrRecord* mrs, int mr_count, const KindVma* kinds,
             int kind_count, FixPlan* out, FixAction* mr_action);
// Applies the plan with raw madvise system calls; fills `sum` and marks failed MRs in
// `mr_action` (may be null).
void ApplyFix(FixPlan* plan, FixSummary* sum, FixAction* mr_action);
// Undoes what ApplyFix applied, last first, and empties the plan.
void RevertFix(FixPlan* plan);

// The process's one plan (mapped at first use; null without memory).
FixPlan* GlobalFixPlan();

// The window. Enter: false (nothing entered) when this thread is already in it (a fork
// from a signal handler inside a fix) or another thread kept it past the bounded wait; `why`
// says which. Leave wakes the waiters. In a child, Reset (no other thread exists there).
bool EnterFixWindow(const char** why);
void LeaveFixWindow();
void ResetFixWindowInChild();
bool InFixWindow();  // this thread holds it
// Called by the madvise wrapper before MADV_DONTFORK/MADV_DOFORK: waits (bounded) while
// another thread of this process holds the window.
void WaitOutFixWindow();
// A successful MADV_DONTFORK/MADV_DOFORK seen by the wrapper: the dc view's cache key.
void NoteForkAdvice();
uint64_t ForkAdviceGeneration();

}  // namespace forkguard
