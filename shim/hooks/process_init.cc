// The shim's process init and configuration: FORKGUARD_* and the suppressions file read at
// start, the job identity, the facts learned at the first fork or RDMA call, the hooks'
// readiness, and the process's exit. The RDMA hooks are in rdma_hooks.cc, exec/spawn/open in
// process_hooks.cc, the fork decision in fork_decision.cc.
#include "shim/hooks/hooks.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "facts/fork_rule.h"
#include "shim/base/start_path.h"
#include "shim/base/stderr_line.h"
#include "shim/hooks/hooks_internal.h"
#include "shim/log/event_writer.h"
#include "shim/messages/message.h"
#include "shim/stack/stack.h"
#include "shim/verdict/proc_facts.h"

#ifndef FORKGUARD_VERSION
#define FORKGUARD_VERSION "0.1.0"
#endif

namespace forkguard::hooks {

__thread int t_busy __attribute__((tls_model("initial-exec"))) = 0;

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
FORKGUARD_START_DATA bool g_ready = false;
SuppressionSet* g_suppressions = nullptr;

// Fork support (the rdma-core x kernel x who matrix): see hooks_internal.h.
char g_fork_env[64] = "";
std::atomic<bool> g_fork_init_ok{false};
char g_fork_init_caller[128] = "";
ZeroFilledAtomic<int, -1> g_rdma_core;
bool g_hugepages_safe = false;

std::atomic<bool> g_hooks_ready{false};

namespace {

// The whole of the job identity (g_host and g_rank are its parts the other files read).
constinit JobIdentity g_job{.rank = 0, .local_rank = 0, .step = 0, .host = {}, .short_host = {}};
std::atomic<bool> g_identity_done{false};
FORKGUARD_START_DATA pthread_once_t g_once = PTHREAD_ONCE_INIT;
// Init() returned (EnsureInit's fast path)
FORKGUARD_START_DATA std::atomic<bool> g_init_done{false};
std::atomic<bool> g_fork_facts{false};
std::atomic<bool> g_fork_env_read{false};

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

// The first bad line of the suppressions file (the one warning names it).
struct FirstBadLine {
  int line = 0;
  char what[768] = {};
};

void NoteBadSuppressionLine(int line, const char* what, void* ctx) {
  auto* first = static_cast<FirstBadLine*>(ctx);
  if (first->line != 0) return;
  first->line = line;
  CopyCString(first->what, sizeof(first->what), what);
}

// Reads and parses the file (at most 1 MiB). A file with any bad line is not applied at all
// (fail closed: one warning names the file and its first bad line), as one that cannot be
// read. No malloc: the host may be anywhere in its start-up.
void LoadSuppressions(const char* path) {
  constexpr size_t kMaxBytes = 1 << 20;
  char buf[1280];
  TextBuffer why(buf, sizeof(buf));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    FormatSuppressionsIgnored(why, path, "cannot open it", strerror(errno));
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
    FormatSuppressionsIgnored(why, path, n > kMaxBytes ? "larger than 1 MiB" : "cannot read it",
                              nullptr);
    CollectWarning(why.data(), nullptr);
    if (text != nullptr) munmap(text, kMaxBytes + 1);
    return;
  }
  auto* set = static_cast<SuppressionSet*>(MapAnonymous(sizeof(SuppressionSet)));
  if (set != nullptr) {
    FirstBadLine first;
    int bad = ParseSuppressions(text, n, set, NoteBadSuppressionLine, &first);
    if (bad > 0) {
      FormatSuppressionsRefused(why, path, first.line, first.what, bad);
      CollectWarning(why.data(), nullptr);
    }
    if (bad == 0 && set->count > 0) {
      g_suppressions = set;
    } else {
      munmap(set, sizeof(SuppressionSet));
    }
  }
  munmap(text, kMaxBytes + 1);
}

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
  // A line on stderr starts with the host and rank (shim/base/stderr_line.h): whatever prints
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

}  // namespace

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

void WriteStderr(const char* p, size_t n) { WriteStderrLines(p, n); }

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

FORKGUARD_START_PATH void EnsureInit() {
  // Every hook starts here: one load once initialized, not a call into pthread_once.
  if (g_init_done.load(std::memory_order_acquire)) return;
  pthread_once(&g_once, Init);
}

FORKGUARD_START_PATH void OnExit() {
  // Without a log there is nothing to write: every process runs this at exit.
  if (!g_ready || g_config.mode == Mode::kOff || NoLog()) return;
  BusyScope busy;
  LogProcessExit();
}

}  // namespace forkguard::hooks
