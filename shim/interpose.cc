// The interposition shell of libforkguard.so: one typed hook per symbol, real functions
// found at run time, every wrapper forwards to the core (shim/hooks/hooks.h). No policy here.
//
// Real functions: dlvsym(RTLD_NEXT, name, version) with the version the RDMA libraries
// export today (objdump -T); when the library was loaded RTLD_LOCAL (Python extensions)
// RTLD_NEXT cannot see it, so fall back to dlopen(lib, RTLD_NOLOAD) + dlvsym. A definition
// inside our own object is rejected (IsOurs). A missing real function fails the call with ENOSYS.
//
// Nesting: libibverbs and librdmacm call their own exports through their PLTs (ibv_reg_mr
// -> ibv_reg_mr_iova2, rdma_create_ep -> rdma_create_id), so one user call can pass
// several wrappers of one kind; only the outermost of each kind (device, PD, MR, rdma_cm)
// per thread is reported to the core. A resource of another kind made inside a call
// (the context and PD librdmacm opens inside rdma_create_ep) is a resource of its own and
// is reported.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pty.h>
#include <rdma/rdma_cma.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "shim/base/child_path.h"
#include "shim/base/dlopen_check.h"
#include "shim/base/start_path.h"
#include "shim/fix/fork_fix.h"
#include "shim/hooks/hooks.h"
#include "shim/next_symbol.h"
#include "shim/stack/stack.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

// glibc declares exec*/posix_spawn nonnull; the attribute does not matter for the function
// pointer types of the real functions (and NULL arguments are forwarded unchanged).
#pragma GCC diagnostic ignored "-Wignored-attributes"

namespace forkguard {
namespace {

constexpr const char* kVerbs = "libibverbs.so.1";
constexpr const char* kRdmacm = "librdmacm.so.1";
constexpr const char* kLibc = "libc.so.6";

// The kinds of watched RDMA calls; a call is reported only when it is the outermost
// watched call of its kind on this thread.
enum class Kind { kDevice, kPd, kMr, kCm, kOther, kCount };

// Any watched RDMA call in progress on this thread (the madvise wrapper asks).
__thread int t_rdma_depth __attribute__((tls_model("initial-exec"))) = 0;
__thread int t_kind_depth[static_cast<int>(Kind::kCount)]
    __attribute__((tls_model("initial-exec"))) = {};

// Counts nesting of RDMA wrappers on this thread, per kind.
class Nesting {
 public:
  explicit Nesting(Kind kind)
      : depth_(t_kind_depth[static_cast<int>(kind)]), outermost_(depth_++ == 0) {
    ++t_rdma_depth;
  }
  ~Nesting() {
    --depth_;
    --t_rdma_depth;
  }
  bool outermost() const { return outermost_; }
  // A call of this kind is already in progress on this thread: this one will not be
  // reported, and counting it would change nothing any deeper call can see (the depths stay
  // nonzero), so the wrappers of the registration path tail-call the real function.
  static bool Inside(Kind kind) { return t_kind_depth[static_cast<int>(kind)] != 0; }

 private:
  int& depth_;
  bool outermost_;
};

FORKGUARD_START_PATH void* LookUp(void* handle, const char* name, const char* version) {
  return version != nullptr ? dlvsym(handle, name, version) : dlsym(handle, name);
}

// Whether `p` is code of this very object (libforkguard.so). `&::sym` cannot tell: it
// resolves through the GOT to the first definition in the process, which is libc's when
// the shim is not first in the search order (dlopen'ed, or another interposer preloaded
// before it) - comparing with it rejected the genuine libc function (ENOSYS). Our own
// object is known by the address ranges of its executable segments (stack.h's
// IsOwnCode, from dl_iterate_phdr once). Not dladdr: it scans the whole symbol table of
// the object it finds (libc's), which was most of what every process start paid the shim.
FORKGUARD_START_PATH bool IsOurs(void* p) {
  forkguard::InitOwnCodeRange();
  return forkguard::IsOwnCode(reinterpret_cast<uintptr_t>(p));
}

// Which symbol a hook resolves, and from which library when RTLD_NEXT does not find it:
// constant data, read-only after relocation.
struct HookSpec {
  const char* name;
  const char* version;
  const char* library;
};

// The real function behind one of our exported wrappers; resolved once, retried while the
// library is not loaded yet. Only the resolved pointer is writable, and it starts as zero
// bytes (.bss): see ZeroFilled in sys.h for why the shim has no initialized data.
template <typename Fn>
class RealFunction {
 public:
  Fn Get(const HookSpec& spec) {
    void* p = fn_.load(std::memory_order_acquire);
    if (p != nullptr) return reinterpret_cast<Fn>(p);
    return Resolve(spec);
  }

  // At start: the next definition read from the symbol tables of the objects after ours
  // (shim/next_symbol.h), or dlsym when that cannot answer.
  FORKGUARD_START_PATH void Prime(const HookSpec& spec, const forkguard::NextSymbols& next) {
    void* p = spec.version == nullptr ? next.Find(spec.name) : nullptr;
    if (p != nullptr && !IsOurs(p)) {
      fn_.store(p, std::memory_order_release);
    } else {
      Resolve(spec);
    }
  }

 private:
  // Out of line: the wrappers' own code stays small (see FORKGUARD_REG_PATH).
  __attribute__((noinline)) FORKGUARD_START_PATH Fn Resolve(const HookSpec& spec) {
    hooks::BusyScope busy;  // dlsym/dlopen take the loader's locks
    // The symbol as the caller names it (`&::sym`) is not trusted to be ours; see IsOurs.
    void* p = LookUp(RTLD_NEXT, spec.name, spec.version);
    if (p == nullptr || IsOurs(p)) {
      p = nullptr;
      if (void* h = dlopen(spec.library, RTLD_NOW | RTLD_NOLOAD); h != nullptr) {
        p = LookUp(h, spec.name, spec.version);
        // A NOLOAD handle only adds a reference to an already loaded library.
        dlclose(h);
      }
      if (p != nullptr && IsOurs(p)) p = nullptr;
    }
    if (p != nullptr) fn_.store(p, std::memory_order_release);
    return reinterpret_cast<Fn>(p);
  }

  std::atomic<void*> fn_{nullptr};
};

// Saves errno across the core so the caller sees exactly what the real call set.
class ErrnoKeeper {
 public:
  ErrnoKeeper() : saved_(errno) {}
  // Only if changed: after fork, a write would copy errno's page for nothing.
  ~ErrnoKeeper() {
    if (errno != saved_) errno = saved_;
  }
  int value() const { return saved_; }

 private:
  int saved_;
};

// errno's address, asked of libc once per thread: the same for the thread's life (and in a
// forked child, whose thread is a copy). The registration path's ErrnoKeeper, which then
// makes no call into libc.
__thread int* t_errno_at __attribute__((tls_model("initial-exec"))) = nullptr;
class CachedErrnoKeeper {
 public:
  CachedErrnoKeeper()
      : at_(t_errno_at != nullptr ? t_errno_at : (t_errno_at = &errno)), saved_(*at_) {}
  ~CachedErrnoKeeper() {
    if (*at_ != saved_) *at_ = saved_;
  }
  int value() const { return saved_; }

 private:
  int* at_;
  int saved_;
};

}  // namespace
}  // namespace forkguard

using forkguard::CachedErrnoKeeper;
using forkguard::ErrnoKeeper;
using forkguard::HookSpec;
using forkguard::Kind;
using forkguard::kLibc;
using forkguard::kRdmacm;
using forkguard::kVerbs;
using forkguard::Nesting;
using forkguard::RdmaCall;
using forkguard::RealFunction;
namespace hooks = forkguard::hooks;

#define FG_EXPORT extern "C" __attribute__((visibility("default")))
// One hook per symbol (namespace scope): spec_<sym>, what to resolve (its name, name_<sym>,
// with the start-up code: the constructor looks the libc ones up), and hook_<sym>, the
// resolved pointer. FG_HOOK_AS names the function type where <sym>'s own does not fit.
#define FG_HOOK_AS(type, sym, version, lib)                \
  const char name_##sym[] FORKGUARD_START_RODATA = #sym;   \
  constexpr HookSpec spec_##sym{name_##sym, version, lib}; \
  FORKGUARD_START_DATA constinit RealFunction<type> hook_##sym
#define FG_HOOK(sym, version, lib) FG_HOOK_AS(decltype(&::sym), sym, version, lib)
// `real`: the resolved next definition of sym.
#define FG_REAL(sym) auto real = hook_##sym.Get(spec_##sym)

namespace {
FG_HOOK(ibv_open_device, "IBVERBS_1.1", kVerbs);
FG_HOOK(ibv_close_device, "IBVERBS_1.1", kVerbs);
FG_HOOK(ibv_alloc_pd, "IBVERBS_1.1", kVerbs);
FG_HOOK(ibv_dealloc_pd, "IBVERBS_1.1", kVerbs);
FG_HOOK(ibv_reg_mr, "IBVERBS_1.1", kVerbs);
FG_HOOK(ibv_reg_mr_iova, "IBVERBS_1.7", kVerbs);
FG_HOOK(ibv_reg_mr_iova2, "IBVERBS_1.8", kVerbs);
FG_HOOK(ibv_reg_dmabuf_mr, "IBVERBS_1.12", kVerbs);
FG_HOOK(ibv_dereg_mr, "IBVERBS_1.1", kVerbs);
FG_HOOK(ibv_fork_init, "IBVERBS_1.1", kVerbs);
FG_HOOK(rdma_create_event_channel, "RDMACM_1.0", kRdmacm);
FG_HOOK(rdma_destroy_event_channel, "RDMACM_1.0", kRdmacm);
FG_HOOK(rdma_create_id, "RDMACM_1.0", kRdmacm);
FG_HOOK(rdma_destroy_id, "RDMACM_1.0", kRdmacm);
FG_HOOK(rdma_create_ep, "RDMACM_1.0", kRdmacm);
FG_HOOK(rdma_destroy_ep, "RDMACM_1.0", kRdmacm);
// libc: resolved eagerly by the constructor, so that a first fork()/exec*()/open*() from a
// signal handler or a forked child never runs dlsym (the loader's lock may be held there).
// posix_spawn/posix_spawnp are neither async-signal-safe nor made in a child: resolved at
// their first call, as the RDMA functions are, and a process that never spawns pays nothing.
FG_HOOK(fork, nullptr, kLibc);
FG_HOOK(_Fork, nullptr, kLibc);
FG_HOOK(daemon, nullptr, kLibc);
FG_HOOK(forkpty, nullptr, kLibc);
FG_HOOK(posix_spawn, nullptr, kLibc);
FG_HOOK(posix_spawnp, nullptr, kLibc);
FG_HOOK(execve, nullptr, kLibc);
FG_HOOK(execv, nullptr, kLibc);
FG_HOOK(execvp, nullptr, kLibc);
FG_HOOK(execvpe, nullptr, kLibc);
FG_HOOK(fexecve, nullptr, kLibc);
FG_HOOK_AS(pid_t (*)(), vfork, nullptr, kLibc);
using OpenFn = int (*)(const char*, int, ...);
using OpenatFn = int (*)(int, const char*, int, ...);
using Open2Fn = int (*)(const char*, int);
using Openat2Fn = int (*)(int, const char*, int);
FG_HOOK_AS(int (*)(void*, size_t, int), madvise, nullptr, kLibc);
FG_HOOK_AS(OpenFn, open, nullptr, kLibc);
FG_HOOK_AS(OpenFn, open64, nullptr, kLibc);
FG_HOOK_AS(OpenatFn, openat, nullptr, kLibc);
FG_HOOK_AS(OpenatFn, openat64, nullptr, kLibc);
FG_HOOK_AS(Open2Fn, __open_2, nullptr, kLibc);
FG_HOOK_AS(Open2Fn, __open64_2, nullptr, kLibc);
FG_HOOK_AS(Openat2Fn, __openat_2, nullptr, kLibc);
FG_HOOK_AS(Openat2Fn, __openat64_2, nullptr, kLibc);
}  // namespace

// ---- libibverbs ----

FG_EXPORT struct ibv_context* ibv_open_device(struct ibv_device* device) {
  FG_REAL(ibv_open_device);
  if (real == nullptr) {
    errno = ENOSYS;
    return nullptr;
  }
  Nesting n(Kind::kDevice);
  ibv_context* r = real(device);
  if (n.outermost()) {
    ErrnoKeeper e;
    hooks::OnOpenDevice(r, device != nullptr ? device->name : nullptr, e.value(),
                        __builtin_return_address(0));
  }
  return r;
}

FG_EXPORT int ibv_close_device(struct ibv_context* context) {
  FG_REAL(ibv_close_device);
  if (real == nullptr) return ENOSYS;
  Nesting n(Kind::kDevice);
  int r = real(context);
  if (n.outermost()) {
    ErrnoKeeper e;
    hooks::OnCloseDevice(context, r, e.value());
  }
  return r;
}

FG_EXPORT struct ibv_pd* ibv_alloc_pd(struct ibv_context* context) {
  FG_REAL(ibv_alloc_pd);
  if (real == nullptr) {
    errno = ENOSYS;
    return nullptr;
  }
  Nesting n(Kind::kPd);
  ibv_pd* r = real(context);
  if (n.outermost()) {
    ErrnoKeeper e;
    hooks::OnAllocPd(r, context, e.value(), __builtin_return_address(0));
  }
  return r;
}

FG_EXPORT int ibv_dealloc_pd(struct ibv_pd* pd) {
  FG_REAL(ibv_dealloc_pd);
  if (real == nullptr) return ENOSYS;
  Nesting n(Kind::kPd);
  int r = real(pd);
  if (n.outermost()) {
    ErrnoKeeper e;
    hooks::OnDeallocPd(pd, r, e.value());
  }
  return r;
}

namespace {

// What each ibv_reg_mr* wrapper does around `real(args...)`: a nested call (the library
// registering through another of them) tail-calls the real function; the outermost one makes
// two calls of its own, the real function and the core's (`addr`, `length`, `access`: what
// is registered). Always inlined, so that each wrapper keeps its section (the registration
// path, FORKGUARD_REG_PATH) and its tail call.
template <typename Real, typename... Args>
__attribute__((always_inline)) inline ibv_mr* RegMrVia(RdmaCall call, ibv_pd* pd, void* addr,
                                                       size_t length, int access, Real real,
                                                       Args... args) {
  if (real == nullptr) {
    errno = ENOSYS;
    return nullptr;
  }
  // The outermost call is the one to lay out straight (the library's nested ones are rare).
  if (__builtin_expect(Nesting::Inside(Kind::kMr), 0)) return real(args...);
  Nesting n(Kind::kMr);
  hooks::BeforeRegMr();
  ibv_mr* r = real(args...);
  CachedErrnoKeeper e;
  hooks::OnRegMr(call, r, pd, addr, length, access, e.value());
  return r;
}

}  // namespace

FG_EXPORT FORKGUARD_REG_PATH_FIRST struct ibv_mr* ibv_reg_mr(struct ibv_pd* pd, void* addr,
                                                             size_t length, int access) {
  FG_REAL(ibv_reg_mr);
  return RegMrVia(RdmaCall::kRegMr, pd, addr, length, access, real, pd, addr, length, access);
}

FG_EXPORT struct ibv_mr* ibv_reg_mr_iova(struct ibv_pd* pd, void* addr, size_t length,
                                         uint64_t iova, int access) {
  FG_REAL(ibv_reg_mr_iova);
  return RegMrVia(RdmaCall::kRegMrIova, pd, addr, length, access, real, pd, addr, length, iova,
                  access);
}

FG_EXPORT FORKGUARD_REG_PATH struct ibv_mr* ibv_reg_mr_iova2(struct ibv_pd* pd, void* addr,
                                                             size_t length, uint64_t iova,
                                                             unsigned int access) {
  FG_REAL(ibv_reg_mr_iova2);
  return RegMrVia(RdmaCall::kRegMrIova2, pd, addr, length, static_cast<int>(access), real, pd, addr,
                  length, iova, access);
}

// dma-buf memory is not in our address space: the range is the iova window.
FG_EXPORT struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd* pd, uint64_t offset, size_t length,
                                           uint64_t iova, int fd, int access) {
  FG_REAL(ibv_reg_dmabuf_mr);
  return RegMrVia(RdmaCall::kRegDmabufMr, pd, reinterpret_cast<void*>(iova), length, access, real,
                  pd, offset, length, iova, fd, access);
}

FG_EXPORT FORKGUARD_REG_PATH int ibv_dereg_mr(struct ibv_mr* mr) {
  FG_REAL(ibv_dereg_mr);
  if (real == nullptr) return ENOSYS;
  if (Nesting::Inside(Kind::kMr)) return real(mr);
  Nesting n(Kind::kMr);
  int r = real(mr);
  CachedErrnoKeeper e;
  hooks::OnDeregMr(mr, r, e.value());
  return r;
}

FG_EXPORT int ibv_fork_init(void) {
  FG_REAL(ibv_fork_init);
  if (real == nullptr) return ENOSYS;
  Nesting n(Kind::kOther);
  int r = real();
  if (n.outermost()) {
    ErrnoKeeper e;
    hooks::OnForkInit(r, e.value(), __builtin_return_address(0));
  }
  return r;
}

// ---- librdmacm ----

FG_EXPORT struct rdma_event_channel* rdma_create_event_channel(void) {
  FG_REAL(rdma_create_event_channel);
  if (real == nullptr) {
    errno = ENOSYS;
    return nullptr;
  }
  Nesting n(Kind::kCm);
  rdma_event_channel* r = real();
  if (n.outermost()) {
    ErrnoKeeper e;
    hooks::OnCmCreate(RdmaCall::kCreateEventChannel, r, e.value());
  }
  return r;
}

FG_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel* channel) {
  FG_REAL(rdma_destroy_event_channel);
  if (real == nullptr) return;
  Nesting n(Kind::kCm);
  real(channel);
  if (n.outermost()) {
    ErrnoKeeper e;
    hooks::OnCmDestroy("rdma_destroy_event_channel", channel, 0, 0);
  }
}

namespace {

// rdma_create_id and rdma_create_ep: `real(args...)`, then the id it made (in `*id`) to the
// core.
template <typename Real, typename... Args>
int CreateIdVia(RdmaCall call, rdma_cm_id** id, Real real, Args... args) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  Nesting n(Kind::kCm);
  int r = real(args...);
  if (n.outermost()) {
    ErrnoKeeper e;
    hooks::OnCmCreate(call, r == 0 && id != nullptr ? *id : nullptr, e.value());
  }
  return r;
}

}  // namespace

FG_EXPORT int rdma_create_id(struct rdma_event_channel* channel, struct rdma_cm_id** id,
                             void* context, enum rdma_port_space ps) {
  FG_REAL(rdma_create_id);
  return CreateIdVia(RdmaCall::kCreateId, id, real, channel, id, context, ps);
}

FG_EXPORT int rdma_destroy_id(struct rdma_cm_id* id) {
  FG_REAL(rdma_destroy_id);
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  Nesting n(Kind::kCm);
  int r = real(id);
  if (n.outermost()) {
    ErrnoKeeper e;
    hooks::OnCmDestroy("rdma_destroy_id", id, r, e.value());
  }
  return r;
}

FG_EXPORT int rdma_create_ep(struct rdma_cm_id** id, struct rdma_addrinfo* res, struct ibv_pd* pd,
                             struct ibv_qp_init_attr* qp_init_attr) {
  FG_REAL(rdma_create_ep);
  return CreateIdVia(RdmaCall::kCreateEp, id, real, id, res, pd, qp_init_attr);
}

FG_EXPORT void rdma_destroy_ep(struct rdma_cm_id* id) {
  FG_REAL(rdma_destroy_ep);
  if (real == nullptr) return;
  Nesting n(Kind::kCm);
  real(id);
  if (n.outermost()) {
    ErrnoKeeper e;
    hooks::OnCmDestroy("rdma_destroy_ep", id, 0, 0);
  }
}

// ---- process creation ----

// Every fork wrapper first asks whether the fork needs anything of ours (hooks/hooks.h
// ForkNeedsNothing: nothing watched, no log, nothing in progress): then it tail-calls the
// real function (a jmp: `objdump -d --disassemble=fork libforkguard.so`), so the child
// returns straight to the caller and runs no shim code - with our atfork handlers not yet
// registered (no RDMA call so far), a fork's child faults in no page of the shim.
namespace {

// What fork, _Fork and forkpty do around the real call `real(args...)`. `raw`: it runs no
// atfork handlers (_Fork), so the decision's child side is applied here (AfterRawForkChild)
// rather than by our atfork child handler. Always inlined: the wrapper keeps its section
// (FORKGUARD_CHILD_PATH, what the child returns through) and its tail call of the real
// function.
template <typename Real, typename... Args>
__attribute__((always_inline)) inline pid_t DecidedFork(forkguard::ForkVia via, bool raw, Real real,
                                                        Args... args) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  if (hooks::ForkNeedsNothing(via)) return real(args...);
  hooks::ForkDecision d = hooks::BeforeFork(via);
  if (d.fail) {
    errno = d.err;
    return -1;
  }
  pid_t pid = real(args...);
  if (pid != 0) {
    ErrnoKeeper e;
    hooks::AfterForkParent(d, pid);
  } else if (raw) {
    hooks::AfterRawForkChild(d);
  } else {
    hooks::AfterForkChild(d);  // writes nothing it need not, errno included
  }
  return pid;
}

}  // namespace

FG_EXPORT FORKGUARD_CHILD_PATH_FIRST pid_t fork(void) noexcept {
  FG_REAL(fork);
  return DecidedFork(forkguard::ForkVia::kFork, false, real);
}

// libc's other ways to fork without calling the program's fork() (glibc's fork, daemon and
// forkpty call its internal __fork/_Fork directly): decided like fork(), failed in error
// mode with an errno their man pages allow (hooks::BeforeFork, FailErrno).

// _Fork (glibc >= 2.34): fork without the atfork handlers.
FG_EXPORT FORKGUARD_CHILD_PATH pid_t _Fork(void) noexcept {
  FG_REAL(_Fork);
  return DecidedFork(forkguard::ForkVia::kUnderscoreFork, true, real);
}

// daemon: forks (atfork handlers run), the parent _exit(0)s inside the call, the child
// calls setsid and returns 0 here. Decided before the fork, so an error-mode failure happens
// while the caller is still the original process.
FG_EXPORT int daemon(int nochdir, int noclose) noexcept {
  FG_REAL(daemon);
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  if (hooks::ForkNeedsNothing(forkguard::ForkVia::kDaemon)) return real(nochdir, noclose);
  pid_t self = getpid();
  hooks::ForkDecision d = hooks::BeforeFork(forkguard::ForkVia::kDaemon);
  if (d.fail) {
    errno = d.err;
    return -1;
  }
  int r = real(nochdir, noclose);
  if (r == 0 || getpid() != self) {
    hooks::AfterForkChild(d);  // the daemon (or its failed setsid)
  } else {
    ErrnoKeeper e;
    hooks::AfterForkParent(d, -1);  // fork itself failed
  }
  return r;
}

// forkpty: openpty, then fork. Decided before openpty: a failed call opens no terminal.
FG_EXPORT int forkpty(int* amaster, char* name, const struct termios* termp,
                      const struct winsize* winp) noexcept {
  FG_REAL(forkpty);
  return DecidedFork(forkguard::ForkVia::kForkpty, false, real, amaster, name, termp, winp);
}

FG_EXPORT int posix_spawn(pid_t* pid, const char* path,
                          const posix_spawn_file_actions_t* file_actions,
                          const posix_spawnattr_t* attrp, char* const argv[], char* const envp[]) {
  FG_REAL(posix_spawn);
  if (real == nullptr) return ENOSYS;
  pid_t local = 0;
  int r = real(pid != nullptr ? pid : &local, path, file_actions, attrp, argv, envp);
  ErrnoKeeper e;
  hooks::OnSpawn("posix_spawn", pid != nullptr ? *pid : local, r);
  return r;
}

FG_EXPORT int posix_spawnp(pid_t* pid, const char* file,
                           const posix_spawn_file_actions_t* file_actions,
                           const posix_spawnattr_t* attrp, char* const argv[], char* const envp[]) {
  FG_REAL(posix_spawnp);
  if (real == nullptr) return ENOSYS;
  pid_t local = 0;
  int r = real(pid != nullptr ? pid : &local, file, file_actions, attrp, argv, envp);
  ErrnoKeeper e;
  hooks::OnSpawn("posix_spawnp", pid != nullptr ? *pid : local, r);
  return r;
}

extern "C" __attribute__((visibility("hidden"))) void* forkguard_dlopen_unavailable(const char*,
                                                                                    int) {
  return nullptr;
}

// vfork cannot be wrapped by a C function: the child would return through our frame and
// then the parent would resume on a clobbered stack. The exported vfork is assembly that
// calls the (ordinary) prologue, then tail-jumps to the real vfork with the caller's frame.
extern "C" __attribute__((visibility("hidden"))) void* forkguard_vfork_prologue() {
  auto real = hook_vfork.Get(spec_vfork);
  {
    ErrnoKeeper e;
    hooks::OnVfork();
  }
  // Without the real vfork, fork is the closest behaviour-preserving fallback.
  return real != nullptr ? reinterpret_cast<void*>(real) : dlsym(RTLD_NEXT, "fork");
}

asm(R"(
  .text
  .globl vfork
  .type vfork, @function
vfork:
  .cfi_startproc
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  call forkguard_vfork_prologue
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  jmp *%rax
  .cfi_endproc
  .size vfork, .-vfork
)");

// dlopen: glibc searches the *caller's* DT_RUNPATH/$ORIGIN and picks its namespace from the
// return address, so a C wrapper calling the real dlopen would change which library gets
// loaded. Like vfork, the exported dlopen is assembly: it notes the flags (RTLD_DEEPBIND
// defeats interposition; said once, later, outside the loader) and tail-jumps to the real
// dlopen with the caller's return address still on the stack.
extern "C" __attribute__((visibility("hidden"))) void* forkguard_dlopen_prologue(const char* file,
                                                                                 int flags) {
  static constexpr HookSpec kSpec{"dlopen", nullptr, kLibc};
  static constinit RealFunction<void* (*)(const char*, int)> hook;
  {
    ErrnoKeeper e;
    forkguard::NoteDlopenFlags(file, flags);
    if ((flags & RTLD_DEEPBIND) != 0) hooks::OnDeepBind();
  }
  auto real = hook.Get(kSpec);
  // Without the real dlopen there is nothing sensible to jump to: fail like dlopen does.
  return real != nullptr ? reinterpret_cast<void*>(real)
                         : reinterpret_cast<void*>(&forkguard_dlopen_unavailable);
}

asm(R"(
  .text
  .globl dlopen
  .type dlopen, @function
dlopen:
  .cfi_startproc
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  call forkguard_dlopen_prologue
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  jmp *%rax
  .cfi_endproc
  .size dlopen, .-dlopen
)");

// ---- open*: an RDMA device node opened arms the descriptor backstop (hooks::OnOpened) ----
// The mode argument is read only when the flags say it is there, and forwarded unchanged.
namespace {

mode_t ModeArg(int flags, va_list ap) {
  return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE
             ? static_cast<mode_t>(va_arg(ap, int))
             : 0;
}

int Opened(const char* path, int fd) {
  if (fd >= 0) {
    ErrnoKeeper e;
    hooks::OnOpened(path, fd);
  }
  return fd;
}

// The real open* `real(args...)` (ENOSYS without it), then Opened.
template <typename Fn, typename... Args>
int OpenVia(Fn real, const char* path, Args... args) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return Opened(path, real(args...));
}

}  // namespace

// ---- madvise: how mr_register knows `dontfork` without reading /proc/self/smaps ----

// Forwarded unchanged. Inside a watched RDMA call on this thread, a successful
// MADV_DONTFORK (the library marking the range it registers) is noted; elsewhere the cost
// is one TLS read.
// MADV_DONTFORK/MADV_DOFORK (rdma-core's ibv_dontfork_range/ibv_dofork_range) wait while
// another thread's fork is being fixed (FORKGUARD_MODE=fix, shim/fix/fork_fix.h), and change the
// dc view's cache key.
FG_EXPORT int madvise(void* addr, size_t len, int advice) noexcept {
  auto real = hook_madvise.Get(spec_madvise);
  bool fork_advice = advice == MADV_DONTFORK || advice == MADV_DOFORK;
  if (fork_advice) forkguard::WaitOutFixWindow();
  int r = real != nullptr ? real(addr, len, advice)
                          : static_cast<int>(syscall(SYS_madvise, addr, len, advice));
  if (r == 0 && fork_advice) {
    forkguard::NoteForkAdvice();
    if (advice == MADV_DONTFORK && forkguard::t_rdma_depth > 0) {
      ErrnoKeeper e;
      hooks::OnDontfork(addr, len);
    }
  }
  return r;
}

FG_EXPORT int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return OpenVia(hook_open.Get(spec_open), path, path, flags, mode);
}

FG_EXPORT int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return OpenVia(hook_open64.Get(spec_open64), path, path, flags, mode);
}

FG_EXPORT int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return OpenVia(hook_openat.Get(spec_openat), path, dirfd, path, flags, mode);
}

FG_EXPORT int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return OpenVia(hook_openat64.Get(spec_openat64), path, dirfd, path, flags, mode);
}

// _FORTIFY_SOURCE callers.
extern "C" int __open_2(const char*, int);
extern "C" int __open64_2(const char*, int);
extern "C" int __openat_2(int, const char*, int);
extern "C" int __openat64_2(int, const char*, int);

FG_EXPORT int __open_2(const char* path, int flags) {
  return OpenVia(hook___open_2.Get(spec___open_2), path, path, flags);
}

FG_EXPORT int __open64_2(const char* path, int flags) {
  return OpenVia(hook___open64_2.Get(spec___open64_2), path, path, flags);
}

FG_EXPORT int __openat_2(int dirfd, const char* path, int flags) {
  return OpenVia(hook___openat_2.Get(spec___openat_2), path, dirfd, path, flags);
}

FG_EXPORT int __openat64_2(int dirfd, const char* path, int flags) {
  return OpenVia(hook___openat64_2.Get(spec___openat64_2), path, dirfd, path, flags);
}

// ---- exec: a hazardous child that execs is benign ----
namespace {

// The real exec* `real(args...)` (ENOSYS without it), after the core has seen `path`
// (`search`: looked up in PATH; `envp` null: this environment).
template <typename Fn, typename... Args>
int ExecVia(Fn real, const char* path, char* const envp[], bool search, Args... args) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  hooks::OnExec(path);
  hooks::OnExecTarget(path, envp, search);
  return real(args...);
}

}  // namespace

FG_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  FG_REAL(execve);
  return ExecVia(real, path, envp, false, path, argv, envp);
}

FG_EXPORT int execv(const char* path, char* const argv[]) noexcept {
  FG_REAL(execv);
  return ExecVia(real, path, nullptr, false, path, argv);
}

FG_EXPORT int execvp(const char* file, char* const argv[]) noexcept {
  FG_REAL(execvp);
  return ExecVia(real, file, nullptr, true, file, argv);
}

FG_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  FG_REAL(execvpe);
  return ExecVia(real, file, envp, true, file, argv, envp);
}

FG_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) noexcept {
  FG_REAL(fexecve);
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  hooks::OnExec("(fexecve)");
  return real(fd, argv, envp);
}

// execl*: glibc's own execl calls its internal execve directly, so they are wrapped too.
// Arguments are collected on the stack (no malloc: this runs in a forked child).
namespace {

constexpr int kMaxExeclArgs = 4096;

// Collects `arg0, ...` up to the terminating NULL into argv (and, for execle, the envp
// that follows it), then calls exec(argv, envp). Too many arguments: E2BIG, nothing called.
template <typename Exec>
int ForwardExecl(const char* arg0, va_list ap, bool has_envp, Exec exec) {
  const char* argv[kMaxExeclArgs];
  int n = 0;
  argv[n++] = arg0;
  for (const char* a = arg0; a != nullptr;) {
    if (n >= kMaxExeclArgs) {
      errno = E2BIG;
      return -1;
    }
    a = va_arg(ap, const char*);
    argv[n++] = a;
  }
  char* const* envp = has_envp ? va_arg(ap, char* const*) : nullptr;
  return exec(const_cast<char* const*>(argv), envp);
}

}  // namespace

FG_EXPORT int execl(const char* path, const char* arg, ...) noexcept {
  va_list ap;
  va_start(ap, arg);
  int rc = ForwardExecl(arg, ap, false,
                        [path](char* const* argv, char* const*) { return execv(path, argv); });
  va_end(ap);
  return rc;
}

FG_EXPORT int execlp(const char* file, const char* arg, ...) noexcept {
  va_list ap;
  va_start(ap, arg);
  int rc = ForwardExecl(arg, ap, false,
                        [file](char* const* argv, char* const*) { return execvp(file, argv); });
  va_end(ap);
  return rc;
}

FG_EXPORT int execle(const char* path, const char* arg, ...) noexcept {
  va_list ap;
  va_start(ap, arg);
  int rc = ForwardExecl(arg, ap, true, [path](char* const* argv, char* const* envp) {
    return execve(path, argv, envp);
  });
  va_end(ap);
  return rc;
}

// ---- lifetime ----

__attribute__((constructor)) FORKGUARD_START_PATH static void ForkguardConstructor() {
  hooks::EnsureInit();
  forkguard::NextSymbols next(reinterpret_cast<const void*>(&ForkguardConstructor));
  hook_fork.Prime(spec_fork, next);
  hook__Fork.Prime(spec__Fork, next);
  hook_daemon.Prime(spec_daemon, next);
  hook_forkpty.Prime(spec_forkpty, next);
  hook_vfork.Prime(spec_vfork, next);
  hook_execve.Prime(spec_execve, next);
  hook_execv.Prime(spec_execv, next);
  hook_execvp.Prime(spec_execvp, next);
  hook_execvpe.Prime(spec_execvpe, next);
  hook_fexecve.Prime(spec_fexecve, next);
  hook_madvise.Prime(spec_madvise, next);
  hook_open.Prime(spec_open, next);
  hook_open64.Prime(spec_open64, next);
  hook_openat.Prime(spec_openat, next);
  hook_openat64.Prime(spec_openat64, next);
  hook___open_2.Prime(spec___open_2, next);
  hook___open64_2.Prime(spec___open64_2, next);
  hook___openat_2.Prime(spec___openat_2, next);
  hook___openat64_2.Prime(spec___openat64_2, next);
}

__attribute__((destructor)) FORKGUARD_START_PATH static void ForkguardDestructor() {
  hooks::OnExit();
}
