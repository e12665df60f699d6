// The RDMA hooks: what the core does after each watched libibverbs/librdmacm call (the
// tables, the first RDMA init, a forked child's use of its parent's objects, the log). Every
// hook starts with Active() (hooks_internal.h).
#include <errno.h>
#include <unistd.h>

#include <cstring>

#include "facts/machine_facts.h"
#include "shim/base/child_path.h"
#include "shim/child/child.h"
#include "shim/hooks/hooks.h"
#include "shim/hooks/hooks_internal.h"
#include "shim/log/event_writer.h"
#include "shim/messages/message.h"
#include "shim/stack/python_stack.h"
#include "shim/stack/stack.h"
#include "shim/state/state.h"
#include "shim/verdict/proc_facts.h"

namespace forkguard::hooks {

__thread DontforkMarks t_marks __attribute__((tls_model("initial-exec"))) = {0, 0, 0};

namespace {

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

// A forked child using an object its parent created: say so once per process.
void ReportInheritedUse(const char* call, const void* handle) {
  pid_t self = getpid();
  if (!GlobalState().IsInheritedHandle(reinterpret_cast<uintptr_t>(handle), self)) return;
  static pid_t reported_in = 0;
  if (reported_in == self) return;
  reported_in = self;
  char buf[512];
  TextBuffer b(buf, sizeof(buf));
  FormatInheritedUse(b, self, g_prog, call, getppid());
  if (!g_config.quiet) {
    WriteStderr(b.data(), b.size());
  }
  LogNote(b.data());
}

// Every RDMA hook: nothing but a flag test outside a hazardous child.
inline void CheckInheritedUse(const char* call, const void* handle) {
  if (IsHazardousChild() && handle != nullptr) ReportInheritedUse(call, handle);
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
}  // namespace forkguard::hooks
