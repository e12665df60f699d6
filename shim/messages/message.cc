#include "shim/messages/message.h"

#include "shim/base/config.h"
#include "shim/messages/fix_advice.h"

namespace forkguard {

namespace {

// At most this many ranges are listed; the rest are summarized.
constexpr int kMaxListedRanges = 16;

void Plural(TextBuffer& out, long n, const char* one, const char* many) {
  out.Dec(n).Char(' ').Str(n == 1 ? one : many);
}

// A count, or "?" when it could not be read (negative).
void CountOrUnknown(TextBuffer& out, long n) {
  if (n >= 0) {
    out.Dec(n);
  } else {
    out.Str("?");
  }
}

// "forkguard: fork after RDMA init in pid P (prog, rank R on host)": the first line of every
// hazard message.
void FormatForkHead(TextBuffer& out, const ProcessIdentity& who) {
  out.Str("forkguard: fork after RDMA init in pid ").Dec(who.pid).Str(" (").Str(who.prog);
  if (who.rank >= 0) out.Str(", rank ").Dec(who.rank);
  out.Str(" on ").Str(who.host).Char(')');
}

// "    0x..-0x.. (2.0 MiB, hugetlb) ibv_reg_mr by f (obj+0x..): why" for each MR whose
// effect is `effect`.
void FormatRangesWithEffect(TextBuffer& out, const ForkReport& r, facts::ForkEffect effect,
                            bool demangle) {
  if (r.mr_fate == nullptr) return;
  const StateSnapshot& s = *r.snap;
  int listed = 0;
  int total = 0;
  for (int i = 0; i < s.mr_count; ++i) {
    const MrFate& fate = r.mr_fate[i];
    if (fate.verdict.effect != effect) continue;
    ++total;
    if (listed >= kMaxListedRanges) continue;
    const MrRecord& m = s.mrs[i];
    out.Str("    ").Ptr(m.addr).Char('-').Ptr(m.addr + m.len).Str(" (").Size(m.len).Str(", ");
    out.Str(facts::MemoryKindName(fate.kind)).Str(") ").Str(RdmaCallName(m.call)).Str(" by ");
    FormatInnermostUserFrame(out, m.stack, demangle);
    char why[256];
    out.Str(": ").Str(facts::BasisText(fate.verdict, why, sizeof(why))).Char('\n');
    ++listed;
  }
  if (total > listed) out.Str("    ... and ").Dec(total - listed).Str(" more\n");
}

// "1 range (64 KiB, anonymous)" / "3 ranges (6.0 MiB, anonymous and hugetlb)".
void FixedRanges(TextBuffer& out, int n, uint64_t bytes, unsigned kinds) {
  Plural(out, n, "range", "ranges");
  out.Str(" (").Size(bytes);
  int listed = 0;
  for (int k = 0; k < facts::kMemoryKinds; ++k) {
    if ((kinds & (1u << k)) == 0) continue;
    out.Str(listed == 0 ? ", " : " and ")
        .Str(facts::MemoryKindName(static_cast<facts::MemoryKind>(k)));
    ++listed;
  }
  out.Char(')');
}

// The MRs fix mode withheld from the child, "0x..-0x.., 0x..-0x.. and N more".
void WithheldList(TextBuffer& out, const ForkReport& r) {
  if (r.mr_fix == nullptr || r.snap == nullptr) return;
  constexpr int kListed = 4;
  int total = 0;
  for (int i = 0; i < r.snap->mr_count; ++i) {
    if (r.mr_fix[i] != FixAction::kWithheld) continue;
    if (total < kListed) {
      const MrRecord& m = r.snap->mrs[i];
      out.Str(total == 0 ? ": " : ", ").Ptr(m.addr).Char('-').Ptr(m.addr + m.len);
    }
    ++total;
  }
  if (total > kListed) out.Str(" and ").Dec(total - kListed).Str(" more");
}

// What fix mode did, without a line break: "N ranges (...) copied for the child; M ranges
// (...) withheld from it (the child must not touch them: 0x..-0x..)".
void FormatFixDone(TextBuffer& out, const ForkReport& r) {
  const FixSummary& f = r.fix;
  if (f.copied > 0) {
    FixedRanges(out, f.copied, f.copied_bytes, f.copied_kinds);
    out.Str(" made MADV_DOFORK for the fork: the child gets a copy, the parent keeps its pages");
  }
  if (f.withheld > 0) {
    if (f.copied > 0) out.Str("; ");
    FixedRanges(out, f.withheld, f.withheld_bytes, f.withheld_kinds);
    out.Str(
        " made MADV_DONTFORK for the fork, so that the parent's data stays intact: the child "
        "has no mapping there and must not touch them");
    WithheldList(out, r);
  }
}

}  // namespace

void FormatKernelFacts(TextBuffer& out, const KernelCofFact& cof, const facts::PinProbe& probe) {
  out.Str("kernel copy-on-fork for pinned pages: ");
  out.Str(cof.value == KernelCof::kYes  ? "yes"
          : cof.value == KernelCof::kNo ? "no"
                                        : "not reported");
  out.Str(" (").Str(cof.source).Str("); pinned pages at fork (io_uring probe): ");
  using facts::MemoryKind;
  bool any = false;
  for (MemoryKind k : {MemoryKind::kAnonymous, MemoryKind::kThp, MemoryKind::kHugetlb}) {
    int i = static_cast<int>(k);
    if (probe.why[i] == facts::ProbeWhy::kNotProbed) continue;
    if (any) out.Str(", ");
    any = true;
    out.Str(facts::MemoryKindName(k)).Char(' ').Str(facts::PinFateName(probe.fate[i]));
    if (probe.fate[i] == facts::PinFate::kUnknown) {
      out.Str(" (").Str(facts::ProbeWhyName(probe.why[i])).Char(')');
    }
  }
  if (!any) out.Str("not probed this boot (`forkguard doctor` or `forkguard run` probes)");
}

void FormatForkSupportLine(TextBuffer& out, const ForkSupportFact& f, const facts::MachineFacts& m,
                           const ForkVerdict* v) {
  const KernelCof cof = m.reported_cof;
  out.Str("  fork support: ");
  if (!f.on) {
    out.Str("off (no ibv_fork_init, RDMAV_FORK_SAFE/IBV_FORK_SAFE unset)");
  } else {
    out.Str("on, turned on by ");
    if (f.env != nullptr) {
      out.Str(f.env).Str(" in the environment");
    } else if (f.caller[0] != '\0') {
      out.Str("ibv_fork_init() called from ").Str(f.caller);
    } else {
      out.Str("ibv_fork_init()");
    }
  }
  if (f.rdma_core >= 0) out.Str("; rdma-core ").Dec(f.rdma_core);
  if (f.on) {
    facts::Tri marks = facts::RegistrationMarksDontfork(m);
    if (marks == facts::Tri::kYes && cof == KernelCof::kYes) {
      out.Str(
          " (< 51) marks every registration MADV_DONTFORK even though this kernel copies "
          "pinned pages on fork: fork support is not needed here and kills children that "
          "touch registered memory");
    } else if (marks == facts::Tri::kNo) {
      out.Str(" (>= 51): fork support does nothing on this copy-on-fork kernel");
    } else if (marks == facts::Tri::kUnknown) {
      out.Str(
          ": version unknown, so whether it marks registrations MADV_DONTFORK on this "
          "copy-on-fork kernel is not known");
    } else {
      out.Str(
          ": the kernel does not report copy-on-fork, so rdma-core marks every registration "
          "MADV_DONTFORK");
      if (v != nullptr && v->dontfork_needless) {
        out.Str(
            "; measured: this kernel copies the registered ranges' pinned pages at fork, so "
            "fork support is not needed for them and kills children that touch them");
      } else if (v != nullptr && v->dontfork_mrs > 0) {
        out.Str(
            "; some of the marked ranges are not known to survive a fork in the parent "
            "without it");
      }
    }
  }
  out.Char('\n');
}

void FormatStackLines(TextBuffer& out, const RawStack& stack, const char* indent, bool demangle) {
  if (stack.depth == 0) {
    out.Str(indent).Str("(no stack)\n");
    return;
  }
  for (int i = 0; i < stack.depth; ++i) {
    out.Str(indent);
    FormatFrame(out, i, Symbolize(stack.ips[i], i > 0), demangle);
    out.Char('\n');
  }
}

void FormatPythonLines(TextBuffer& out, const PythonStack& py, const char* indent) {
  if (py.depth <= 0) return;
  // Like a Python traceback: most recent call last (frames are stored innermost first).
  out.Str(indent).Str("Python stack (most recent call last):\n");
  for (int i = py.depth - 1; i >= 0; --i) {
    const PythonStack::Frame& f = py.frames[i];
    out.Str(indent).Str("  File \"").Str(f.file).Str("\", line ").Dec(f.line).Str(", in ");
    out.Str(f.func).Char('\n');
  }
}

namespace {

// "  verdict: hazard (child-segv, inherited-rdma)"
void FormatVerdictLine(TextBuffer& out, const ForkReport& r) {
  out.Str("  verdict: hazard (");
  bool first = true;
  for (Reason reason : {kChildSegv, kParentCorruption, kInheritedRdma}) {
    if ((r.verdict.reasons & reason) == 0) continue;
    if (!first) out.Str(", ");
    out.Str(ReasonName(reason));
    first = false;
  }
  out.Str(")\n");
}

// The MADV_DONTFORK ranges a child touching them dies on: those the shim saw registered,
// then those only /proc/self/smaps shows.
void FormatChildSegvLines(TextBuffer& out, const ForkReport& r, bool demangle) {
  const StateSnapshot& s = *r.snap;
  int n = r.verdict.dontfork_mrs + r.verdict.unattributed_dc;
  out.Str("  child-segv: ");
  out.Dec(n).Str(
      " range(s) registered for RDMA are MADV_DONTFORK; the child is killed by "
      "SIGSEGV if it touches them:\n");
  int listed = 0;
  for (int i = 0; i < s.mr_count && listed < kMaxListedRanges; ++i) {
    if (r.mr_dontfork == nullptr || !r.mr_dontfork[i]) continue;
    const MrRecord& m = s.mrs[i];
    out.Str("    ").Ptr(m.addr).Char('-').Ptr(m.addr + m.len).Str(" (").Size(m.len).Str(") ");
    out.Str(RdmaCallName(m.call)).Str(" by ");
    FormatInnermostUserFrame(out, m.stack, demangle);
    out.Char('\n');
    ++listed;
  }
  for (int i = 0; i < r.verdict.unattributed_dc && i < r.dc_count && listed < kMaxListedRanges;
       ++i) {
    const Vma& v = r.dc_vmas[i];
    out.Str("    ").Ptr(v.start).Char('-').Ptr(v.end).Str(" (").Size(v.end - v.start);
    out.Str(") registered outside the calls forkguard sees (found in /proc/self/smaps)\n");
    ++listed;
  }
  if (n > listed) out.Str("    ... and ").Dec(n - listed).Str(" more\n");
}

void FormatInheritedRdmaLine(TextBuffer& out, const ForkReport& r) {
  const StateSnapshot& s = *r.snap;
  const LiveCounts& c = s.counts;
  out.Str("  inherited-rdma: the child inherits ");
  Plural(out, c.contexts, "device context", "device contexts");
  if (s.devices[0] != '\0') out.Str(" (").Str(s.devices).Char(')');
  out.Str(", ");
  Plural(out, c.pds, "PD", "PDs");
  out.Str(", ");
  Plural(out, c.mrs, "MR", "MRs");
  out.Str(", ");
  out.Dec(c.cm_channels + c.cm_ids).Str(" rdma_cm channel(s)/id(s)");
  if (c.uverbs_fds > 0 || c.rdma_cm_fds > 0) {
    out.Str(" and ").Dec(c.uverbs_fds + c.rdma_cm_fds).Str(" descriptor(s) on /dev/infiniband");
  }
  out.Str(" it must not use");
  if (r.verdict.library_cache_only) {
    out.Str(
        " - all of it held by librdmacm, which keeps its device context after "
        "rdma_destroy_id/rdma_destroy_event_channel: the program released its own. A child "
        "that calls librdmacm again reuses the parent's cached context, which does not work "
        "there");
  } else if (c.library_contexts > 0) {
    out.Str(" (").Dec(c.library_contexts).Str(" context(s) held by librdmacm itself)");
  }
  out.Char('\n');
}

// Where and when RDMA was first initialized, or that the shim did not see it.
void FormatInitLines(TextBuffer& out, const ForkReport& r, bool demangle) {
  const StateSnapshot& s = *r.snap;
  const LiveCounts& c = s.counts;
  if (s.init.set) {
    int64_t age = r.now_mono_ns - s.init.mono_ns;
    if (age < 0) age = 0;
    int64_t tenths = (age + 50000000) / 100000000;
    out.Str("  RDMA first initialized ").Dec(tenths / 10).Char('.').Dec(tenths % 10);
    out.Str(" s ago: ").Str(RdmaCallName(s.init.call)).Char('(');
    out.Str(s.init.device[0] != '\0' ? s.init.device : "no device yet").Str(") at:\n");
    FormatStackLines(out, s.init.stack, "    ", demangle);
    FormatPythonLines(out, s.init.py, "    ");
  } else {
    out.Str("  RDMA first initialized: not seen by forkguard (found ");
    out.Dec(c.uverbs_fds).Str(" uverbs and ").Dec(c.rdma_cm_fds);
    out.Str(" rdma_cm descriptor(s) open; static libibverbs or a dlopen handle lookup)\n");
  }
}

// "  facts: 3 threads, 120 of vm.max_map_count 65530 mappings, <the kernel's facts>"
void FormatFactsLine(TextBuffer& out, const ForkReport& r) {
  out.Str("  facts: ");
  if (r.threads >= 0) {
    Plural(out, r.threads, "thread", "threads");
  } else {
    out.Str("threads unknown");
  }
  out.Str(", ");
  CountOrUnknown(out, r.map_count);
  out.Str(" of vm.max_map_count ");
  CountOrUnknown(out, r.max_map_count);
  out.Str(" mappings, ");
  FormatKernelFacts(out, r.cof, r.machine.probe);
  out.Char('\n');
}

// What the mode does with this fork.
void FormatModeLine(TextBuffer& out, const ForkReport& r) {
  const char* call = r.via == ForkVia::kFork ? "fork" : ForkViaName(r.via);
  if (!r.verdict.enforceable() && (r.mode == Mode::kError || r.mode == Mode::kAbort)) {
    out.Str("  mode: ").Str(ModeName(r.mode)).Str(" - not applied to this fork (");
    out.Str(r.verdict.child_execs ? "the child execs right away"
                                  : "only what librdmacm keeps for itself is live");
    out.Str("): a warning; it proceeds\n");
    return;
  }
  switch (r.mode) {
    case Mode::kWarn:
      if (r.via == ForkVia::kFork || r.via == ForkVia::kAtfork) {
        out.Str("  mode: warn - the fork proceeds");
      } else {
        out.Str("  mode: warn - ").Str(call).Str("() proceeds");
      }
      if (r.verdict.enforceable() && r.via != ForkVia::kAtfork) {
        out.Str(" (FORKGUARD_MODE=error makes it fail with ").Str(FailErrnoName(r.via)).Char(')');
      }
      out.Char('\n');
      break;
    case Mode::kError:
      if (r.via == ForkVia::kAtfork) {
        out.Str(
            "  mode: error - but this fork did not go through fork() (seen by a "
            "pthread_atfork handler) and cannot be failed; it proceeds\n");
      } else if (r.via == ForkVia::kFork) {
        out.Str("  mode: error - the fork fails with EPERM; no child was created\n");
      } else {
        out.Str("  mode: error - ").Str(call).Str("() fails with ").Str(FailErrnoName(r.via));
        out.Str("; no child was created\n");
      }
      break;
    case Mode::kAbort:
      out.Str("  mode: abort - aborting for a core dump\n");
      break;
    case Mode::kFix:
      FormatFixModeLine(out, r);
      break;
    case Mode::kOff:
      break;
  }
}

}  // namespace

void FormatHazardMessage(TextBuffer& out, const ForkReport& r, bool demangle) {
  FormatForkHead(out, r.who);
  out.Char('\n');
  FormatVerdictLine(out, r);
  if ((r.verdict.reasons & kChildSegv) != 0) FormatChildSegvLines(out, r, demangle);

  if ((r.verdict.reasons & kParentCorruption) != 0) {
    out.Str("  parent-corruption: ");
    Plural(out, r.verdict.corruptible_mrs, "registered range is", "registered ranges are");
    out.Str(
        " not protected by fork support (not MADV_DONTFORK) and this kernel does not copy "
        "their pinned pages on fork: after the fork the parent's next write to them lands in "
        "a new page while the device keeps reading and writing the old one - silent data "
        "corruption:\n");
    FormatRangesWithEffect(out, r, facts::ForkEffect::kParentCorruption, demangle);
  }
  if (r.verdict.unknown_mrs > 0 && r.mr_fate != nullptr) {
    out.Str("  unknown: ");
    Plural(out, r.verdict.unknown_mrs, "registered range:", "registered ranges:");
    out.Str(" whether the parent's data survives the fork cannot be told here:\n");
    FormatRangesWithEffect(out, r, facts::ForkEffect::kUnknown, demangle);
  }

  if ((r.verdict.reasons & kInheritedRdma) != 0) FormatInheritedRdmaLine(out, r);
  if (r.verdict.child_execs) {
    out.Str("  child-execs: the child execs right away (")
        .Str(r.child_exec_site != nullptr ? r.child_exec_site : "known fork+exec site")
        .Str(
            "): inherited RDMA objects are dropped by exec; only code it runs before exec "
            "(preexec_fn) can touch the ranges above\n");
  }

  FormatInitLines(out, r, demangle);

  out.Str("  fork called at:\n");
  if (r.fork_stack != nullptr) FormatStackLines(out, *r.fork_stack, "    ", demangle);
  if (r.fork_py != nullptr) FormatPythonLines(out, *r.fork_py, "    ");

  FormatFactsLine(out, r);
  FormatForkSupportLine(out, r.fork_support, r.machine, &r.verdict);

  FixRule rule = r.fix_rule >= 0 ? static_cast<FixRule>(r.fix_rule) : FixRule::kCProgram;
  FormatFix(out, rule, r.fix_text_library);

  FormatModeLine(out, r);
}

void FormatPartialHazardLine(TextBuffer& out, const ProcessIdentity& who, Mode mode,
                             const char* action) {
  FormatForkHead(out, who);
  out.Str(": verdict: hazard (inherited-rdma); forked from a signal handler that interrupted ");
  out.Str("forkguard, so no details; mode: ").Str(ModeName(mode)).Str(" - ").Str(action);
  out.Char('\n');
}

void FormatRawCloneChild(TextBuffer& out, long pid, const char* prog, long parent,
                         bool parent_held_rdma) {
  out.Str("forkguard: pid ").Dec(pid).Str(" (").Str(prog).Str(") was created from pid ");
  out.Dec(parent).Str(
      " by a raw clone()/clone3() system call (no fork(), no atfork handlers), after RDMA init "
      "there: forkguard could not decide or stop it. It inherited the parent's descriptors "
      "(including /dev/infiniband) and, ");
  out.Str(parent_held_rdma
              ? "if fork support was on, none of the MADV_DONTFORK pages the parent registered: "
                "a SIGSEGV in them is not explained in this process"
              : "since the parent had released its RDMA resources, nothing else");
  out.Char('\n');
}

void FormatInheritedUse(TextBuffer& out, long pid, const char* prog, const char* call,
                        long parent) {
  out.Str("forkguard: pid ").Dec(pid).Str(" (").Str(prog).Str(") calls ").Str(call);
  out.Str(" on an RDMA object its parent (pid ").Dec(parent);
  out.Str(") created before fork; RDMA objects are not usable in a forked child");
}

void FormatLockGaveUp(TextBuffer& out, long seconds, long owner, long pid) {
  out.Str("forkguard: internal lock held for over ").Dec(seconds);
  out.Str(" s by thread ").Dec(owner).Str(" in pid ").Dec(pid);
  out.Str(": not waiting any longer; RDMA records may be missing and forks may get partial ");
  out.Str("verdicts from now on (a forkguard bug: please report it)");
}

void FormatSuppressionsRefused(TextBuffer& out, const char* path, int line, const char* what,
                               int bad) {
  out.Str("forkguard: ignoring FORKGUARD_SUPPRESSIONS=").Str(path).Str(" (every entry): ");
  out.Str(path).Char(':').Dec(line).Str(": ").Str(what);
  if (bad > 1)
    out.Str(" (and ").Dec(bad - 1).Str(bad == 2 ? " more bad line)" : " more bad lines)");
  out.Str("; using no suppressions");
}

void FormatSuppressionsIgnored(TextBuffer& out, const char* path, const char* why,
                               const char* err) {
  out.Str("forkguard: ignoring FORKGUARD_SUPPRESSIONS=").Str(path).Str(": ").Str(why);
  if (err != nullptr) out.Str(" (").Str(err).Char(')');
  out.Str("; using no suppressions");
}

void FormatEventLogFailed(TextBuffer& out, const char* what, const char* dir, const char* error,
                          int err, long pid) {
  out.Str("forkguard: event log: cannot ").Str(what).Str(" in ");
  AppendShownValue(out, dir);
  out.Str(": ");
  if (error != nullptr) {
    out.Str(error);
  } else {
    out.Str("errno ").Dec(err);
  }
  out.Str("; no more events are logged by pid ").Dec(pid);
}

size_t FormatChildSegv(char* buf, size_t cap, long pid, uintptr_t addr,
                       const ChildSegvRange& range) {
  TextBuffer b(buf, cap);
  b.Str("forkguard: child ").Dec(pid).Str(" SIGSEGV at ").Ptr(addr);
  if (addr >= range.start && addr < range.end) {
    b.Str(": inside a range registered for RDMA by the parent (");
  } else {
    b.Str(": in a page shared with a range registered for RDMA by the parent (");
  }
  b.Ptr(range.start).Char('-').Ptr(range.end).Str(", ").Size(range.end - range.start);
  b.Str(") registered by ").Str(range.call).Str(" at:\n");
  if (range.stack_text != nullptr) b.Str(range.stack_text);
  return b.size();
}

const char* ChildSegvTail() {
  return "forkguard: the parent's fork support (ibv_fork_init/RDMAV_FORK_SAFE) marked these "
         "pages MADV_DONTFORK, so they do not exist in this child\n";
}

const char* ChildSegvTailWithheld() {
  return "forkguard: FORKGUARD_MODE=fix made these pages MADV_DONTFORK for the fork, so that the "
         "parent's data stays intact (this kernel does not copy such pinned pages at fork): they "
         "do "
         "not exist in this child\n";
}

void FormatFixModeLine(TextBuffer& out, const ForkReport& r) {
  const FixSummary& f = r.fix;
  out.Str("  mode: fix - ");
  if (f.not_fixed != nullptr) {
    out.Str("not applied to this fork (").Str(f.not_fixed).Str("): it proceeds as in warn mode\n");
    return;
  }
  if (f.failed_withhold) {
    out.Str("a range that must be withheld from the child could not be (madvise failed");
    if (r.via == ForkVia::kAtfork) {
      out.Str("); this fork did not go through fork() and cannot be failed; it proceeds\n");
    } else {
      out.Str("): the fork fails with ").Str(FailErrnoName(r.via)).Str(" as in error mode\n");
    }
    return;
  }
  if (!f.changed()) {
    out.Str("nothing to change: the kernel keeps every registered range intact as it is");
  } else {
    FormatFixDone(out, r);
  }
  if (f.failed > 0) {
    out.Str("; ");
    Plural(out, f.failed, "range stays", "ranges stay");
    out.Str(" MADV_DONTFORK (madvise failed)");
  }
  if ((r.verdict.reasons & kInheritedRdma) != 0) {
    out.Str("; the child must not use the inherited RDMA context, PDs or QPs");
  }
  out.Str("; the fork proceeds\n");
}

void FormatFixedForkLine(TextBuffer& out, const ForkReport& r) {
  out.Str("forkguard: fork made safe in pid ").Dec(r.who.pid).Str(" (").Str(r.who.prog);
  if (r.who.rank >= 0) out.Str(", rank ").Dec(r.who.rank);
  out.Str(" on ").Str(r.who.host).Str("): ");
  FormatFixDone(out, r);
  if ((r.verdict.reasons & kInheritedRdma) != 0) {
    out.Str("; the child must not use the inherited RDMA context, PDs or QPs");
  }
  out.Str(" (FORKGUARD_REPORT=always for the details)\n");
}

}  // namespace forkguard
