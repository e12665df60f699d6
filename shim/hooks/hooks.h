// The shim's hooks, what every wrapper calls: what happens at each watched call and, in BeforeFork,
// where every fork is decided. Knows nothing about dlsym or symbol versions (that is
// shim/interpose.cc).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "api/forkguard.h"
#include "shim/messages/fork_report.h"
#include "shim/state/state.h"

namespace forkguard::hooks {

// Idempotent; every entry point calls it (wrappers may run before our constructor).
void EnsureInit();

// How deep this thread is in forkguard's own work: a hook's bookkeeping (stack capture,
// tables, log), a fork decision, a lazy symbol lookup. A fork that finds it nonzero comes
// from a signal handler that interrupted that work; the dynamic loader's locks (which
// stack capture and symbolizing take and which are not reentrant) and the tables may be
// mid-use on this very thread, so that fork is decided without them: one line, no stacks.
extern __thread int t_busy __attribute__((tls_model("initial-exec")));
class BusyScope {
 public:
  BusyScope() {
    ++t_busy;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
  }
  ~BusyScope() {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    --t_busy;
  }
  BusyScope(const BusyScope&) = delete;
  BusyScope& operator=(const BusyScope&) = delete;
};

// RDMA resources. `err` is errno after the real call. Handles are the returned pointers.
// `caller`: the return address of the intercepted call (who called it: librdmacm's own
// cached context and PD are told apart from the program's).
void OnOpenDevice(const void* ctx, const char* device, int err, const void* caller);
void OnCloseDevice(const void* ctx, int ret, int err);
void OnAllocPd(const void* pd, const void* ctx, int err, const void* caller);
void OnDeallocPd(const void* pd, int ret, int err);
void OnRegMr(RdmaCall call, const void* mr, const void* pd, const void* addr, size_t len,
             int access, int err);
// What the RDMA library marked MADV_DONTFORK (madvise through our wrapper) during this
// thread's outermost registration call: the hull of the marked ranges and their total size.
// This is how mr_register's `dontfork` is known without reading /proc/self/smaps.
struct DontforkMarks {
  uintptr_t lo;
  uintptr_t hi;
  size_t bytes;
};
extern __thread DontforkMarks t_marks __attribute__((tls_model("initial-exec")));
// Before the real call of the outermost ibv_reg_mr* on this thread (inline: the wrapper's
// hot path makes no call of its own before the real function).
inline void BeforeRegMr() {
  if (t_marks.bytes != 0) t_marks = DontforkMarks{0, 0, 0};
}
// madvise(addr, len, MADV_DONTFORK) succeeded inside a watched RDMA call on this thread
// (the library marking a range it registers). Async-signal-safe, no allocation.
void OnDontfork(const void* addr, size_t len);
void OnDeregMr(const void* mr, int ret, int err);
// `caller`: the return address (names the library that turned fork support on).
void OnForkInit(int ret, int err, const void* caller);
void OnCmCreate(RdmaCall call, const void* handle, int err);
void OnCmDestroy(const char* call, const void* handle, int ret, int err);

// Process creation.
struct ForkDecision {
  bool fail = false;  // error mode: do not fork, return -1/errno
  int err = 0;
  bool hazard = false;
  bool explain_segv = false;  // the child gets the SIGSEGV explanation
  // BeforeFork pushed this fork's frame (shim/state/fork_frames.h); AfterFork* pop it.
  bool framed = false;
  // Our atfork handlers were not registered when this fork was decided (a process that
  // never made a watched RDMA call, on a machine whose RDMA devices appeared after it
  // started): no frame, and the wrapper applies the child side itself, as for _Fork.
  bool no_atfork = false;
  // FORKGUARD_MODE=fix: this fork holds the fix window (shim/fix/fork_fix.h); the parent undoes
  // the changes after the real call, the child only forgets the window.
  bool fix_window = false;
};
// True when a fork from our wrappers needs nothing of the shim, before or after: the mode
// is off, or nothing is tracked, no RDMA descriptor is possible, there is no log and no
// fork is in progress on this thread (what BeforeFork would decide is "clean, no frame").
// The wrappers then tail-call the real function, so the child returns straight to the
// caller and runs no shim code. For _Fork (its wrapper resets our per-thread caches in the
// child) it is also required that our atfork handlers were never registered: nothing was
// ever watched in this process, so there is nothing to reset. Lock-free, writes nothing.
bool ForkNeedsNothing(ForkVia via);
// In the parent, before the real fork. Clean forks: no allocation, no output. `via`: which
// entry point (fork, _Fork, daemon, forkpty); a failed decision's errno depends on it.
ForkDecision BeforeFork(ForkVia via);
// forkguard_fork_check(): what BeforeFork would decide for a fork from this thread now,
// written into `out` (all of sizeof(*out)); nothing is printed, logged or enforced, and the
// call site's one message is not used up. -1/EAGAIN from a signal handler that interrupted
// forkguard on this thread.
int QueryFork(forkguard_check_result* out);
// In the parent after the real fork returned (child > 0) or failed (child < 0).
void AfterForkParent(const ForkDecision& d, pid_t child);
// In the child, after the real fork returned 0 (the atfork child handler already ran).
void AfterForkChild(const ForkDecision& d);
// In the child of a fork that ran no atfork handlers (_Fork), after it returned 0.
void AfterRawForkChild(const ForkDecision& d);
void OnSpawn(const char* call, pid_t child, int ret);
// vfork: logged before the call (the child pid is not known to us).
void OnVfork();
// exec* about to be called: in a hazardous child this logs child_exec.
void OnExec(const char* path);
// exec* about to be called with `envp` (null: this environment); `search`: `file` is looked
// up in PATH (execvp*). With a log, a program that will run without the shim (its
// environment drops the preload, a static binary, a setuid program) is logged as
// unwatched_exec (shim/base/exec_watch.h). Async-signal-safe.
void OnExecTarget(const char* file, char* const envp[], bool search);
// The process is exiting normally (shim destructor).
void OnExit();
// open*() returned `fd` for `path` (async-signal-safe). Opening an RDMA device node arms the
// descriptor backstop; until then a clean fork skips the /proc/self/fd scan.
void OnOpened(const char* path, int fd);
// A library was dlopen'ed RTLD_DEEPBIND: its open() calls bypass us, so the backstop scans
// at every fork from now on (async-signal-safe, no allocation).
void OnDeepBind();

}  // namespace forkguard::hooks
