// The fork decision: every fork the shim sees is decided here, from the fork wrappers
// (BeforeFork), from our atfork prepare handler (a fork that bypassed them), and for
// forkguard_fork_check() (QueryFork). A hazardous fork's decision is two steps: gathering its
// facts (GatherForkFacts) and applying the mode to them (ApplyMode).
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "api/check_result.h"
#include "bpf/watch_marker.h"
#include "facts/fork_rule.h"
#include "facts/machine_facts.h"
#include "formats/suppressions.h"
#include "shim/base/child_path.h"
#include "shim/base/dlopen_check.h"
#include "shim/child/child.h"
#include "shim/fix/dontfork_view.h"
#include "shim/hooks/hooks.h"
#include "shim/hooks/hooks_internal.h"
#include "shim/log/event_writer.h"
#include "shim/messages/fix_advice.h"
#include "shim/messages/fork_report.h"
#include "shim/messages/message.h"
#include "shim/messages/query.h"
#include "shim/stack/python_stack.h"
#include "shim/stack/stack.h"

namespace forkguard::hooks {
namespace {

// The call site of a fork: native frames (object + offset) and Python file:line:function.
uint64_t SiteOf(const RawStack& stack, const PythonStack* py) {
  uint64_t h = StackSiteHash(stack);
  if (py == nullptr) return h;
  for (int i = 0; i < py->depth; ++i) {
    const PythonStack::Frame& f = py->frames[i];
    h = Fnv1aStr(Fnv1aStr(h, f.file), f.func);
    h = Fnv1aValue(h, static_cast<uint64_t>(f.line));
  }
  return h;
}

bool MatchesAllowList(const RawStack& stack, const PythonStack& py) {
  if (g_config.allow_count == 0) return false;
  for (int i = 0; i < py.depth; ++i) {
    for (int k = 0; k < g_config.allow_count; ++k) {
      if (AllowPatternMatches(g_config.allow[k], py.frames[i].func) ||
          AllowPatternMatches(g_config.allow[k], BaseName(py.frames[i].file))) {
        return true;
      }
    }
  }
  for (int i = 0; i < stack.depth; ++i) {
    SymbolizedFrame f = Symbolize(stack.ips[i], i > 0);
    for (int k = 0; k < g_config.allow_count; ++k) {
      if (AllowPatternMatches(g_config.allow[k], f.sym) ||
          (f.obj != nullptr && AllowPatternMatches(g_config.allow[k], BaseName(f.obj)))) {
        return true;
      }
    }
  }
  return false;
}

// The FORKGUARD_SUPPRESSIONS entry that matches this hazardous fork, or null. Python frames
// (function, file, line) and native ones (dynamic symbol, its C++ name, object); no
// allocation (the storage is the decision's mmap'd scratch).
const Suppression* MatchSuppressions(const RawStack& stack, const PythonStack& py, unsigned reasons,
                                     SuppressionFrameFacts* frames, char (*demangled)[512]) {
  if (g_suppressions == nullptr) return nullptr;
  EnsureIdentity();  // program= and rank= entries
  int n = 0;
  for (int i = 0; i < py.depth; ++i) {
    frames[n++] = {.func = py.frames[i].func, .file = py.frames[i].file, .line = py.frames[i].line};
  }
  for (int i = 0; i < stack.depth; ++i) {
    SymbolizedFrame f = Symbolize(stack.ips[i], i > 0);
    SuppressionFrameFacts& x = frames[n++];
    x = {.func = f.sym, .lib = f.obj};
    if (DemangleSymbol(f.sym, demangled[i], sizeof(demangled[i]))) x.demangled = demangled[i];
  }
  SuppressionQuery q;
  q.kinds = reasons;
  q.program = g_prog;
  q.rank = g_rank;
  q.frames = frames;
  q.frame_count = n;
  int at = MatchSuppression(*g_suppressions, q);
  return at >= 0 ? &g_suppressions->entries[at] : nullptr;
}

// Clean fork: only logged (when a log is configured). No allocation. `interrupted`: a fork
// from a signal handler that interrupted forkguard on this thread - no stack (the loader's
// locks and this function's buffers may be mid-use), a small `partial` event.
__attribute__((noinline)) void WriteCleanForkEvent(ForkVia via, bool interrupted,
                                                   bool child_execs) {
  ForkReport r;
  r.mode = g_config.mode;
  r.via = via;
  if (interrupted) {
    r.partial = true;
    LogFork(r);
    return;
  }
  BusyScope busy;
  RawStack stack;
  CaptureStack(&stack, g_config.stack_depth);
  BeginSymbolizing();
  EventLog::LargeLine line(GlobalEventLog());
  if (!line.ok()) return;
  // Guarded by the log line's lock.
  static PythonStack py;
  CapturePythonStack(&py, g_config.stack_depth);
  r.fork_stack = &stack;
  r.fork_py = &py;
  r.site = SiteOf(stack, &py);
  r.verdict.child_execs = child_execs;
  LogFork(r, &line);
}

// Without a log this must not even set up WriteCleanForkEvent's large frame: on the clean
// path after a fork, touching a deeper stack page is a copy-on-write fault per fork.
inline void LogCleanFork(ForkVia via, bool interrupted, bool child_execs = false) {
  if (GlobalEventLog().enabled()) WriteCleanForkEvent(via, interrupted, child_execs);
}

// vm.max_map_count: a sysctl, read once per process.
long MaxMapCount() {
  static constinit ZeroFilledAtomic<long, -2> cached;
  long v = cached.load(std::memory_order_relaxed);
  if (v == -2) {
    v = ReadMaxMapCount();
    cached.store(v, std::memory_order_relaxed);
  }
  return v;
}

// Scratch for one hazardous decision (mmap'd: the fork path never calls malloc).
// Large objects live here, not on the stack: fork may be called on a small signal stack.
struct Scratch {
  static constexpr size_t kMessageBytes = 256 * 1024;
  struct Fixed {
    StateSnapshot snap;
    PythonStack fork_py;
    RawStack fork_stack;
    Vma dc[kMaxDcVmas];
    KindVma kinds[kMaxDcVmas];
    char message[kMessageBytes];
    // Suppression matching: the fork's frames as the matcher sees them.
    SuppressionFrameFacts frames[PythonStack::kMaxFrames + RawStack::kCapacity];
    char demangled[RawStack::kCapacity][512];
  };
  Fixed* fixed = nullptr;
  // Per MR, in one mapping: its dc flag, the rule's answer, and the merged intervals.
  bool* mr_dontfork = nullptr;
  MrFate* mr_fate = nullptr;
  Vma* keep = nullptr;
  FixAction* mr_fix = nullptr;
  void* per_mr = nullptr;
  size_t per_mr_bytes = 0;

  bool MapFixed() {
    // Zero-filled: a valid empty state for these PODs.
    fixed = static_cast<Fixed*>(MapAnonymous(sizeof(Fixed), MAP_NORESERVE));
    return fixed != nullptr;
  }
  bool MapFlags(int mr_count) {
    size_t n = static_cast<size_t>(mr_count) + 1;
    size_t fate_off = (n + alignof(MrFate) - 1) / alignof(MrFate) * alignof(MrFate);
    size_t keep_off = fate_off + n * sizeof(MrFate);
    keep_off = (keep_off + alignof(Vma) - 1) / alignof(Vma) * alignof(Vma);
    size_t fix_off = keep_off + n * sizeof(Vma);
    per_mr_bytes = fix_off + n * sizeof(FixAction);
    per_mr = MapAnonymous(per_mr_bytes);
    if (per_mr == nullptr) return false;
    char* base = static_cast<char*>(per_mr);
    mr_dontfork = reinterpret_cast<bool*>(base);
    mr_fate = reinterpret_cast<MrFate*>(base + fate_off);
    keep = reinterpret_cast<Vma*>(base + keep_off);
    mr_fix = reinterpret_cast<FixAction*>(base + fix_off);
    return true;
  }
  ~Scratch() {
    if (per_mr != nullptr) munmap(per_mr, per_mr_bytes);
    if (fixed != nullptr) munmap(fixed, sizeof(Fixed));
  }
};

ForkDecision DecideWithoutState(const RdmaFds& fds, ForkVia via);

// A fork whose child execs right away: CPython's _posixsubprocess.fork_exec, called from
// subprocess.Popen._execute_child or multiprocessing.util.spawnv_passfds (with preexec_fn,
// or when vfork cannot be used, it is a real fork with the GIL held). The innermost Python
// frame says so; null when it is not such a fork.
const char* ChildExecSite(const PythonStack& py) {
  if (py.depth <= 0) return nullptr;
  const PythonStack::Frame& f = py.frames[0];
  const char* base = BaseName(f.file);
  if (strcmp(base, "subprocess.py") == 0 && strcmp(f.func, "_execute_child") == 0) {
    return "subprocess: _posixsubprocess.fork_exec";
  }
  if (strcmp(base, "util.py") == 0 && strstr(f.file, "multiprocessing") != nullptr &&
      strcmp(f.func, "spawnv_passfds") == 0) {
    return "multiprocessing.util.spawnv_passfds: _posixsubprocess.fork_exec";
  }
  return nullptr;
}

bool IsUcxObject(const char* base) {
  return base != nullptr && (strncmp(base, "libuct", 6) == 0 || strncmp(base, "libucs", 6) == 0 ||
                             strncmp(base, "libucp", 6) == 0);
}

// MPI_Init / MPI_Init_thread (or their PMPI_ names) on the stack of the first RDMA init.
bool InitInMpi(const InitRecord& init) {
  if (!init.set) return false;
  for (int i = 0; i < init.stack.depth; ++i) {
    SymbolizedFrame f = Symbolize(init.stack.ips[i], i > 0);
    if (f.sym == nullptr) continue;
    if (strncmp(f.sym, "MPI_Init", 8) == 0 || strncmp(f.sym, "PMPI_Init", 9) == 0) return true;
  }
  return false;
}

ForkSupportFact CurrentForkSupport() {
  ForkSupportFact f;
  f.env = g_fork_env[0] != '\0' ? g_fork_env : nullptr;
  f.on = f.env != nullptr || g_fork_init_ok.load(std::memory_order_relaxed);
  f.caller = g_fork_init_caller;
  f.rdma_core = g_rdma_core.load(std::memory_order_relaxed);
  return f;
}

// What the decision about a fork with RDMA state learned before it applies the mode: the
// tables' copy, the kernel's view of the registered ranges, the machine's facts, the
// verdict, and for a hazard the fork's stacks, who forked and the suppressions that match.
// Its scratch is mmap'd; the snapshot is freed and the scratch unmapped with it.
struct ForkFacts {
  enum class Found {
    kNoMemory,  // no scratch: no verdict at all
    kNoTables,  // the tables could not be copied (decided from the descriptors)
    kClean,     // not a hazard: `report` has the verdict, the snapshot and the stacks taken
    kHazard,    // `report` has everything
  };
  Found found = Found::kNoMemory;
  Scratch scratch;
  int kind_count = 0;  // scratch.fixed->kinds stored
  bool snapped = false;
  ForkReport report;
  ~ForkFacts() {
    if (snapped) RdmaState::FreeSnapshot(&scratch.fixed->snap);
  }
};

// The kernel's view of DONTFORK ranges and the kinds of registered memory, only when
// something may be registered.
void ReadRangesView(const RdmaFds& fds, Scratch& scratch, VerdictInput& in, int* vma_count) {
  const StateSnapshot& snap = scratch.fixed->snap;
  int dc_stored = 0;
  int kinds_stored = 0;
  if (snap.mr_count > 0 || (snap.counts.contexts == 0 && fds.uverbs > 0)) {
    ReadDontforkView(snap, scratch.keep, scratch.fixed->dc, &dc_stored, scratch.fixed->kinds,
                     &kinds_stored, vma_count);
  }
  in.dc_vmas = scratch.fixed->dc;
  in.dc_count = dc_stored;
  in.kind_vmas = scratch.fixed->kinds;
  in.kind_count = kinds_stored;
}

// The machine's side of the rule: what the kernel says about copy-on-fork (asked at the first
// RDMA init; never for the first time from an atfork handler), the probe, fork support.
facts::MachineFacts GatherMachineFacts(ForkVia via, KernelCofFact* cof, ForkSupportFact* support) {
  *cof = via == ForkVia::kAtfork ? CachedKernelCopyOnFork() : KernelCopyOnFork();
  *support = CurrentForkSupport();
  facts::MachineFacts machine;
  machine.reported_cof = cof->value;
  machine.probe = CachedPinProbe();
  machine.rdma_core = support->rdma_core;
  machine.fork_support = support->env != nullptr ? facts::ForkSupportBy::kEnvironment
                         : support->on           ? facts::ForkSupportBy::kForkInit
                                                 : facts::ForkSupportBy::kOff;
  machine.hugepages_safe = g_hugepages_safe;
  return machine;
}

// Step one of a decision about a fork with RDMA state: everything it is decided from, into
// `f`. Reads and asks, and changes nothing: no message, no log, the site's one message not
// used up. `via` atfork: the kernel is not asked anything new.
void GatherForkFacts(const RdmaFds& fds, ForkVia via, ForkFacts* f) {
  RdmaState& st = GlobalState();
  // RDMA found by the backstop only: no hook loaded the unwinder or read these yet.
  LoadUnwinder();
  EnsureIdentity();
  EnsureForkEnv();
  Scratch& scratch = f->scratch;
  if (!scratch.MapFixed()) return;
  StateSnapshot& snap = scratch.fixed->snap;
  // No tables (their lock was given up on, or no memory for the copy): still a verdict.
  if (!st.TakeSnapshot(&snap)) {
    f->found = ForkFacts::Found::kNoTables;
    return;
  }
  f->snapped = true;
  snap.counts.uverbs_fds = fds.uverbs;
  snap.counts.rdma_cm_fds = fds.rdma_cm;
  if (!scratch.MapFlags(snap.mr_count)) return;
  int64_t now = MonotonicNs();

  VerdictInput in;
  in.counts = snap.counts;
  in.mrs = snap.mrs;
  in.mr_count = snap.mr_count;
  int vma_count = -1;
  ReadRangesView(fds, scratch, in, &vma_count);
  f->kind_count = in.kind_count;
  KernelCofFact cof;
  ForkSupportFact support;
  facts::MachineFacts machine = GatherMachineFacts(via, &cof, &support);
  in.machine = &machine;

  ForkReport& r = f->report;
  // A fork that is not a hazard: what a query's answer reads (no stacks before they are
  // captured).
  r.snap = &snap;
  r.mr_dontfork = scratch.mr_dontfork;
  r.dc_count = in.dc_count;
  r.cof = cof;
  r.verdict = DecideVerdict(in, scratch.mr_dontfork, scratch.mr_fate);
  f->found = ForkFacts::Found::kClean;
  if (!r.verdict.hazard()) return;

  RawStack& fork_stack = scratch.fixed->fork_stack;
  CaptureStack(&fork_stack, g_config.stack_depth);
  BeginSymbolizing();
  // os.fork() holds the GIL: the Python line that forked.
  PythonStack& fork_py = scratch.fixed->fork_py;
  CapturePythonStack(&fork_py, g_config.stack_depth);
  r.fork_stack = &fork_stack;
  r.fork_py = &fork_py;
  // A child known to exec right away is judged by what it can touch before exec.
  const char* exec_site = ChildExecSite(fork_py);
  if (exec_site != nullptr) {
    in.child_execs = true;
    r.verdict = DecideVerdict(in, scratch.mr_dontfork, scratch.mr_fate);
    if (!r.verdict.hazard()) return;
  }
  const ForkVerdict& v = r.verdict;
  f->found = ForkFacts::Found::kHazard;
  r.site = SiteOf(fork_stack, &fork_py);
  r.allowed = MatchesAllowList(fork_stack, fork_py);
  if (!r.allowed) {
    const Suppression* suppressed = MatchSuppressions(
        fork_stack, fork_py, v.reasons, scratch.fixed->frames, scratch.fixed->demangled);
    r.suppressed = suppressed != nullptr ? suppressed->text : nullptr;
  }
  r.who = Identity();
  r.mr_fate = scratch.mr_fate;
  r.dc_vmas = in.dc_vmas;
  r.now_mono_ns = now;
  r.mode = g_config.mode;
  r.via = via;
  r.threads = ReadThreadCount();
  r.map_count = vma_count >= 0 ? vma_count : CountMaps();
  r.max_map_count = MaxMapCount();
  r.machine = machine;
  r.child_exec_site = exec_site;
  r.fork_support = support;
  FixFacts facts;
  facts.fork_py = &fork_py;
  facts.init_in_mpi = InitInMpi(snap.init);
  facts.child_segv = (v.reasons & kChildSegv) != 0;
  // UCX's fork support is needless where every range it marked would have stayed intact.
  facts.fork_support_needless = v.dontfork_needless;
  facts.library_cache_only = v.library_cache_only;
  facts.child_execs = v.child_execs;
  facts.fork_init_by_ucx =
      r.fork_support.on && r.fork_support.env == nullptr && IsUcxObject(r.fork_support.caller);
  FixRule fix = ChooseFix(facts);
  r.fix_rule = static_cast<int>(fix);
  r.fix_text_library = fix == FixRule::kUcxForkInit ? r.fork_support.caller : "librdmacm";
}

// Why this thread's fork is not fixed although the mode is fix (set when the window could
// not be entered; shim/fix/fork_fix.h).
__thread const char* t_fix_not_entered __attribute__((tls_model("initial-exec")));
// The fork being decided on this thread entered the window (a fork nested in it from a
// signal handler did not, and must neither plan nor apply: the plan is the outer fork's).
__thread bool t_fix_this_fork __attribute__((tls_model("initial-exec")));

// FORKGUARD_MODE=fix: plans and applies the changes for this fork (undone after it by
// AfterForkParent / the atfork parent handler), from the facts the verdict was decided from.
void FixFork(ForkFacts& f) {
  ForkReport& r = f.report;
  if (!t_fix_this_fork || !InFixWindow()) {
    r.fix.not_fixed =
        t_fix_not_entered != nullptr ? t_fix_not_entered : "the fix window was not entered";
    return;
  }
  FixPlan* plan = GlobalFixPlan();
  if (plan == nullptr) {
    r.fix.not_fixed = "no memory for the plan";
    return;
  }
  PlanFix(r.machine, r.snap->mrs, r.snap->mr_count, f.scratch.fixed->kinds, f.kind_count, plan,
          f.scratch.mr_fix);
  ApplyFix(plan, &r.fix, f.scratch.mr_fix);
  r.mr_fix = f.scratch.mr_fix;
}

// After the fork (or instead of it), in the parent: every change undone, the window left.
void EndFix(ForkDecision* d) {
  FixPlan* plan = GlobalFixPlan();
  if (plan != nullptr) RevertFix(plan);
  LeaveFixWindow();
  if (d != nullptr) d->fix_window = false;
}

// Neither reported nor failed: the site matched FORKGUARD_ALLOW or a suppression.
bool Silenced(const ForkReport& r) { return r.allowed || r.suppressed != nullptr; }

// A hazardous fork this shim lets through because its site is allowed or suppressed: marked
// for forkguard watch, whose enforcement lets it through too (bpf/watch_marker.h). One
// madvise(2) the kernel refuses, made as a raw system call (no interposed wrapper); errno is
// kept. Without a watcher it costs that system call, on these forks only.
void MarkForWatcher() {
  int saved = errno;
  syscall(SYS_madvise, static_cast<uintptr_t>(FORKGUARD_WATCH_MARK_ADDR), 0,
          FORKGUARD_WATCH_MARK_ADVICE);
  errno = saved;
}

// Step two for a hazardous fork: the message (once per call site, or always), the log, and
// the mode (abort, fail the fork, or let it proceed with the child's SIGSEGV explanation).
ForkDecision ApplyMode(ForkFacts& f, ForkVia via) {
  ForkReport& r = f.report;
  ForkDecision d;
  d.hazard = true;
  if (g_config.mode == Mode::kFix) FixFork(f);
  bool report = !Silenced(r) && (g_config.report == ReportPolicy::kAlways ||
                                 GlobalState().FirstTimeForSite(r.site));
  r.reported = report && !g_config.quiet;
  if (r.reported) {
    TextBuffer msg(f.scratch.fixed->message, Scratch::kMessageBytes);
    // A fork fix mode made safe is one line unless every detail was asked for.
    bool one_line = r.fix.changed() && !r.fix.failed_withhold && r.fix.not_fixed == nullptr &&
                    g_config.report != ReportPolicy::kAlways;
    if (one_line) {
      FormatFixedForkLine(msg, r);
    } else {
      FormatHazardMessage(msg, r, /*demangle=*/true);
    }
    WriteStderr(msg.data(), msg.size());
  }
  // A library loaded RTLD_DEEPBIND may be why RDMA was only found by the backstop: say so
  // once (not from an atfork handler: it takes the loader lock).
  if (via != ForkVia::kAtfork && !g_config.quiet && ReportDeepbindOnce()) {
    LogNote("a library was loaded with RTLD_DEEPBIND: its RDMA calls bypass interposition");
  }

  LogFork(r);
  if (Silenced(r)) MarkForWatcher();

  bool enforce = !Silenced(r) && r.verdict.enforceable();
  if (enforce && g_config.mode == Mode::kAbort) abort();
  if (enforce && g_config.mode == Mode::kError && via != ForkVia::kAtfork) {
    d.fail = true;
    d.err = FailErrno(via);
  } else if (g_config.mode == Mode::kFix && r.fix.failed_withhold && via != ForkVia::kAtfork) {
    d.fail = true;  // the parent's data would not stay intact: as in error mode
    d.err = FailErrno(via);
  } else if (g_config.mode == Mode::kFix && r.mr_fix != nullptr) {
    // The child's SIGSEGV explanation covers what it has no mapping of after the fix.
    bool* absent = f.scratch.mr_dontfork;
    bool any = false;
    for (int i = 0; i < r.snap->mr_count; ++i) {
      absent[i] =
          (absent[i] && r.mr_fix[i] != FixAction::kCopied) || r.mr_fix[i] == FixAction::kWithheld;
      any = any || absent[i];
    }
    if (any) d.explain_segv = PrepareChildSegvTable(*r.snap, absent, g_config.quiet, r.mr_fix);
  } else if (r.verdict.dontfork_mrs > 0) {
    d.explain_segv = PrepareChildSegvTable(*r.snap, r.mr_dontfork, g_config.quiet);
  }
  return d;
}

// The decision for a fork with RDMA state: its facts, then the mode applied to them. `via`
// atfork: the fork cannot be failed and the kernel is not asked anything new.
ForkDecision DecideHazardousFork(const RdmaFds& fds, ForkVia via) {
  ForkFacts f;
  GatherForkFacts(fds, via, &f);
  switch (f.found) {
    case ForkFacts::Found::kNoMemory:
      return ForkDecision();
    case ForkFacts::Found::kNoTables:
      return DecideWithoutState(fds, via);
    case ForkFacts::Found::kClean:
      LogCleanFork(via, false, f.report.verdict.child_execs);
      return ForkDecision();
    case ForkFacts::Found::kHazard:
      break;
  }
  return ApplyMode(f, via);
}

// forkguard_fork_check() for a fork with RDMA state: the same facts, written into `query`;
// nothing is printed, logged or enforced, and the site's one message is not used up.
void AnswerQuery(const RdmaFds& fds, forkguard_check_result* query) {
  ForkFacts f;
  GatherForkFacts(fds, ForkVia::kFork, &f);
  switch (f.found) {
    case ForkFacts::Found::kNoMemory:
      return;  // query->source stays 0
    case ForkFacts::Found::kNoTables: {
      // Answered without the tables' details.
      FillCleanQueryResult(query, fds);
      bool held = GlobalState().AnyLive() || fds.uverbs > 0 || fds.rdma_cm > 0;
      unsigned reasons = held ? static_cast<unsigned>(kInheritedRdma) : 0u;
      api::SetVerdict(query, reasons);
      query->contexts = query->pds = query->mrs = query->cm_ids = query->cm_channels = -1;
      api::CopyField(query->detail, sizeof(query->detail),
                     "partial: the shim's tables could not be read (descriptors and the live "
                     "count only)");
      return;
    }
    case ForkFacts::Found::kClean:
      FillQueryResult(query, f.report, nullptr);
      return;
    case ForkFacts::Found::kHazard:
      break;
  }
  TextBuffer msg(f.scratch.fixed->message, Scratch::kMessageBytes);
  FormatHazardMessage(msg, f.report, /*demangle=*/true);
  FillQueryResult(query, f.report, msg.data());
  query->enforceable = !Silenced(f.report) && f.report.verdict.enforceable() ? 1 : 0;
}

// fork() from a signal handler that interrupted this thread inside forkguard (t_busy, or
// the state lock held outside our atfork window): the tables cannot be read and the loader
// not entered (either could deadlock), but the lock-free live count and the descriptor scan
// still tell clean from hazard, so the fork is still logged once and the mode still
// applies; the message is one line.
ForkDecision DecideWithoutState(const RdmaFds& fds, ForkVia via) {
  ForkDecision d;
  if (!GlobalState().AnyLive() && fds.uverbs == 0 && fds.rdma_cm == 0) {
    LogCleanFork(via, true);
    return d;
  }
  d.hazard = true;
  ForkReport r;
  r.verdict.reasons = kInheritedRdma;
  r.mode = g_config.mode;
  r.via = via;
  r.partial = true;
  r.reported = !g_config.quiet;
  r.partial_live.uverbs_fds = fds.uverbs;
  r.partial_live.rdma_cm_fds = fds.rdma_cm;
  const char* action = ForkActionName(r);
  static volatile sig_atomic_t said = 0;  // once per process: there is no call site to key on
  if (!g_config.quiet && !said) {
    said = 1;
    char buf[768];
    TextBuffer b(buf, sizeof(buf));
    FormatPartialHazardLine(b, Identity(), g_config.mode, action);
    WriteStderr(b.data(), b.size());
  }
  LogFork(r);
  if (g_config.mode == Mode::kAbort) abort();
  if (g_config.mode == Mode::kError && via != ForkVia::kAtfork) {
    d.fail = true;
    d.err = FailErrno(via);
  }
  return d;
}

// Says once per process that a lock's bounded wait gave up (StateLock): from then on
// records may be missing and forks may get partial verdicts. That is a bug of ours.
// The message is out of line: its buffer would deepen every caller's frame, and a write to
// a stack page the previous fork write-protected is a page fault per fork.
__attribute__((noinline, cold)) void SayLockGaveUp() {
  static std::atomic<bool> said{false};
  StateLock& state = GlobalState().lock();
  StateLock& log = GlobalEventLog().lock();
  if (said.exchange(true)) return;
  pid_t owner = state.GaveUp() ? state.StuckOwner() : log.StuckOwner();
  char buf[512];
  TextBuffer b(buf, sizeof(buf));
  FormatLockGaveUp(b, LockBoundNs() / 1000000000, owner, getpid());
  LogNote(b.data());
  if (!g_config.quiet) {
    b.Char('\n');
    WriteStderr(b.data(), b.size());
  }
}

inline void SayIfLockGaveUp() {
  if (GlobalState().lock().GaveUp() || GlobalEventLog().lock().GaveUp()) SayLockGaveUp();
}

// Nothing tracked and no RDMA descriptor possible: clean without looking. Lock-free, reads
// only.
bool CleanWithoutLooking() {
  return !GlobalState().AnyLive() && !RdmaDevicesExist() &&
         !g_backstop_armed.load(std::memory_order_relaxed);
}

// `interrupted_forkguard`: t_busy was nonzero when the caller was entered.
ForkDecision Decide(ForkVia via, bool interrupted_forkguard) {
  SayIfLockGaveUp();
  // Fast path: no scan, no allocation, no write but the log's.
  if (CleanWithoutLooking()) {
    LogCleanFork(via, interrupted_forkguard);
    return ForkDecision();
  }
  BusyScope busy;
  RdmaFds fds = ScanRdmaFds();
  // Held by this thread mid-update (a signal handler interrupted it): the tables cannot be
  // read. Held by this thread's atfork prepare: they can.
  if (interrupted_forkguard || (GlobalState().lock().HeldByThisThread() && !HeldByOurAtfork())) {
    return DecideWithoutState(fds, via);
  }
  if (!GlobalState().AnyLive() && fds.uverbs == 0 && fds.rdma_cm == 0) {
    LogCleanFork(via, interrupted_forkguard);
    return ForkDecision();
  }
  return DecideHazardousFork(fds, via);
}

// A fork that did not pass through one of our wrappers (or a clean one that did, which
// left no frame): decide here (warn only). Runs before the address space is copied.
bool CoreAtforkDecide(ForkFrame* out) {
  if (!g_ready || g_config.mode == Mode::kOff) return false;
  EnsureForkFacts();
  // The fast path first, here: Decide's frame reaches a deeper stack page, and after a
  // fork every first write to a page faults (one more fault per clean fork).
  if (CleanWithoutLooking() && !GlobalEventLog().enabled()) return false;
  bool fixing = g_config.mode == Mode::kFix && EnterFixWindow(&t_fix_not_entered);
  bool outer = t_fix_this_fork;
  t_fix_this_fork = fixing;
  ForkDecision d = Decide(ForkVia::kAtfork, t_busy != 0);
  t_fix_this_fork = outer;
  out->hazard = d.hazard;
  out->explain_segv = d.explain_segv;
  out->fix_window = fixing;
  return d.hazard || d.explain_segv || fixing;
}

// The core's part of the atfork handlers (shim/state/fork_frames.h: the prepare handler calls
// `decide` before it takes the state lock, the child handler `child` after the lock was
// reset); CoreAtforkDecide is above.
// A SIGSEGV table prepared by an atfork decision (a wrapper's own is released by the wrapper).
void CoreAtforkParent(const ForkFrame& f) {
  if (f.fix_window) EndFix(nullptr);
  if (f.explain_segv) ReleaseChildSegvTable();
}
FORKGUARD_CHILD_PATH void CoreAtforkChild(const ForkFrame* f) {
  if (f != nullptr && f->fix_window) ResetFixWindowInChild();
  ChildAfterFork(f != nullptr && f->hazard, f != nullptr && f->explain_segv);
}

}  // namespace

constinit const ForkAtforkHooks kCoreAtforkHooks = {CoreAtforkDecide, CoreAtforkParent,
                                                    CoreAtforkChild};

bool ForkNeedsNothing(ForkVia via) {
  EnsureInit();
  if (g_config.mode == Mode::kOff) return true;
  EnsureForkFacts();
  if (!CleanWithoutLooking() || GlobalEventLog().enabled() || ThisThreadForks().depth != 0) {
    return false;
  }
  return via != ForkVia::kUnderscoreFork || !ForkAtforkInstalled();
}

ForkDecision BeforeFork(ForkVia via) {
  EnsureInit();
  if (g_config.mode == Mode::kOff) return ForkDecision();
  EnsureForkFacts();
  // A clean fork without a log writes nothing at all here: after every fork the parent's
  // first write to any page faults (copy-on-write), and this is most forks of most
  // programs. No frame either: the atfork prepare handler re-checks the same lock-free
  // fast path and finds nothing to do. Nested in another fork on this thread, a fork always
  // gets a frame (fork_frames.h: so that its atfork handlers can tell theirs).
  bool clean = CleanWithoutLooking() && !GlobalEventLog().enabled();
  if (clean && ThisThreadForks().depth == 0) return ForkDecision();
  ForkDecision d;
  if (!clean) {
    int saved = errno;
    CheckUnseenChild();
    bool fixing =
        g_config.mode == Mode::kFix && !CleanWithoutLooking() && EnterFixWindow(&t_fix_not_entered);
    bool outer = t_fix_this_fork;
    t_fix_this_fork = fixing;
    d = Decide(via, t_busy != 0);
    t_fix_this_fork = outer;
    if (fixing) {
      d.fix_window = true;
      if (d.fail) EndFix(&d);  // no fork: undo now
    }
    if (errno != saved) errno = saved;
  }
  // The frame tells the atfork handlers that this fork is decided and what its child is.
  // _Fork runs no atfork handlers (AfterRawForkChild applies the decision in the child),
  // and nor does any fork before our handlers are registered (then AfterForkChild does).
  d.no_atfork = !ForkAtforkInstalled();
  if (!d.fail && via != ForkVia::kUnderscoreFork && !d.no_atfork) {
    ForkFrame f{};
    f.stage = ForkFrame::Stage::kDecided;
    f.by_wrapper = true;
    f.hazard = d.hazard;
    f.explain_segv = d.explain_segv;
    d.framed = PushForkFrame(f) != nullptr;
  }
  return d;
}

int QueryFork(forkguard_check_result* out) {
  EnsureInit();
  EnsureForkFacts();
  // Called from a signal handler that interrupted forkguard on this thread: the tables and
  // the loader cannot be entered. Say so rather than guess.
  if (t_busy != 0 || (GlobalState().lock().HeldByThisThread() && !HeldByOurAtfork())) {
    errno = EAGAIN;
    return -1;
  }
  BusyScope busy;
  RdmaFds fds;
  if (!CleanWithoutLooking()) fds = ScanRdmaFds();
  out->source = 0;  // set by whatever fills the result
  if (!GlobalState().AnyLive() && fds.uverbs == 0 && fds.rdma_cm == 0) {
    FillCleanQueryResult(out, fds);
  } else {
    AnswerQuery(fds, out);
  }
  if (out->source == 0) {  // no memory for the decision's scratch
    errno = ENOMEM;
    return -1;
  }
  if (g_config.mode == Mode::kOff) {
    api::CopyField(out->detail, sizeof(out->detail),
                   "FORKGUARD_MODE=off: the shim tracks no RDMA calls; descriptors only");
  }
  return 0;
}

FORKGUARD_CHILD_PATH void AfterForkChild(const ForkDecision& d) {
  if (d.fix_window) ResetFixWindowInChild();
  if (d.no_atfork) {
    AfterRawForkChild(d);
  } else if (d.framed) {
    PopForkFrame();
  } else if (d.hazard) {
    ChildAfterFork(true, d.explain_segv);  // no frame carried it: the stack was full
  }
}

FORKGUARD_CHILD_PATH void AfterRawForkChild(const ForkDecision& d) {
  if (g_config.mode == Mode::kOff) return;
  // What the atfork child handlers do after fork(), for a fork that runs none (_Fork): the
  // cached pid, our table lock (another thread may have held it), the child's explanation.
  ResetCachedTid();
  GlobalState().lock().ResetInChild();
  if (d.fix_window) ResetFixWindowInChild();
  ChildAfterFork(d.hazard, d.explain_segv);
}

void AfterForkParent(const ForkDecision& d, pid_t child) {
  if (d.fix_window) EndFix(nullptr);
  if (d.framed) PopForkFrame();
  if (d.explain_segv) ReleaseChildSegvTable();
  if (g_config.mode == Mode::kOff || child <= 0) return;
  LogForkChild(child);
}

}  // namespace forkguard::hooks
