#include "shim/message.h"

namespace forkguard {
namespace {

// At most this many ranges are listed; the rest are summarized.
constexpr int kMaxListedRanges = 16;

void Plural(TextBuffer& out, long n, const char* one, const char* many) {
  out.Dec(n).Char(' ').Str(n == 1 ? one : many);
}

}  // namespace

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

void FormatHazardMessage(TextBuffer& out, const ForkReport& r, bool demangle) {
  const StateSnapshot& s = *r.snap;
  const LiveCounts& c = s.counts;

  out.Str("forkguard: fork after RDMA init in pid ").Dec(r.who.pid).Str(" (").Str(r.who.prog);
  if (r.who.rank >= 0) out.Str(", rank ").Dec(r.who.rank);
  out.Str(" on ").Str(r.who.host).Str(")\n");

  out.Str("  verdict: hazard (");
  bool first = true;
  for (Reason reason : {kChildSegv, kParentCorruption, kInheritedRdma}) {
    if ((r.verdict.reasons & reason) == 0) continue;
    if (!first) out.Str(", ");
    out.Str(ReasonName(reason));
    first = false;
  }
  out.Str(")\n");

  if ((r.verdict.reasons & kChildSegv) != 0) {
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

  if ((r.verdict.reasons & kParentCorruption) != 0) {
    out.Str("  parent-corruption: ");
    Plural(out, r.verdict.corruptible_mrs, "registered range is", "registered ranges are");
    out.Str(
           " not protected by fork support (ibv_fork_init/RDMAV_FORK_SAFE off) and this kernel "
           "does not copy pinned pages on fork (")
        .Str(r.cof.source)
        .Str(
            "): after the fork the parent's next write to them lands in a new page while the "
            "device keeps reading and writing the old one - silent data corruption\n");
  }

  if ((r.verdict.reasons & kInheritedRdma) != 0) {
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
    out.Str(" it must not use\n");
  }

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

  out.Str("  fork called at:\n");
  if (r.fork_stack != nullptr) FormatStackLines(out, *r.fork_stack, "    ", demangle);
  if (r.fork_py != nullptr) FormatPythonLines(out, *r.fork_py, "    ");

  out.Str("  facts: ");
  if (r.threads >= 0) {
    Plural(out, r.threads, "thread", "threads");
  } else {
    out.Str("threads unknown");
  }
  out.Str(", ");
  if (r.map_count >= 0) {
    out.Dec(r.map_count);
  } else {
    out.Str("?");
  }
  out.Str(" of vm.max_map_count ");
  if (r.max_map_count >= 0) {
    out.Dec(r.max_map_count);
  } else {
    out.Str("?");
  }
  out.Str(" mappings, kernel copy-on-fork for pinned pages: ");
  out.Str(r.cof.value == KernelCof::kYes  ? "yes"
          : r.cof.value == KernelCof::kNo ? "no"
                                          : "unknown");
  out.Str(" (").Str(r.cof.source).Str(")\n");

  if (r.fork_py != nullptr && r.fork_py->depth > 0) {
    // A Python program: say it in the terms of the code the user writes.
    out.Str(
        "  fix: create the DataLoader (persistent_workers=True) before RDMA init, or use "
        "multiprocessing_context='spawn' or 'forkserver' (DataLoader / multiprocessing)\n");
  } else {
    out.Str(
        "  fix: create loader workers before RDMA init (fork first, then open the device), or "
        "start workers with spawn/forkserver (posix_spawn)\n");
  }

  switch (r.mode) {
    case Mode::kWarn:
      out.Str("  mode: warn - the fork proceeds (FORKGUARD_MODE=error makes it fail with EPERM)\n");
      break;
    case Mode::kError:
      if (r.via == ForkVia::kAtfork) {
        out.Str(
            "  mode: error - but this fork did not go through fork() (seen by a "
            "pthread_atfork handler) and cannot be failed; it proceeds\n");
      } else {
        out.Str("  mode: error - the fork fails with EPERM; no child was created\n");
      }
      break;
    case Mode::kAbort:
      out.Str("  mode: abort - aborting for a core dump\n");
      break;
    case Mode::kOff:
      break;
  }
}

}  // namespace forkguard
