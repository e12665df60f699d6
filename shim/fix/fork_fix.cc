#include "shim/fix/fork_fix.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "formats/event_schema.h"
#include "shim/base/sys.h"

namespace forkguard {
namespace {

// The window's holder (a thread id, 0: free) and its process: a child made by a raw clone
// while another thread held it inherits the word, and must not wait on it.
constinit std::atomic<int> g_fix_owner{0};
constinit std::atomic<int> g_fix_pid{0};
constinit std::atomic<int> g_fix_waiters{0};
constinit std::atomic<uint64_t> g_advice_generation{0};
constinit std::atomic<FixPlan*> g_plan{nullptr};

// The longest wait for the window, in total: a fork's fix takes a smaps read and a few
// system calls; a holder stopped longer than this (a debugger) is not waited for.
constexpr int64_t kWindowWaitNs = 10'000'000'000;

int RawMadvise(uintptr_t start, uintptr_t end, int advice) {
  return static_cast<int>(syscall(SYS_madvise, reinterpret_cast<void*>(start),
                                  static_cast<size_t>(end - start), advice));
}

uintptr_t AlignDown(uintptr_t a, uint64_t to) { return a - a % to; }
uintptr_t AlignUp(uintptr_t a, uint64_t to) {
  uintptr_t r = a % to;
  return r == 0 ? a : a + (to - r);
}

// Waits until the word is no longer `seen` or `deadline` passes; false at the deadline.
bool WaitWord(int seen, int64_t deadline) {
  int64_t now = MonotonicNs();
  if (now >= deadline) return false;
  int64_t left = deadline - now;
  if (left > 100'000'000) left = 100'000'000;  // re-check now and then (a lost wake-up)
  timespec ts{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
  g_fix_waiters.fetch_add(1, std::memory_order_seq_cst);
  syscall(SYS_futex, reinterpret_cast<int*>(&g_fix_owner), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr,
          0);
  g_fix_waiters.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

const char* FixActionName(FixAction a) {
  switch (a) {
    case FixAction::kCopied:
      return schema::kFixedCopied;
    case FixAction::kWithheld:
      return schema::kFixedWithheld;
    case FixAction::kFailed:
      return schema::kFixedFailed;
    case FixAction::kNone:
      break;
  }
  return "";
}

void PlanFix(const facts::MachineFacts& m, const MrRecord* mrs, int mr_count, const KindVma* kinds,
             int kind_count, FixPlan* out, FixAction* mr_action) {
  out->count = 0;
  out->overflow = false;
  const uint64_t small = PageSize();
  for (int i = 0; i < mr_count; ++i) {
    if (mr_action != nullptr) mr_action[i] = FixAction::kNone;
    uintptr_t addr = mrs[i].addr;
    uintptr_t end = addr + mrs[i].len;
    if (mrs[i].len == 0 || end < addr) continue;
    for (int j = FirstEndingAfter(kinds, kind_count, addr); j < kind_count && kinds[j].start < end;
         ++j) {
      const KindVma& v = kinds[j];
      uint64_t ps = v.page_size >= small ? v.page_size : small;
      uintptr_t s = AlignDown(addr, ps);
      uintptr_t e = AlignUp(end, ps);
      if (s < v.start) s = v.start;
      if (e > v.end || e < end) e = v.end;
      if (s >= e) continue;
      facts::ForkEffect without = facts::DecideRange(m, {v.kind, facts::Tri::kNo}).effect;
      bool withhold;
      if (v.dontfork) {
        if (without != facts::ForkEffect::kNothing) continue;  // dc is what keeps it intact
        withhold = false;
      } else {
        if (without == facts::ForkEffect::kNothing) continue;  // the kernel copies or shares it
        withhold = true;
      }
      if (mr_action != nullptr && mr_action[i] != FixAction::kWithheld) {
        mr_action[i] = withhold ? FixAction::kWithheld : FixAction::kCopied;
      }
      // The same pages planned for an earlier MR (MRs over one buffer): once is enough.
      bool covered = false;
      for (int k = 0; k < out->count && !covered; ++k) {
        covered =
            out->seg[k].withhold == withhold && out->seg[k].start <= s && e <= out->seg[k].end;
      }
      if (covered) continue;
      if (out->count == FixPlan::kMaxSegments) {
        out->overflow = true;
        continue;
      }
      out->seg[out->count++] = FixSegment{s, e, i, v.kind, withhold, false};
    }
  }
}

void ApplyFix(FixPlan* plan, FixSummary* sum, FixAction* mr_action) {
  for (int k = 0; k < plan->count; ++k) {
    FixSegment& g = plan->seg[k];
    g.applied = RawMadvise(g.start, g.end, g.withhold ? MADV_DONTFORK : MADV_DOFORK) == 0;
    uint64_t bytes = g.end - g.start;
    unsigned bit = 1u << static_cast<unsigned>(g.kind);
    if (!g.applied) {
      ++sum->failed;
      if (g.withhold) sum->failed_withhold = true;
      if (mr_action != nullptr) mr_action[g.mr] = FixAction::kFailed;
    } else if (g.withhold) {
      ++sum->withheld;
      sum->withheld_bytes += bytes;
      sum->withheld_kinds |= bit;
    } else {
      ++sum->copied;
      sum->copied_bytes += bytes;
      sum->copied_kinds |= bit;
    }
  }
  // A range that needed withholding and found no room in the plan is left as it was.
  if (plan->overflow) sum->failed_withhold = true;
}

void RevertFix(FixPlan* plan) {
  for (int k = plan->count - 1; k >= 0; --k) {
    FixSegment& g = plan->seg[k];
    if (g.applied) RawMadvise(g.start, g.end, g.withhold ? MADV_DOFORK : MADV_DONTFORK);
    g.applied = false;
  }
  plan->count = 0;
  plan->overflow = false;
}

FixPlan* GlobalFixPlan() {
  FixPlan* p = g_plan.load(std::memory_order_acquire);
  if (p != nullptr) return p;
  // Only the window's holder gets here: one mapping per process.
  p = static_cast<FixPlan*>(MapAnonymous(sizeof(FixPlan)));
  if (p != nullptr) g_plan.store(p, std::memory_order_release);
  return p;
}

bool EnterFixWindow(const char** why) {
  int me = CurrentTid();
  int pid = CurrentPid();
  int64_t deadline = MonotonicNs() + kWindowWaitNs;
  for (;;) {
    int seen = 0;
    if (g_fix_owner.compare_exchange_strong(seen, me, std::memory_order_acquire)) {
      g_fix_pid.store(pid, std::memory_order_relaxed);
      return true;
    }
    if (seen == me) {
      *why = "a fork from a signal handler while this thread's own fork was being fixed";
      return false;
    }
    if (g_fix_pid.load(std::memory_order_relaxed) != pid) {
      // Inherited from a parent by a raw clone: nobody here holds it.
      g_fix_owner.compare_exchange_strong(seen, 0, std::memory_order_relaxed);
      continue;
    }
    if (!WaitWord(seen, deadline)) {
      *why = "another thread's fork kept the fix window for 10 s";
      return false;
    }
  }
}

void LeaveFixWindow() {
  g_fix_owner.store(0, std::memory_order_seq_cst);
  // A waiter counts itself before it sleeps, and sleeps only while the word is what it saw:
  // none can be missed. No waiter: no system call.
  if (g_fix_waiters.load(std::memory_order_seq_cst) == 0) return;
  syscall(SYS_futex, reinterpret_cast<int*>(&g_fix_owner), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
          nullptr, 0);
}

void ResetFixWindowInChild() {
  if (g_fix_owner.load(std::memory_order_relaxed) != 0) {
    g_fix_owner.store(0, std::memory_order_relaxed);
    g_fix_pid.store(0, std::memory_order_relaxed);
  }
  g_fix_waiters.store(0, std::memory_order_relaxed);
}

bool InFixWindow() {
  int owner = g_fix_owner.load(std::memory_order_relaxed);
  return owner != 0 && owner == CurrentTid();
}

void WaitOutFixWindow() {
  int seen = g_fix_owner.load(std::memory_order_acquire);
  if (seen == 0) return;
  int me = CurrentTid();
  int pid = CurrentPid();
  int64_t deadline = MonotonicNs() + kWindowWaitNs;
  while (seen != 0 && seen != me && g_fix_pid.load(std::memory_order_relaxed) == pid) {
    if (!WaitWord(seen, deadline)) return;
    seen = g_fix_owner.load(std::memory_order_acquire);
  }
}

void NoteForkAdvice() { g_advice_generation.fetch_add(1, std::memory_order_relaxed); }
uint64_t ForkAdviceGeneration() { return g_advice_generation.load(std::memory_order_relaxed); }

}  // namespace forkguard
