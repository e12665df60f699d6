#include "shim/core.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "api/check_result.h"
#include "facts/fork_rule.h"
#include "facts/machine_facts.h"
#include "shim/child.h"
#include "shim/child_path.h"
#include "shim/config.h"
#include "shim/dlopen_check.h"
#include "shim/event_log.h"
#include "shim/event_writer.h"
#include "shim/exec_watch.h"
#include "shim/fix_advice.h"
#include "shim/fork_frames.h"
#include "shim/job_identity.h"
#include "shim/message.h"
#include "shim/proc_facts.h"
#include "shim/python_stack.h"
#include "shim/query.h"
#include "shim/skippable_lock.h"
#include "shim/stack.h"
#include "shim/start_path.h"
#include "shim/stderr_line.h"
#include "shim/suppressions.h"
#include "shim/sys.h"
#include "shim/verdict.h"

#ifndef FORKGUARD_VERSION
#define FORKGUARD_VERSION "0.1.0"
#endif

namespace forkguard::core {

__thread int t_busy __attribute__((tls_model("initial-exec"))) = 0;
__thread DontforkMarks t_marks __attribute__((tls_model("initial-exec"))) = {0, 0, 0};

namespace {

// Every global here starts as zero bytes (sys.h, ZeroFilled): the configuration is all zero
// (mode warn, no log) until Init() parses the environment, which every hook waits for. Last
// of the start data (start_path.h): its tail is touched only when set.
FORKGUARD_START_DATA_LAST constinit Config g_config{
    .mode = Mode::kWarn, .report = ReportPolicy::kOnce, .stack_depth = 0};
static_assert(Mode::kWarn == Mode{} && ReportPolicy::kOnce == ReportPolicy{});

// Whether the /proc/self/fd scan can find anything. On a kernel with the RDMA user-space
// devices it always can (a descriptor opened by a raw syscall needs no symbol we see), so
// it always runs there. Elsewhere only if, after we looked at /proc/devices, an RDMA
// device node was opened through open*(), a library was loaded RTLD_DEEPBIND (its opens
// bypass us), or the process started with RDMA descriptors. Inherited by forked children.
FORKGUARD_START_DATA std::atomic<bool> g_backstop_armed{false};
// Set by Init(): the program's name as it started (program_invocation_short_name points
// into argv[0], which a program may overwrite later) and whether the environment is ours
// to read (not under AT_SECURE).
FORKGUARD_START_DATA char g_prog[256];
FORKGUARD_START_DATA bool g_secure;
// Who this process is in its job (host, rank, job id): read by EnsureIdentity() when a
// line is printed, at the first watched RDMA call, or at start when FORKGUARD_LOG is set
// (the log's header names it). Not at every start: a process that never prints and never
// touches RDMA needs none of it, and gethostname() plus some 15 variables looked up were
// a system call and several pages touched in every process.
char g_host[256];
long g_rank;
constinit JobIdentity g_job{.rank = 0, .local_rank = 0, .step = 0, .host = {}, .short_host = {}};
std::atomic<bool> g_identity_done{false};
FORKGUARD_START_DATA pthread_once_t g_once = PTHREAD_ONCE_INIT;
// Init() returned (EnsureInit's fast path)
FORKGUARD_START_DATA std::atomic<bool> g_init_done{false};
std::atomic<bool> g_fork_facts{false};
FORKGUARD_START_DATA bool g_ready = false;

// Fork support (the rdma-core x kernel x who-turned-it-on matrix). Written outside the fork path
// (ibv_fork_init, the first RDMA init); read when a hazardous fork is explained.
char g_fork_env[64] = "";                 // "RDMAV_FORK_SAFE=1" when the environment asks for it
std::atomic<bool> g_fork_init_ok{false};  // an ibv_fork_init() returned 0
char g_fork_init_caller[128] = "";        // basename of the object that called it
ZeroFilledAtomic<int, -1> g_rdma_core;    // rdma-core version, from /proc/self/maps
bool g_hugepages_safe = false;            // RDMAV_HUGEPAGES_SAFE set
std::atomic<bool> g_fork_env_read{false};

// RDMAV_FORK_SAFE / IBV_FORK_SAFE and RDMAV_HUGEPAGES_SAFE, read at the first watched RDMA
// call (or the first hazardous fork, when only the descriptor backstop saw RDMA), not at
// start: rdma-core itself reads them when it initializes (ibv_get_device_list,
// ibv_fork_init), which is before any call we watch, so a program that sets them before its
// RDMA init is seen as rdma-core sees it. Idempotent: a race only repeats the reads. Not
// under AT_SECURE, as the rest of the environment.
void EnsureForkEnv() {
  if (g_fork_env_read.load(std::memory_order_acquire)) return;
  if (!g_secure) {
    int saved = errno;
    facts::ForkSafeFromEnvironment(g_fork_env, sizeof(g_fork_env));
    g_hugepages_safe = facts::HugepagesSafeFromEnvironment();
    errno = saved;
  }
  g_fork_env_read.store(true, std::memory_order_release);
}

// What a fork decision needs to know about the machine: the RDMA device numbers
// (/proc/devices, /proc/misc) and whether the process started with RDMA descriptors
// (inherited across exec, or opened before we were loaded: they arm the backstop).
// Learned at the first fork or RDMA call, not at start: most processes a preloaded job
// creates exec and exit without forking, and six /proc reads were a fifth of what each
// paid for the shim. Async-signal-safe (a first fork may come from a signal handler, on a
// small signal stack: the buffer is mmap'd); idempotent, so a race only repeats the work.
void EnsureForkFacts() {
  if (g_fork_facts.load(std::memory_order_acquire)) return;
  constexpr size_t kBytes = 8192;
  void* p = MapAnonymous(kBytes);
  if (p != nullptr) {
    LearnRdmaDeviceNumbers(static_cast<char*>(p), kBytes);
    munmap(p, kBytes);
  }
  if (RdmaFds fds = ScanRdmaFds(); fds.uverbs > 0 || fds.rdma_cm > 0) {
    g_backstop_armed.store(true, std::memory_order_relaxed);
  }
  g_fork_facts.store(true, std::memory_order_release);
}

// Whether this machine may have RDMA user-space devices, asked at start without reading
// /proc (EnsureForkFacts does that at the first fork): one access() of /dev/infiniband, as
// a raw system call (libc's access() is code of another page that most programs never run).
// What registering our atfork handlers at start is for: a fork that bypasses our wrappers
// after RDMA descriptors were opened by something we do not see (a raw open syscall) or
// inherited at exec. Such a descriptor is of a node of ib_uverbs or rdma_ucm, and those
// nodes are in /dev/infiniband (udev and devtmpfs make them there as soon as either module
// is loaded, and rdma-core opens /dev/infiniband/uverbsN and rdma_cm). rdma-core's fallback
// for a container without it (a node of the same name made in a private directory) is
// opened through open(), which our wrapper sees (OnOpened), as every libibverbs/librdmacm
// open is, and any watched RDMA call registers the handlers before it returns. Without
// /dev/infiniband in this mount namespace no descriptor can come from a path we miss, short
// of a raw syscall on a node someone made elsewhere by hand. Anything but ENOENT (no /dev
// to ask, a permission error) counts as "may exist".
FORKGUARD_START_PATH bool RdmaDevicesMayExist() {
  long rc;
  static const char kDir[] FORKGUARD_START_RODATA = "/dev/infiniband";
  // access(2) by number: no errno, no libc.
  __asm__ volatile("syscall"
                   : "=a"(rc)
                   : "0"(static_cast<long>(SYS_access)), "D"(kDir), "S"(static_cast<long>(F_OK))
                   : "rcx", "r11", "memory");
  return rc != -ENOENT;
}

// Config warnings, kept until the log is configured (so they are also logged).
constexpr int kMaxWarnings = 8;
char g_warnings[kMaxWarnings][1280];  // a FORKGUARD_LOG warning names a path (up to 1 KiB)
FORKGUARD_START_DATA int g_warning_count = 0;

// Each line prefixed "[host rN pid] " and written whole (shim/stderr_line.h).
void WriteStderr(const char* p, size_t n) { WriteStderrLines(p, n); }

void CollectWarning(const char* line, void*) {
  if (g_warning_count >= kMaxWarnings) return;
  CopyCString(g_warnings[g_warning_count], sizeof(g_warnings[0]), line);
  ++g_warning_count;
}

// Whether the environment has a FORKGUARD_* variable: one pass over it, comparing bytes
// with constants in the code (no string constant, no libc call). A process with none (most
// of a site-wide preload's `sh`, `cat` and `srun`) has the default configuration and never
// runs the parser.
FORKGUARD_START_PATH bool AnyForkguardVariable() {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* v = *e;
    if (v[0] == 'F' && v[1] == 'O' && v[2] == 'R' && v[3] == 'K' && v[4] == 'G' && v[5] == 'U' &&
        v[6] == 'A' && v[7] == 'R' && v[8] == 'D' && v[9] == '_') {
      return true;
    }
  }
  return false;
}

const char* Getenv(const char* name, void*) { return getenv(name); }

// FORKGUARD_SUPPRESSIONS, parsed once by Init into mmap'd fixed storage (the fork path
// only reads it); null when none is set or none of its lines is an entry.
SuppressionSet* g_suppressions = nullptr;

void SuppressionLineWarning(int line, const char* what, void* ctx) {
  char buf[1280];
  TextBuffer b(buf, sizeof(buf));
  b.Str("forkguard: ignoring line ").Dec(line).Str(" of FORKGUARD_SUPPRESSIONS=");
  b.Str(static_cast<const char*>(ctx)).Char(':').Dec(line).Str(": ").Str(what);
  CollectWarning(b.data(), nullptr);
}

// Reads and parses the file (at most 1 MiB). A bad line is warned about and skipped; the
// other entries apply. No malloc: the host may be anywhere in its start-up.
void LoadSuppressions(const char* path) {
  constexpr size_t kMaxBytes = 1 << 20;
  char buf[1280];
  TextBuffer why(buf, sizeof(buf));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    why.Str("forkguard: ignoring FORKGUARD_SUPPRESSIONS=").Str(path).Str(": cannot open it (");
    why.Str(strerror(errno)).Str("); using no suppressions");
    CollectWarning(why.data(), nullptr);
    return;
  }
  char* text = static_cast<char*>(MapAnonymous(kMaxBytes + 1));
  size_t n = 0;
  bool read_all = false;
  while (text != nullptr && n <= kMaxBytes) {
    ssize_t got = read(fd, text + n, kMaxBytes + 1 - n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      read_all = got == 0;
      break;
    }
    n += static_cast<size_t>(got);
  }
  close(fd);
  if (text == nullptr || !read_all || n > kMaxBytes) {
    why.Str("forkguard: ignoring FORKGUARD_SUPPRESSIONS=").Str(path);
    why.Str(n > kMaxBytes ? ": larger than 1 MiB" : ": cannot read it");
    why.Str("; using no suppressions");
    CollectWarning(why.data(), nullptr);
    if (text != nullptr) munmap(text, kMaxBytes + 1);
    return;
  }
  auto* set = static_cast<SuppressionSet*>(MapAnonymous(sizeof(SuppressionSet)));
  if (set != nullptr) {
    ParseSuppressions(text, n, set, SuppressionLineWarning, const_cast<char*>(path));
    if (set->count > 0) {
      g_suppressions = set;
    } else {
      munmap(set, sizeof(SuppressionSet));
    }
  }
  munmap(text, kMaxBytes + 1);
}

// Reads the job's view of this process (host, rank, local rank, job id) once; see g_job.
// Async-signal-safe as the fork path needs (uname, reads of the environment, no malloc) and
// errno-neutral. Idempotent: threads that race (or a signal handler that interrupts it)
// compute and store the same bytes.
void EnsureIdentity() {
  if (g_identity_done.load(std::memory_order_acquire)) return;
  int saved = errno;
  // Not trusted under AT_SECURE: no rank and no job.
  JobIdentity job = ReadJobIdentity(g_secure ? nullptr : Getenv, nullptr);
  char host[256];
  if (gethostname(host, sizeof(host) - 1) != 0) strcpy(host, "?");
  host[sizeof(host) - 1] = '\0';
  SetIdentityHost(job, host);
  g_job = job;
  strcpy(g_host, g_job.host);
  g_rank = g_job.rank;
  SetStderrIdentity(g_job.short_host, g_job.rank);
  errno = saved;
  g_identity_done.store(true, std::memory_order_release);
}

ProcessIdentity Identity() {
  EnsureIdentity();
  ProcessIdentity id;
  id.pid = getpid();
  id.prog = g_prog;
  id.host = g_host;
  id.rank = g_rank;
  return id;
}

// The core's part of the atfork handlers (shim/fork_frames.h: the prepare handler calls
// `decide` before it takes the state lock, the child handler `child` after the lock was
// reset).
bool CoreAtforkDecide(ForkFrame* out);
// A SIGSEGV table prepared by an atfork decision (a wrapper's own is released by the wrapper).
void CoreAtforkParent(const ForkFrame& f) {
  if (f.explain_segv) ReleaseChildSegvTable();
}
FORKGUARD_CHILD_PATH void CoreAtforkChild(const ForkFrame* f) {
  ChildAfterFork(f != nullptr && f->hazard, f != nullptr && f->explain_segv);
}
constinit const ForkAtforkHooks kCoreAtforkHooks = {CoreAtforkDecide, CoreAtforkParent,
                                                    CoreAtforkChild};

FORKGUARD_START_PATH void Init() {
  // Under AT_SECURE (setuid, capabilities) the environment is not ours to trust.
  g_secure = getauxval(AT_SECURE) != 0;
  // The defaults are zero bytes but for the stack depth. The parser writes only what the
  // environment sets, in place: the configuration's tail (paths, patterns) is left untouched.
  g_config.stack_depth = Config::kDefaultStackDepth;
  if (!g_secure && AnyForkguardVariable()) {
    ParseConfigInto(g_config, Getenv, nullptr, CollectWarning, nullptr, false);
  }
  if (g_config.suppressions[0] != '\0') LoadSuppressions(g_config.suppressions);
  const char* prog = program_invocation_short_name;
  CopyCString(g_prog, sizeof(g_prog), prog != nullptr && prog[0] != '\0' ? prog : "?");
  // A line on stderr starts with the host and rank (shim/stderr_line.h): whatever prints
  // one first reads them.
  SetStderrIdentitySource(EnsureIdentity);
  InitOwnCodeRange();
  // The RDMA device numbers and the descriptors the process started with are learned at
  // its first fork or RDMA call (EnsureForkFacts), the fork support variables at its first
  // RDMA call (EnsureForkEnv), the job identity when it is needed (EnsureIdentity).
  if (g_config.log_dir[0] != '\0') {
    EnsureIdentity();
    LogIdentity lid;
    lid.host = g_host;
    lid.prog = g_prog;
    lid.rank = g_rank;
    lid.local_rank = g_job.local_rank;
    lid.job = g_job.job;
    lid.step = g_job.step;
    GlobalEventLog().Configure(g_config.log_dir, lid, CollectWarning, nullptr, g_config.quiet);
  }
  // Clean forks are logged with their stack; otherwise stacks are needed only once RDMA
  // is seen (see Active()).
  if (GlobalEventLog().enabled()) LoadUnwinder();
  for (int i = 0; i < g_warning_count; ++i) {
    if (!g_config.quiet) {
      WriteStderr(g_warnings[i], strlen(g_warnings[i]));
    }
  }
  // Our atfork handlers are registered now only when something may need them before the
  // first watched RDMA call: the log (every fork is logged) or RDMA devices on this machine
  // (the descriptor backstop decides forks that bypass our wrappers). Otherwise at that
  // first call (ActiveSlow, OnOpened, OnDeepBind): until then a fork runs no code of ours in
  // the child (shim/README.md, "Cost").
  if (g_config.mode != Mode::kOff && (GlobalEventLog().enabled() || RdmaDevicesMayExist())) {
    InstallForkAtfork(&kCoreAtforkHooks);
  }
  g_ready = true;
  if (GlobalEventLog().enabled()) {
    LogProcessStart(ModeName(g_config.mode), FORKGUARD_VERSION);
    for (int i = 0; i < g_warning_count; ++i) LogNote(g_warnings[i]);
  }
  g_init_done.store(true, std::memory_order_release);
}

// A process created by a raw clone()/clone3() syscall (Go's runtime, sandboxes) runs no
// atfork handler and none of our fork wrappers: the first watched call it makes (exec*, an
// device open/PD/rdma_cm call, fork) finds this thread's cached pid still the parent's (not
// on registration: one getpid() per ibv_reg_mr is measurable there). Say once, then treat it
// as a hazardous child. Async-signal-safe (getpid, write); writes nothing in a vfork child.
void CheckUnseenChild() {
  pid_t cached = CachedPid();
  if (cached == 0 || !GlobalState().EverInitialized()) return;
  pid_t now = getpid();
  ThreadForkFrames& forks = ThisThreadForks();
  if (now == cached) {
    if (forks.vfork_from != 0) forks.vfork_from = 0;  // back in the parent after a vfork
    return;
  }
  if (forks.vfork_from == cached) return;
  ResetCachedTid();
  bool live = GlobalState().AnyLive();
  ChildAfterFork(live, false);
  if (g_config.quiet || g_config.mode == Mode::kOff) return;
  char buf[768];
  TextBuffer b(buf, sizeof(buf));
  b.Str("forkguard: pid ").Dec(now).Str(" (").Str(g_prog).Str(") was created from pid ");
  b.Dec(cached).Str(
      " by a raw clone()/clone3() system call (no fork(), no atfork handlers), after RDMA init "
      "there: forkguard could not decide or stop it. It inherited the parent's descriptors "
      "(including /dev/infiniband) and, ");
  b.Str(live ? "if fork support was on, none of the MADV_DONTFORK pages the parent registered: "
               "a SIGSEGV in them is not explained in this process"
             : "since the parent had released its RDMA resources, nothing else");
  b.Char('\n');
  WriteStderr(b.data(), b.size());
}

// Set once a hook found everything in place (Init, the fork facts, the unwinder asked
// for; the mode is not off): from then on a hook's entry is this one load.
std::atomic<bool> g_hooks_ready{false};

__attribute__((noinline)) bool ActiveSlow() {
  EnsureInit();
  EnsureForkFacts();
  if (g_config.mode == Mode::kOff) return false;
  EnsureIdentity();
  EnsureForkEnv();
  // The first watched RDMA call: our atfork handlers before anything of ours takes a lock
  // (every hook calls Active() before it touches the tables). A fork on another thread
  // either runs all of them (registered first: glibc's fork holds its atfork lock from the
  // prepare handlers to the parent/child ones, and pthread_atfork takes the same lock) or
  // none, and then nothing of ours was locked or tracked when it copied the process.
  InstallForkAtfork(&kCoreAtforkHooks);
  LoadUnwinder();
  g_hooks_ready.store(true, std::memory_order_release);
  return true;
}

// Entry of every RDMA hook.
inline bool Active() { return g_hooks_ready.load(std::memory_order_acquire) || ActiveSlow(); }

// No FORKGUARD_LOG: the event log can never be enabled (not even asked).
inline bool NoLog() { return g_config.log_dir[0] == '\0'; }

void NoteInit(RdmaCall call, const char* device) {
  RdmaState& st = GlobalState();
  if (st.EverInitialized()) return;
  RawStack stack;
  CaptureStack(&stack, g_config.stack_depth);
  // A Cython extension (pyverbs) or a Python thread holding the GIL: its Python stack.
  PythonStack py;  // ~11 KiB on a normal thread stack (not the fork path)
  CapturePythonStack(&py, g_config.stack_depth);
  if (!st.NoteInit(call, device, stack, py, MonotonicNs())) return;
  // Ask the kernel about copy-on-fork now, never later from an atfork handler; and learn
  // the RDMA device numbers again in case the modules were loaded after we started.
  KernelCopyOnFork();
  LearnRdmaDeviceNumbers();
  g_rdma_core.store(facts::RdmaCoreFromMaps(), std::memory_order_relaxed);
  LogRdmaInit(call, device, stack, &py);
}

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

// A forked child using an object its parent created: say so once per process.
void ReportInheritedUse(const char* call, const void* handle) {
  pid_t self = getpid();
  if (!GlobalState().IsInheritedHandle(reinterpret_cast<uintptr_t>(handle), self)) return;
  static pid_t reported_in = 0;
  if (reported_in == self) return;
  reported_in = self;
  char buf[512];
  TextBuffer b(buf, sizeof(buf));
  b.Str("forkguard: pid ").Dec(self).Str(" (").Str(g_prog).Str(") calls ").Str(call);
  b.Str(" on an RDMA object its parent (pid ").Dec(getppid());
  b.Str(") created before fork; RDMA objects are not usable in a forked child");
  if (!g_config.quiet) {
    WriteStderr(b.data(), b.size());
  }
  LogNote(b.data());
}

// Every RDMA hook: nothing but a flag test outside a hazardous child.
inline void CheckInheritedUse(const char* call, const void* handle) {
  if (IsHazardousChild() && handle != nullptr) ReportInheritedUse(call, handle);
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
                                                   bool child_execs = false) {
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
inline void LogCleanFork(ForkVia via, bool interrupted) {
  if (GlobalEventLog().enabled()) WriteCleanForkEvent(via, interrupted);
}

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
  int stored = 0;
  int kinds_stored = 0;
  Vma* vmas = nullptr;       // mmap'd, kMaxDcVmas entries
  KindVma* kinds = nullptr;  // mmap'd, kMaxDcVmas entries
};
constinit DontforkCache g_dc_cache;
constexpr int kMaxDcVmas = 4096;

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

void ReadDontforkView(const StateSnapshot& snap, Vma* keep, Vma* out, int* stored, KindVma* kinds,
                      int* kinds_stored, int* vma_count) {
  *stored = 0;
  *kinds_stored = 0;
  *vma_count = -1;
  bool cacheable = snap.mr_count > 0;
  pid_t pid = CurrentPid();
  if (cacheable && g_dc_cache.lock.TryLock()) {
    bool hit = g_dc_cache.vmas != nullptr && g_dc_cache.kinds != nullptr && g_dc_cache.pid == pid &&
               g_dc_cache.generation == snap.mr_generation;
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
  SmapsOut o;
  o.dc = out;
  o.dc_cap = kMaxDcVmas;
  o.kinds = kinds;
  o.kinds_cap = kMaxDcVmas;
  o.keep = keep;
  o.keep_count = keep != nullptr ? MergeRanges(snap, keep) : 0;
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
  }
  g_dc_cache.lock.Unlock();
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
  static constexpr int kMaxDcVmas = 4096;
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
    per_mr_bytes = keep_off + n * sizeof(Vma);
    per_mr = MapAnonymous(per_mr_bytes);
    if (per_mr == nullptr) return false;
    char* base = static_cast<char*>(per_mr);
    mr_dontfork = reinterpret_cast<bool*>(base);
    mr_fate = reinterpret_cast<MrFate*>(base + fate_off);
    keep = reinterpret_cast<Vma*>(base + keep_off);
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

// The decision for a fork with RDMA state. `via` atfork: the fork cannot be failed and the
// kernel is not asked anything new. With `query` (forkguard_fork_check) nothing forks: the
// same decision is made and written there, and nothing is printed, logged or enforced.
ForkDecision DecideHazardousFork(const RdmaFds& fds, ForkVia via,
                                 forkguard_check_result* query = nullptr) {
  ForkDecision d;
  RdmaState& st = GlobalState();
  // RDMA found by the backstop only: no hook loaded the unwinder or read these yet.
  LoadUnwinder();
  EnsureIdentity();
  EnsureForkEnv();
  Scratch scratch;
  if (!scratch.MapFixed()) return d;
  StateSnapshot& snap = scratch.fixed->snap;
  // No tables (their lock was given up on, or no memory for the copy): still a verdict.
  if (!st.TakeSnapshot(&snap)) {
    // A query is answered without the tables' details (and never printed, logged or failed).
    if (query != nullptr) {
      FillCleanQueryResult(query, fds);
      bool held = st.AnyLive() || fds.uverbs > 0 || fds.rdma_cm > 0;
      unsigned reasons = held ? static_cast<unsigned>(kInheritedRdma) : 0u;
      api::SetVerdict(query, reasons);
      query->contexts = query->pds = query->mrs = query->cm_ids = query->cm_channels = -1;
      api::CopyField(query->detail, sizeof(query->detail),
                     "partial: the shim's tables could not be read (descriptors and the live "
                     "count only)");
      return d;
    }
    return DecideWithoutState(fds, via);
  }
  snap.counts.uverbs_fds = fds.uverbs;
  snap.counts.rdma_cm_fds = fds.rdma_cm;
  if (!scratch.MapFlags(snap.mr_count)) {
    RdmaState::FreeSnapshot(&snap);
    return d;
  }
  Vma* dc = scratch.fixed->dc;
  KindVma* kinds = scratch.fixed->kinds;
  int64_t now = MonotonicNs();

  // The kernel's view of DONTFORK ranges and the kinds of registered memory, only when
  // something may be registered.
  int dc_stored = 0;
  int kinds_stored = 0;
  int vma_count = -1;
  if (snap.mr_count > 0 || (snap.counts.contexts == 0 && fds.uverbs > 0)) {
    ReadDontforkView(snap, scratch.keep, dc, &dc_stored, kinds, &kinds_stored, &vma_count);
  }
  // Asked at the first RDMA init; never for the first time from an atfork handler.
  KernelCofFact cof = via == ForkVia::kAtfork ? CachedKernelCopyOnFork() : KernelCopyOnFork();
  ForkSupportFact support = CurrentForkSupport();
  facts::MachineFacts machine;
  machine.reported_cof = cof.value;
  machine.probe = CachedPinProbe();
  machine.rdma_core = support.rdma_core;
  machine.fork_support = support.env != nullptr ? facts::ForkSupportBy::kEnvironment
                         : support.on           ? facts::ForkSupportBy::kForkInit
                                                : facts::ForkSupportBy::kOff;
  machine.hugepages_safe = g_hugepages_safe;

  VerdictInput in;
  in.counts = snap.counts;
  in.mrs = snap.mrs;
  in.mr_count = snap.mr_count;
  in.dc_vmas = dc;
  in.dc_count = dc_stored;
  in.kind_vmas = kinds;
  in.kind_count = kinds_stored;
  in.machine = &machine;
  // A query's answer for a fork that is not a hazard (no stacks before they are captured).
  auto answer_clean = [&](const ForkVerdict& verdict, const RawStack* stack,
                          const PythonStack* py) {
    ForkReport r;
    r.verdict = verdict;
    r.snap = &snap;
    r.mr_dontfork = scratch.mr_dontfork;
    r.dc_count = dc_stored;
    r.cof = cof;
    r.fork_stack = stack;
    r.fork_py = py;
    FillQueryResult(query, r, nullptr);
  };
  ForkVerdict v = DecideVerdict(in, scratch.mr_dontfork, scratch.mr_fate);
  if (!v.hazard()) {
    if (query != nullptr) {
      answer_clean(v, nullptr, nullptr);
    } else {
      LogCleanFork(via, false);
    }
    RdmaState::FreeSnapshot(&snap);
    return d;
  }

  RawStack& fork_stack = scratch.fixed->fork_stack;
  CaptureStack(&fork_stack, g_config.stack_depth);
  BeginSymbolizing();
  // os.fork() holds the GIL: the Python line that forked.
  PythonStack& fork_py = scratch.fixed->fork_py;
  CapturePythonStack(&fork_py, g_config.stack_depth);
  // A child known to exec right away is judged by what it can touch before exec.
  const char* exec_site = ChildExecSite(fork_py);
  if (exec_site != nullptr) {
    in.child_execs = true;
    v = DecideVerdict(in, scratch.mr_dontfork, scratch.mr_fate);
    if (!v.hazard()) {
      if (query != nullptr) {
        answer_clean(v, &fork_stack, &fork_py);
      } else if (GlobalEventLog().enabled()) {
        WriteCleanForkEvent(via, false, /*child_execs=*/true);
      }
      RdmaState::FreeSnapshot(&snap);
      return d;
    }
  }
  d.hazard = true;
  uint64_t site = SiteOf(fork_stack, &fork_py);
  bool allowed = MatchesAllowList(fork_stack, fork_py);
  const Suppression* suppressed =
      allowed ? nullptr
              : MatchSuppressions(fork_stack, fork_py, v.reasons, scratch.fixed->frames,
                                  scratch.fixed->demangled);
  bool silenced = allowed || suppressed != nullptr;
  // A query must not use up the site's one message: the fork that follows still prints it.
  bool report = !silenced && query == nullptr &&
                (g_config.report == ReportPolicy::kAlways || st.FirstTimeForSite(site));

  ForkReport r;
  r.who = Identity();
  r.verdict = v;
  r.snap = &snap;
  r.mr_dontfork = scratch.mr_dontfork;
  r.mr_fate = scratch.mr_fate;
  r.dc_vmas = dc;
  r.dc_count = dc_stored;
  r.fork_stack = &fork_stack;
  r.fork_py = &fork_py;
  r.now_mono_ns = now;
  r.mode = g_config.mode;
  r.via = via;
  r.threads = ReadThreadCount();
  r.map_count = vma_count >= 0 ? vma_count : CountMaps();
  r.max_map_count = MaxMapCount();
  r.cof = cof;
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
  r.site = site;
  r.allowed = allowed;
  r.suppressed = suppressed != nullptr ? suppressed->text : nullptr;
  r.reported = report && !g_config.quiet;
  bool enforce = !silenced && v.enforceable();

  if (query != nullptr) {
    TextBuffer msg(scratch.fixed->message, Scratch::kMessageBytes);
    FormatHazardMessage(msg, r, /*demangle=*/true);
    FillQueryResult(query, r, msg.data());
    query->enforceable = enforce ? 1 : 0;
    RdmaState::FreeSnapshot(&snap);
    return d;
  }

  if (report && !g_config.quiet) {
    TextBuffer msg(scratch.fixed->message, Scratch::kMessageBytes);
    FormatHazardMessage(msg, r, /*demangle=*/true);
    WriteStderr(msg.data(), msg.size());
  }
  // A library loaded RTLD_DEEPBIND may be why RDMA was only found by the backstop: say so
  // once (not from an atfork handler: it takes the loader lock).
  if (via != ForkVia::kAtfork && !g_config.quiet && ReportDeepbindOnce()) {
    LogNote("a library was loaded with RTLD_DEEPBIND: its RDMA calls bypass interposition");
  }

  LogFork(r);

  if (enforce && g_config.mode == Mode::kAbort) abort();
  if (enforce && g_config.mode == Mode::kError && via != ForkVia::kAtfork) {
    d.fail = true;
    d.err = FailErrno(via);
  } else if (v.dontfork_mrs > 0) {
    d.explain_segv = PrepareChildSegvTable(snap, scratch.mr_dontfork, g_config.quiet);
  }
  RdmaState::FreeSnapshot(&snap);
  return d;
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
    EnsureIdentity();
    char buf[768];
    TextBuffer b(buf, sizeof(buf));
    b.Str("forkguard: fork after RDMA init in pid ").Dec(getpid()).Str(" (").Str(g_prog);
    if (g_rank >= 0) b.Str(", rank ").Dec(g_rank);
    b.Str(" on ").Str(g_host).Str("): verdict: hazard (inherited-rdma); forked from a signal ");
    b.Str("handler that interrupted forkguard, so no details; mode: ").Str(ModeName(g_config.mode));
    b.Str(" - ").Str(action).Char('\n');
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
  b.Str("forkguard: internal lock held for over ").Dec(LockBoundNs() / 1000000000);
  b.Str(" s by thread ").Dec(owner).Str(" in pid ").Dec(getpid());
  b.Str(": not waiting any longer; RDMA records may be missing and forks may get partial ");
  b.Str("verdicts from now on (a forkguard bug: please report it)");
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
  ForkDecision d = Decide(ForkVia::kAtfork, t_busy != 0);
  out->hazard = d.hazard;
  out->explain_segv = d.explain_segv;
  return d.hazard || d.explain_segv;
}

// ibv_open_device/ibv_alloc_pd called by librdmacm's own code (its per-device cache, kept
// until the process exits), not by the program.
bool CalledFromRdmacm(const void* caller) {
  if (caller == nullptr) return false;
  BeginSymbolizing();
  SymbolizedFrame f = Symbolize(reinterpret_cast<uintptr_t>(caller), true);
  return f.obj != nullptr && strncmp(BaseName(f.obj), "librdmacm.so", 12) == 0;
}

// A watched release (close device, dealloc PD, destroy channel/id/ep): flagged when a
// forked child releases its parent's object, forgotten when the call succeeded, logged.
void OnRelease(const char* call, const void* handle, bool (RdmaState::*remove)(uintptr_t), int ret,
               int err) {
  BusyScope busy;
  if (!Active()) return;
  CheckInheritedUse(call, handle);
  if (ret == 0) (GlobalState().*remove)(reinterpret_cast<uintptr_t>(handle));
  LogRdmaCall(call, nullptr, handle, ret == 0, err);
}

}  // namespace

FORKGUARD_START_PATH void EnsureInit() {
  // Every hook starts here: one load once initialized, not a call into pthread_once.
  if (g_init_done.load(std::memory_order_acquire)) return;
  pthread_once(&g_once, Init);
}

void OnOpenDevice(const void* ctx, const char* device, int err, const void* caller) {
  BusyScope busy;
  if (!Active()) return;
  CheckUnseenChild();
  if (ctx != nullptr) {
    GlobalState().AddContext(reinterpret_cast<uintptr_t>(ctx), device, CalledFromRdmacm(caller));
    NoteInit(RdmaCall::kOpenDevice, device);
  }
  LogRdmaCall("ibv_open_device", device, ctx, ctx != nullptr, err);
}

void OnCloseDevice(const void* ctx, int ret, int err) {
  OnRelease("ibv_close_device", ctx, &RdmaState::RemoveContext, ret, err);
}

void OnAllocPd(const void* pd, const void* ctx, int err, const void* caller) {
  BusyScope busy;
  if (!Active()) return;
  CheckUnseenChild();
  CheckInheritedUse("ibv_alloc_pd", ctx);
  if (pd != nullptr) GlobalState().AddPd(reinterpret_cast<uintptr_t>(pd), CalledFromRdmacm(caller));
  LogRdmaCall("ibv_alloc_pd", nullptr, pd, pd != nullptr, err);
}

void OnDeallocPd(const void* pd, int ret, int err) {
  OnRelease("ibv_dealloc_pd", pd, &RdmaState::RemovePd, ret, err);
}

void OnDontfork(const void* addr, size_t len) {
  uintptr_t lo = reinterpret_cast<uintptr_t>(addr);
  uintptr_t hi = lo + len;
  if (len == 0 || hi < lo) return;
  if (t_marks.bytes == 0) {
    t_marks = DontforkMarks{lo, hi, len};
    return;
  }
  if (lo < t_marks.lo) t_marks.lo = lo;
  if (hi > t_marks.hi) t_marks.hi = hi;
  t_marks.bytes += len;
}

// OnRegMr's log record, out of line (the registration path without a log stays one page).
static __attribute__((noinline)) void LogRegistration(const MrRecord& rec) {
  if (!GlobalEventLog().enabled()) return;
  // No smaps read here (it made registration with a log tens of times slower): `dontfork`
  // is true when the library's own madvise(MADV_DONTFORK) calls during this registration
  // covered the range, absent when none did (not marked now, or marked earlier: unknown
  // without /proc). The kernel's view is read at fork time (fork event, ranges[].dontfork).
  bool dontfork = false;
  if (rec.call != RdmaCall::kRegDmabufMr && rec.len > 0 && t_marks.bytes > 0) {
    uintptr_t page = PageSize();
    uintptr_t lo = rec.addr & ~(page - 1);
    uintptr_t hi = (rec.addr + rec.len + page - 1) & ~(page - 1);
    // Marks never overlap (each page is marked once), so bytes == hull means no hole.
    dontfork = t_marks.lo <= lo && t_marks.hi >= hi && t_marks.bytes >= t_marks.hi - t_marks.lo;
  }
  LogMrRegister(rec, dontfork);
}

// OnDeregMr's count, out of line as LogRegistration.
static __attribute__((noinline)) void CountDeregistration() { CountMrDeregister(); }

FORKGUARD_REG_PATH void OnRegMr(RdmaCall call, const void* mr, const void* pd, const void* addr,
                                size_t len, int access, int err) {
  BusyScope busy;
  if (!Active()) return;
  if (IsHazardousChild()) CheckInheritedUse(RdmaCallName(call), pd);
  if (mr == nullptr) {
    LogRdmaCall(RdmaCallName(call), nullptr, nullptr, false, err);
    return;
  }
  MrRecord rec;
  rec.handle = reinterpret_cast<uintptr_t>(mr);
  rec.addr = reinterpret_cast<uintptr_t>(addr);
  rec.len = len;
  rec.access = access;
  rec.call = call;
  rec.owner = CurrentPid();
  // The stack is shown in a hazard message (its innermost user frame), in a child's SIGSEGV
  // explanation and in the log's stack record, for which the innermost frames say where.
  // Forks and RDMA init keep FORKGUARD_STACK_DEPTH frames. A call site seen before is
  // checked on the live stack instead of unwound (stack.h CaptureRepeatedStack).
  constexpr int kRegistrationDepth = 12;
  int depth = g_config.stack_depth;
  if (depth > kRegistrationDepth) depth = kRegistrationDepth;
  CaptureRepeatedStack(&rec.stack, depth);
  RdmaState& st = GlobalState();
  st.AddMr(rec);
  if (!st.EverInitialized()) NoteInit(call, nullptr);
  if (NoLog()) return;
  LogRegistration(rec);
}

FORKGUARD_REG_PATH void OnDeregMr(const void* mr, int ret, int err) {
  BusyScope busy;
  if (!Active()) return;
  CheckInheritedUse("ibv_dereg_mr", mr);
  if (ret != 0) {
    LogRdmaCall("ibv_dereg_mr", nullptr, mr, false, err);
    return;
  }
  // The deregistration of an MR we tracked is counted, not a line: a line is one write(2),
  // which in the Soft-RoCE guest costs more than everything else the log does for a pair
  // (9.8 us of a 48 us 4 KiB reg+dereg), and the report needs only the total (a fork event
  // lists what is live from our table). An MR we never saw registered is logged.
  if (!GlobalState().RemoveMr(reinterpret_cast<uintptr_t>(mr), nullptr)) {
    LogMrDeregister(mr);
    return;
  }
  if (!NoLog()) CountDeregistration();
}

void OnForkInit(int ret, int err, const void* caller) {
  BusyScope busy;
  if (!Active()) return;
  if (ret == 0) {
    // Who turned fork support on: the object of the caller (libibverbs itself when
    // RDMAV_FORK_SAFE made it call its own ibv_fork_init; UCX's libuct_ib; NCCL ...).
    BeginSymbolizing();
    SymbolizedFrame f = Symbolize(reinterpret_cast<uintptr_t>(caller), true);
    if (g_fork_init_caller[0] == '\0' && f.obj != nullptr) {
      TextBuffer b(g_fork_init_caller, sizeof(g_fork_init_caller));
      b.Str(BaseName(f.obj));
    }
    g_fork_init_ok.store(true, std::memory_order_relaxed);
  }
  LogForkInit(ret, err, g_fork_init_caller);
}

void OnCmCreate(RdmaCall call, const void* handle, int err) {
  BusyScope busy;
  if (!Active()) return;
  CheckUnseenChild();
  if (handle != nullptr) {
    GlobalState().AddCm(reinterpret_cast<uintptr_t>(handle), call);
    NoteInit(call, nullptr);
  }
  LogRdmaCall(RdmaCallName(call), nullptr, handle, handle != nullptr, err);
}

void OnCmDestroy(const char* call, const void* handle, int ret, int err) {
  OnRelease(call, handle, &RdmaState::RemoveCm, ret, err);
}

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
    d = Decide(via, t_busy != 0);
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
    DecideHazardousFork(fds, ForkVia::kFork, out);
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
  ChildAfterFork(d.hazard, d.explain_segv);
}

void AfterForkParent(const ForkDecision& d, pid_t child) {
  if (d.framed) PopForkFrame();
  if (d.explain_segv) ReleaseChildSegvTable();
  if (g_config.mode == Mode::kOff || child <= 0) return;
  LogForkChild(child);
}

void OnSpawn(const char* call, pid_t child, int ret) {
  BusyScope busy;
  // Without a log there is nothing to write: not Active(), which registers our atfork
  // handlers (a posix_spawn or vfork is no reason for every later fork to run them).
  EnsureInit();
  if (NoLog() || !Active()) return;
  LogSpawn(call, child, ret == 0);
}

void OnVfork() {
  // getpid(), not CurrentPid(): a pid cached on this thread before any watched call would
  // be inherited by the child of a later fork that resets no cache (our atfork handlers are
  // registered at the first watched call; until then a fork runs none).
  ThisThreadForks().vfork_from = getpid();
  OnSpawn("vfork", 0, 0);
}

FORKGUARD_START_PATH void OnExit() {
  // Without a log there is nothing to write: every process runs this at exit.
  if (!g_ready || g_config.mode == Mode::kOff || NoLog()) return;
  BusyScope busy;
  LogProcessExit();
}

void OnOpened(const char* path, int fd) {
  if (fd < 0 || path == nullptr || g_backstop_armed.load(std::memory_order_relaxed)) return;
  // /dev/infiniband/uverbsN, /dev/infiniband/rdma_cm, or rdma-core's fallback device node
  // of the same name in a private directory (containers without /dev/infiniband).
  const char* base = BaseName(path);
  if (strncmp(base, "uverbs", 6) == 0 || strcmp(base, "rdma_cm") == 0) {
    // Before the flag: a fork that sees the backstop armed finds our handlers registered.
    if (g_ready && g_config.mode != Mode::kOff) InstallForkAtfork(&kCoreAtforkHooks);
    g_backstop_armed.store(true, std::memory_order_relaxed);
  }
}

void OnDeepBind() {
  if (g_ready && g_config.mode != Mode::kOff) InstallForkAtfork(&kCoreAtforkHooks);
  g_backstop_armed.store(true, std::memory_order_relaxed);
}

void OnExecTarget(const char* file, char* const envp[], bool search) {
  // Async-signal-safe, as OnExec. Only with a log: the record is for `forkguard run`/`report`.
  if (!g_ready || g_config.mode == Mode::kOff) return;
  EventLog& log = GlobalEventLog();
  if (!log.enabled()) return;
  char resolved[1024];
  unsigned why = ExecUnwatchedReasons(file, envp != nullptr ? envp : environ, search, resolved,
                                      sizeof(resolved));
  // Nothing to say, or a target that cannot be opened (the exec fails, or we cannot tell).
  if (why == 0 || resolved[0] == '\0' || access(resolved, F_OK) != 0) return;
  RdmaFds fds = ScanRdmaFds();
  bool held = GlobalState().AnyLive() || fds.uverbs > 0 || fds.rdma_cm > 0;
  char buf[2048];
  TextBuffer b(buf, sizeof(buf));
  b.Str(",\"path\":").JsonStr(resolved).Str(",\"why\":[");
  bool first = true;
  for (ExecUnwatched r : {kExecPreloadRemoved, kExecStatic, kExecSetuid}) {
    if ((why & r) == 0) continue;
    if (!first) b.Char(',');
    b.Char('"').Str(ExecUnwatchedName(r)).Char('"');
    first = false;
  }
  b.Str("],\"held_rdma\":").Str(held ? "true" : "false");
  b.Str(",\"exec_by\":").JsonStr(g_prog);
  if (b.truncated()) return;
  // The program keeps this process's pid; a vforked child shares our memory and our cached
  // pid: ask the kernel. The record goes into a file of its own, under that pid.
  pid_t pid = static_cast<pid_t>(syscall(SYS_getpid));
  pid_t ppid = static_cast<pid_t>(syscall(SYS_getppid));
  log.WriteForeignFile(pid, ppid, BaseName(resolved), schema::kUnwatchedExec, b.data());
}

void OnExec(const char* path) {
  // Async-signal-safe: a child may exec right after fork.
  if (g_ready && g_config.mode != Mode::kOff) CheckUnseenChild();
  if (IsHazardousChild()) ChildNoteExec(path);
  // Not from a vfork child: it shares its parent's memory (its log state, its counts, the
  // cached pid) but not its descriptors, which it may have closed (close_fds), and its exec
  // is another pid's. A write there would fail and mark the parent's log broken.
  pid_t vfork_from = ThisThreadForks().vfork_from;
  if (vfork_from != 0 && getpid() != vfork_from) return;
  LogExec(path);
  // The counts not written yet: the image that counted them is about to go (its destructor
  // never runs).
  if (NoLog()) return;
  FlushEventCounts();
}

}  // namespace forkguard::core
