#include "shim/stack/stack.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// Types only: the functions are looked up in the dlopen'ed libunwind.so.8.
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "shim/base/child_path.h"
#include "shim/base/skippable_lock.h"
#include "shim/base/start_path.h"
#include "shim/base/sys.h"

// libstdc++'s demangler with a callback: formats on the stack, never calls malloc (the
// message may be formatted in a fork from a signal handler that interrupted malloc). Only
// the static libstdc++.a has it: libforkguard.so pulls it in (-Wl,--undefined); elsewhere
// (unit tests) the weak reference is null and names stay mangled.
extern "C" int __gcclibcxx_demangle_callback(const char*, void (*)(const char*, size_t, void*),
                                             void*) __attribute__((weak));

namespace forkguard {
namespace {

void AppendDemangled(const char* piece, size_t n, void* ctx) {
  static_cast<TextBuffer*>(ctx)->Mem(piece, n);
}

// Appends the demangled name of a C++ symbol, or the symbol itself.
void AppendSymbol(TextBuffer& out, const char* sym, bool demangle) {
  if (demangle && sym[0] == '_' && sym[1] == 'Z' && __gcclibcxx_demangle_callback != nullptr) {
    char buf[1024];
    TextBuffer tmp(buf, sizeof(buf));
    if (__gcclibcxx_demangle_callback(sym, AppendDemangled, &tmp) == 0 && !tmp.truncated() &&
        tmp.size() > 0) {
      out.Str(tmp.data());
      return;
    }
  }
  out.Str(sym);
}

}  // namespace

bool DemangleSymbol(const char* sym, char* buf, size_t cap) {
  TextBuffer out(buf, cap);
  if (sym == nullptr || sym[0] != '_' || sym[1] != 'Z' ||
      __gcclibcxx_demangle_callback == nullptr) {
    return false;
  }
  if (__gcclibcxx_demangle_callback(sym, AppendDemangled, &out) != 0 || out.truncated()) {
    out.Clear();
    return false;
  }
  return out.size() > 0;
}

namespace {

struct CodeRange {
  uintptr_t lo = 0;
  uintptr_t hi = 0;
};
constexpr int kMaxRanges = 8;
FORKGUARD_START_DATA CodeRange g_own[kMaxRanges];
FORKGUARD_START_DATA std::atomic<int> g_own_count{0};

FORKGUARD_START_PATH int CollectOwnRanges(struct dl_phdr_info* info, size_t, void* data) {
  auto self = reinterpret_cast<uintptr_t>(data);
  int n = 0;
  CodeRange ranges[kMaxRanges];
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    uintptr_t hi = lo + ph.p_memsz;
    if (self >= lo && self < hi) mine = true;
    if ((ph.p_flags & PF_X) != 0 && n < kMaxRanges) ranges[n++] = {lo, hi};
  }
  if (!mine) return 0;
  for (int i = 0; i < n; ++i) g_own[i] = ranges[i];
  g_own_count.store(n, std::memory_order_release);
  return 1;
}

// unw_backtrace from the nongnu libunwind, loaded RTLD_LOCAL: linked normally, its
// exported _Unwind_* would take over C++ exception unwinding in every preloaded process
// (and Debian's libunwind.a is not PIC).
using UnwBacktraceFn = int (*)(void**, int);
std::atomic<UnwBacktraceFn> g_unw_backtrace{nullptr};
std::atomic<bool> g_unw_tried{false};

// The unw_step API: the call-site cache's walk (below), and TSan builds' capture.
using UnwGetContextFn = int (*)(unw_context_t*);
using UnwInitLocalFn = int (*)(unw_cursor_t*, unw_context_t*);
using UnwStepFn = int (*)(unw_cursor_t*);
using UnwGetRegFn = int (*)(unw_cursor_t*, unw_regnum_t, unw_word_t*);
using UnwGetSaveLocFn = int (*)(unw_cursor_t*, int, unw_save_loc_t*);
std::atomic<UnwGetContextFn> g_unw_getcontext{nullptr};
std::atomic<UnwInitLocalFn> g_unw_init_local{nullptr};
std::atomic<UnwStepFn> g_unw_step{nullptr};
std::atomic<UnwGetRegFn> g_unw_get_reg{nullptr};
std::atomic<UnwGetSaveLocFn> g_unw_get_save_loc{nullptr};

#ifdef FORKGUARD_TSAN
// TSan builds: unw_backtrace's fast path keeps a per-thread trace cache whose pthread key
// destructor runs after TSan finished the thread (its mutex lands in TSan's interceptor:
// SIGSEGV at thread exit). UNW_CACHE_NONE does not avoid it (libunwind 1.6 creates the key
// anyway); the unw_step loop uses no per-thread state, so TSan builds walk with it.

// Same contract as unw_backtrace: return addresses, starting with our caller's frame.
__attribute__((noinline)) int StepBacktrace(void** ips, int want) {
  UnwGetContextFn get_context = g_unw_getcontext.load(std::memory_order_acquire);
  UnwInitLocalFn init_local = g_unw_init_local.load(std::memory_order_acquire);
  UnwStepFn step = g_unw_step.load(std::memory_order_acquire);
  UnwGetRegFn get_reg = g_unw_get_reg.load(std::memory_order_acquire);
  if (get_context == nullptr || init_local == nullptr || step == nullptr || get_reg == nullptr) {
    return 0;
  }
  unw_context_t uc;
  unw_cursor_t cursor;
  if (get_context(&uc) != 0 || init_local(&cursor, &uc) != 0) return 0;
  int n = 0;
  while (n < want && step(&cursor) > 0) {
    unw_word_t ip = 0;
    if (get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
    ips[n++] = reinterpret_cast<void*>(ip);
  }
  return n;
}

int UnwBacktraceNoCache(void** ips, int want) { return StepBacktrace(ips, want); }
#endif

}  // namespace

void LoadUnwinder() {
  if (g_unw_tried.load(std::memory_order_acquire)) return;
  if (g_unw_tried.exchange(true)) return;
  void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return;
  g_unw_getcontext.store(reinterpret_cast<UnwGetContextFn>(dlsym(h, "_Ux86_64_getcontext")));
  g_unw_init_local.store(reinterpret_cast<UnwInitLocalFn>(dlsym(h, "_ULx86_64_init_local")));
  g_unw_step.store(reinterpret_cast<UnwStepFn>(dlsym(h, "_ULx86_64_step")));
  g_unw_get_reg.store(reinterpret_cast<UnwGetRegFn>(dlsym(h, "_ULx86_64_get_reg")));
  g_unw_get_save_loc.store(reinterpret_cast<UnwGetSaveLocFn>(dlsym(h, "_ULx86_64_get_save_loc")));
#ifdef FORKGUARD_TSAN
  // One walk before publishing: libunwind initializes its globals (signal mask, caches) on
  // first use without synchronization TSan can see; every later walker acquires `fn` below.
  void* warm[4];
  UnwBacktraceFn fn = StepBacktrace(warm, 4) > 0 ? &UnwBacktraceNoCache : nullptr;
#else
  auto fn = reinterpret_cast<UnwBacktraceFn>(dlsym(h, "unw_backtrace"));
#endif
  g_unw_backtrace.store(fn, std::memory_order_release);
}

FORKGUARD_START_PATH void InitOwnCodeRange() {
  if (g_own_count.load(std::memory_order_acquire) > 0) return;
  dl_iterate_phdr(CollectOwnRanges, reinterpret_cast<void*>(&InitOwnCodeRange));
}

FORKGUARD_START_PATH bool IsOwnCode(uintptr_t ip) {
  int n = g_own_count.load(std::memory_order_acquire);
  if (n == 1) return ip >= g_own[0].lo && ip < g_own[0].hi;  // the usual single segment
  for (int i = 0; i < n; ++i) {
    if (ip >= g_own[i].lo && ip < g_own[i].hi) return true;
  }
  return false;
}

void CaptureStack(RawStack* out, int max_depth) {
  if (max_depth > RawStack::kCapacity) max_depth = RawStack::kCapacity;
  if (max_depth < 1) max_depth = 1;
  // Room for the shim's own frames, which are dropped below.
  void* ips[RawStack::kCapacity + 16];
  UnwBacktraceFn unw = g_unw_backtrace.load(std::memory_order_acquire);
  // Only as deep as asked (plus the shim's own frames, at most 5 between a wrapper and
  // here, and a signal trampoline): unwinding costs per frame.
  int want = max_depth + 8;
  int n = unw != nullptr ? unw(ips, want) : 0;
  int first = 0;
  while (first < n && IsOwnCode(reinterpret_cast<uintptr_t>(ips[first]))) ++first;
  int depth = 0;
  for (int i = first; i < n && depth < max_depth; ++i) {
    out->ips[depth++] = reinterpret_cast<uintptr_t>(ips[i]);
  }
  out->depth = depth < 0 ? 0 : depth;
}

namespace {

// ---- CaptureRepeatedStack: a cache per call site, validated on the live stack ----
//
// The frame that called the intercepted function is found by walking the shim's own
// frames through their frame pointers (every shim function keeps one: FORKGUARD_COPTS);
// beyond them the program's and its libraries' frames are walked by libunwind only the
// first time a call site is seen. That walk records, for each frame, how its caller's frame
// is found - the rule libunwind's own trace cache keeps per instruction: CFA = SP + N
// (fixed by the unwind info at that address) or CFA = RBP + 16 (a frame-pointer frame),
// return address at CFA - 8, and where the frame saved the caller's RBP. A later call from
// the same return address applies those rules to the live stack and must find, frame by
// frame, the same return addresses at the same stack offsets (the CFA of a frame-pointer
// frame is checked against the recorded layout before anything at it is read): the stack
// is then the one libunwind would return, for a few loads per frame instead of a walk.
// Anything else (another caller deeper down, a frame of another size, a signal frame,
// unwind info of another shape) falls back to libunwind.

constexpr int kSiteFrames = 16;  // user frames per entry (registration asks for 12)
constexpr int kNoRbpSave = INT32_MIN;

struct SiteRule {    // from frame k to its caller, frame k + 1
  int32_t cfa_rel;   // CFA of frame k - SP at the intercepted call (the stack layout)
  int32_t cfa_size;  // CFA - SP of frame k, or 0: CFA = RBP + 16
  int32_t rbp_off;   // frame k saved its caller's RBP at CFA + rbp_off, or kNoRbpSave
};

struct SiteEntry {
  uintptr_t ips[kSiteFrames];  // ips[0]: the return address of the intercepted call
  SiteRule rules[kSiteFrames - 1];
  int8_t depth;  // 0: empty; -1: this call site's stack cannot be cached
  int8_t want;   // the max_depth it was captured for
};

constexpr int kSiteSets = 64;
constexpr int kSiteWays = 4;
// Walks per set: a call site whose stack keeps changing (recursion of varying depth,
// alloca) stops being walked into the cache and costs an unw_backtrace, as before.
constexpr int kSiteMaxFills = 32;

struct SiteCache {
  SiteEntry entries[kSiteSets][kSiteWays];
  uint8_t victim[kSiteSets];
  uint8_t fills[kSiteSets];
};
SiteCache* g_sites = nullptr;  // mmap'd on first use, under g_sites_lock
SkippableLock g_sites_lock;

int SiteSet(uintptr_t ip) {
  return static_cast<int>((ip * 0x9e3779b97f4a7c15ULL) >> 58) & (kSiteSets - 1);
}

// The intercepted call as the program made it: its return address, the stack pointer and
// RBP just after it returns.
struct UserCall {
  uintptr_t ip;
  uintptr_t sp;
  uintptr_t rbp;
};

// Only our own frames, from `fp` (a frame of ours) up: each keeps RBP as frame pointer, so
// [rbp] is the caller's RBP and [rbp + 8] the return address. Bounded, and any frame chain
// that does not go up the stack by a sane step is refused.
__attribute__((always_inline, no_sanitize_address)) inline bool FindUserCall(const void* frame,
                                                                             UserCall* uc) {
  const auto* fp = static_cast<const uintptr_t*>(frame);
  // IsOwnCode's single-segment case, inlined (it cannot be across no_sanitize_address).
  const int own = g_own_count.load(std::memory_order_acquire);
  if (own != 1) return false;
  const uintptr_t lo = g_own[0].lo;
  const uintptr_t hi = g_own[0].hi;
  for (int i = 0; i < 8; ++i) {
    uintptr_t ret = fp[1];
    if (ret < lo || ret >= hi) {
      uc->ip = ret;
      uc->sp = reinterpret_cast<uintptr_t>(fp + 2);
      uc->rbp = fp[0];
      return ret != 0;
    }
    const auto* next = reinterpret_cast<const uintptr_t*>(fp[0]);
    if (next <= fp || next - fp > 8192 || (reinterpret_cast<uintptr_t>(next) & 7) != 0) {
      return false;
    }
    fp = next;
  }
  return false;
}

// The live stack has the recorded frames (see above). Reads only at the recorded offsets
// above uc.sp, and each only once the frames below it matched.
__attribute__((no_sanitize_address)) bool SiteMatches(const SiteEntry& e, const UserCall& uc) {
  uintptr_t rbp = uc.rbp;
  for (int k = 0; k + 1 < e.depth; ++k) {
    const SiteRule& r = e.rules[k];
    // CFA = SP + N: where the unwind info says, given the frames below matched. A
    // frame-pointer frame's CFA comes from RBP and must be where it was.
    uintptr_t cfa = uc.sp + static_cast<uintptr_t>(r.cfa_rel);
    if (r.cfa_size == 0 && cfa != rbp + 16) return false;
    if (*reinterpret_cast<const uintptr_t*>(cfa - 8) != e.ips[k + 1]) return false;
    if (r.rbp_off != kNoRbpSave) {
      rbp = *reinterpret_cast<const uintptr_t*>(cfa + static_cast<intptr_t>(r.rbp_off));
    }
  }
  return true;
}

// libunwind's unw_step walk from here up to `want` frames above the intercepted call:
// fills *out (the stack, always, when it returns true) and *e with the frames' rules;
// e->depth is -1 when the stack is fine but cannot be checked by rules (see above).
bool WalkSite(const UserCall& uc, int want, SiteEntry* e, RawStack* out) {
  if (g_unw_backtrace.load(std::memory_order_acquire) == nullptr) return false;
  UnwGetContextFn get_context = g_unw_getcontext.load(std::memory_order_relaxed);
  UnwInitLocalFn init_local = g_unw_init_local.load(std::memory_order_relaxed);
  UnwStepFn step = g_unw_step.load(std::memory_order_relaxed);
  UnwGetRegFn get_reg = g_unw_get_reg.load(std::memory_order_relaxed);
  UnwGetSaveLocFn get_save_loc = g_unw_get_save_loc.load(std::memory_order_relaxed);
  if (get_context == nullptr || init_local == nullptr || step == nullptr || get_reg == nullptr ||
      get_save_loc == nullptr) {
    return false;
  }
  unw_context_t ctx;
  unw_cursor_t c;
  if (get_context(&ctx) != 0 || init_local(&c, &ctx) != 0) return false;
  auto reg = [&](int r) {
    unw_word_t v = 0;
    return get_reg(&c, r, &v) == 0 ? static_cast<uintptr_t>(v) : uintptr_t{0};
  };
  // Up through our own frames to the intercepted call.
  uintptr_t ip = 0;
  for (int i = 0;; ++i) {
    if (i == 16 || step(&c) <= 0) return false;
    ip = reg(UNW_REG_IP);
    if (ip == uc.ip) break;
    if (!IsOwnCode(ip)) return false;
  }
  uintptr_t sp = reg(UNW_REG_SP);
  uintptr_t rbp = reg(UNW_X86_64_RBP);
  bool rules_ok = sp == uc.sp && rbp == uc.rbp;
  int d = 0;
  e->ips[d++] = ip;
  while (d < want && step(&c) > 0) {
    uintptr_t next_ip = reg(UNW_REG_IP);
    if (next_ip == 0) break;
    uintptr_t cfa = reg(UNW_REG_SP);
    uintptr_t next_rbp = reg(UNW_X86_64_RBP);
    unw_save_loc_t rip_at{};
    unw_save_loc_t rbp_at{};
    get_save_loc(&c, UNW_REG_IP, &rip_at);
    get_save_loc(&c, UNW_X86_64_RBP, &rbp_at);
    SiteRule& r = e->rules[d - 1];
    r.cfa_rel = static_cast<int32_t>(cfa - uc.sp);
    r.cfa_size = cfa == rbp + 16 ? 0 : static_cast<int32_t>(cfa - sp);
    bool rbp_saved = rbp_at.type == UNW_SLT_MEMORY && rbp_at.u.addr >= sp && rbp_at.u.addr < cfa;
    r.rbp_off =
        rbp_saved ? static_cast<int32_t>(static_cast<intptr_t>(rbp_at.u.addr - cfa)) : kNoRbpSave;
    // The shapes the rules describe, and nothing else.
    if (cfa <= sp || cfa - sp > (1u << 20) || cfa - uc.sp > (1u << 30) ||
        rip_at.type != UNW_SLT_MEMORY || rip_at.u.addr != cfa - 8 || IsSignalTrampoline(ip) ||
        IsSignalTrampoline(next_ip) || (!rbp_saved && next_rbp != rbp) ||
        // RBP used as a frame pointer in a frame whose CFA is elsewhere (stack realignment)
        (r.cfa_size != 0 && rbp_saved && rbp_at.u.addr == rbp)) {
      rules_ok = false;
    }
    e->ips[d++] = next_ip;
    ip = next_ip;
    sp = cfa;
    rbp = next_rbp;
  }
  for (int i = 0; i < d; ++i) out->ips[i] = e->ips[i];
  out->depth = d;
  e->depth = static_cast<int8_t>(rules_ok ? d : -1);
  e->want = static_cast<int8_t>(want);
  return true;
}

}  // namespace

namespace {

// A call site not in the cache (or the cache busy): walk it and keep what the walk learned.
__attribute__((noinline)) void CaptureMissedSite(const UserCall& uc, int max_depth, RawStack* out) {
  if (!g_sites_lock.TryLock()) return CaptureStack(out, max_depth);
  if (g_sites == nullptr) {
    void* p = mmap(nullptr, sizeof(SiteCache), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p != MAP_FAILED) g_sites = static_cast<SiteCache*>(p);
  }
  SiteCache* sites = g_sites;
  bool walk = sites != nullptr;
  int set = SiteSet(uc.ip);
  if (walk) {
    for (const SiteEntry& e : sites->entries[set]) {
      if (e.ips[0] == uc.ip && e.want == max_depth && e.depth < 0) walk = false;  // known bad
    }
    if (sites->fills[set] >= kSiteMaxFills) walk = false;
  }
  g_sites_lock.Unlock();
  SiteEntry fresh;
  if (!walk || !WalkSite(uc, max_depth, &fresh, out)) return CaptureStack(out, max_depth);
  if (!g_sites_lock.TryLock()) return;
  int w = sites->victim[set];
  sites->victim[set] = static_cast<uint8_t>((w + 1) % kSiteWays);
  ++sites->fills[set];
  memcpy(static_cast<void*>(&sites->entries[set][w]), &fresh, sizeof(fresh));
  g_sites_lock.Unlock();
}

}  // namespace

// Reads our own frames and the stack above them (SiteMatches).
FORKGUARD_REG_PATH __attribute__((no_sanitize_address)) void CaptureRepeatedStack(RawStack* out,
                                                                                  int max_depth) {
  if (max_depth < 1) max_depth = 1;
  UserCall uc;
  if (max_depth > kSiteFrames || !FindUserCall(__builtin_frame_address(0), &uc)) {
    return CaptureStack(out, max_depth);
  }
  if (g_sites_lock.TryLock()) {
    if (g_sites != nullptr) {
      for (const SiteEntry& e : g_sites->entries[SiteSet(uc.ip)]) {
        if (e.ips[0] != uc.ip || e.want != max_depth || e.depth <= 0 || !SiteMatches(e, uc)) {
          continue;
        }
        // All of the entry's frames, a constant size: inline moves, not a loop.
        static_assert(kSiteFrames <= RawStack::kCapacity);
        memcpy(out->ips, e.ips, sizeof(e.ips));
        out->depth = e.depth;
        g_sites_lock.Unlock();
        return;
      }
    }
    g_sites_lock.Unlock();
  }
  CaptureMissedSite(uc, max_depth, out);
}

namespace {

// dladdr searches symbol tables linearly: results are cached by address. The strings point
// into the loader's data, valid while the object stays loaded, so the cache is dropped
// whenever objects were loaded or unloaded (dl_iterate_phdr's adds/subs counters).
struct CachedFrame {
  uintptr_t lookup;
  SymbolizedFrame frame;
};
constexpr size_t kCacheSlots = 4096;
CachedFrame* g_cache = nullptr;
unsigned long long g_cache_adds = 0;
unsigned long long g_cache_subs = 0;
SkippableLock g_cache_lock;

int ReadLoadCounters(struct dl_phdr_info* info, size_t size, void* data) {
  auto* out = static_cast<unsigned long long*>(data);
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    out[0] = info->dlpi_adds;
    out[1] = info->dlpi_subs;
  }
  return 1;  // the counters are global: the first object is enough
}

// Load base of the main executable (dladdr's dli_fbase for it); 0 when unknown.
uintptr_t MainExecutableBase() {
  static uintptr_t base = [] {
    Dl_info info;
    void* phdr = reinterpret_cast<void*>(getauxval(AT_PHDR));
    return phdr != nullptr && dladdr(phdr, &info) != 0 ? reinterpret_cast<uintptr_t>(info.dli_fbase)
                                                       : uintptr_t{0};
  }();
  return base;
}

// Absolute path of the main executable ("" if /proc is unavailable).
const char* MainExecutablePath() {
  static char path[4096];
  static bool done = [] {
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
    path[n > 0 ? n : 0] = '\0';
    return true;
  }();
  (void)done;
  return path;
}

// Full symbol tables (.symtab) of loaded objects, for the functions dladdr cannot name:
// static functions and every function of an executable linked without -rdynamic, i.e. the
// user's own code in most trainers. Each file is mapped read-only once and never unmapped
// (names point into it); only the section headers and the symbol table pages are touched.
struct ElfSymbols {
  const char* path = nullptr;  // the loader's string for the object (stable)
  const ElfW(Sym) * syms = nullptr;
  size_t count = 0;
  const char* names = nullptr;
  size_t names_size = 0;
  uintptr_t first_load = 0;  // page-aligned vaddr of the first PT_LOAD (dli_fbase maps it)
};
constexpr int kMaxElfObjects = 64;
ElfSymbols g_elf[kMaxElfObjects];
int g_elf_count = 0;
SkippableLock g_elf_lock;

void LoadElfSymbols(const char* path, ElfSymbols* out) {
  out->path = path;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  void* map = MAP_FAILED;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= (off_t)sizeof(ElfW(Ehdr))) {
    map = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  }
  close(fd);
  if (map == MAP_FAILED) return;
  const size_t size = st.st_size;
  const char* base = static_cast<const char*>(map);
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
  auto fits = [size](uint64_t off, uint64_t len) { return off <= size && len <= size - off; };
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shentsize != sizeof(ElfW(Shdr)) || eh->e_phentsize != sizeof(ElfW(Phdr)) ||
      !fits(eh->e_shoff, uint64_t{eh->e_shnum} * sizeof(ElfW(Shdr))) ||
      !fits(eh->e_phoff, uint64_t{eh->e_phnum} * sizeof(ElfW(Phdr)))) {
    munmap(map, size);
    return;
  }
  const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(base + eh->e_phoff);
  uintptr_t first_load = UINTPTR_MAX;
  for (int i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < first_load) {
      first_load = ph[i].p_vaddr & ~(PageSize() - 1);
    }
  }
  const auto* sh = reinterpret_cast<const ElfW(Shdr)*>(base + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
    const ElfW(Shdr)& strs = sh[sh[i].sh_link];
    if (!fits(sh[i].sh_offset, sh[i].sh_size) || !fits(strs.sh_offset, strs.sh_size)) break;
    out->syms = reinterpret_cast<const ElfW(Sym)*>(base + sh[i].sh_offset);
    out->count = sh[i].sh_size / sizeof(ElfW(Sym));
    out->names = base + strs.sh_offset;
    out->names_size = strs.sh_size;
    out->first_load = first_load == UINTPTR_MAX ? 0 : first_load;
    return;
  }
  munmap(map, size);  // stripped: nothing to keep
}

// Names the function containing `lookup` from the object's .symtab; false if unknown.
bool SymtabLookup(const char* path, uintptr_t fbase, uintptr_t lookup, uintptr_t ip,
                  SymbolizedFrame* f) {
  if (path == nullptr || path[0] != '/' || !g_elf_lock.TryLock()) return false;
  ElfSymbols* e = nullptr;
  for (int i = 0; i < g_elf_count && e == nullptr; ++i) {
    if (g_elf[i].path == path || strcmp(g_elf[i].path, path) == 0) e = &g_elf[i];
  }
  if (e == nullptr && g_elf_count < kMaxElfObjects) {
    e = &g_elf[g_elf_count++];
    LoadElfSymbols(path, e);
  }
  bool found = false;
  if (e != nullptr && e->syms != nullptr) {
    const uintptr_t vaddr = lookup - fbase + e->first_load;
    for (size_t i = 0; i < e->count; ++i) {
      const ElfW(Sym)& s = e->syms[i];
      if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF) continue;
      if (vaddr < s.st_value || vaddr - s.st_value >= (s.st_size ? s.st_size : 1)) continue;
      if (s.st_name >= e->names_size) break;
      f->sym = e->names + s.st_name;
      f->sym_off = ip - (fbase - e->first_load + s.st_value);
      found = true;
      break;
    }
  }
  g_elf_lock.Unlock();
  return found;
}

SymbolizedFrame SymbolizeUncached(uintptr_t ip, uintptr_t lookup) {
  SymbolizedFrame f;
  f.ip = ip;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(lookup), &info) != 0) {
    f.obj = info.dli_fname;
    f.obj_off = ip - reinterpret_cast<uintptr_t>(info.dli_fbase);
    if (info.dli_sname != nullptr && info.dli_saddr != nullptr) {
      f.sym = info.dli_sname;
      f.sym_off = ip - reinterpret_cast<uintptr_t>(info.dli_saddr);
    }
    // The main executable is reported by dladdr as "" on some loaders, and as argv[0]
    // (often relative, e.g. "./train") by glibc: name it by its real path instead, so that
    // `forkguard report` can open it later for symbols and lines.
    if (f.obj != nullptr && f.obj[0] != '/' &&
        reinterpret_cast<uintptr_t>(info.dli_fbase) == MainExecutableBase()) {
      f.obj = MainExecutablePath();
    }
    if (f.obj != nullptr && f.obj[0] == '\0') f.obj = nullptr;
    if (f.sym == nullptr) {
      SymtabLookup(f.obj, reinterpret_cast<uintptr_t>(info.dli_fbase), lookup, ip, &f);
    }
  }
  return f;
}

}  // namespace

void BeginSymbolizing() {
  unsigned long long counters[2] = {0, 0};
  dl_iterate_phdr(ReadLoadCounters, counters);
  if (!g_cache_lock.TryLock()) return;
  if (g_cache == nullptr) {
    g_cache = static_cast<CachedFrame*>(MapAnonymous(sizeof(CachedFrame) * kCacheSlots));
  } else if (counters[0] != g_cache_adds || counters[1] != g_cache_subs) {
    memset(static_cast<void*>(g_cache), 0, sizeof(CachedFrame) * kCacheSlots);
  }
  g_cache_adds = counters[0];
  g_cache_subs = counters[1];
  g_cache_lock.Unlock();
}

SymbolizedFrame Symbolize(uintptr_t ip, bool is_return_address) {
  uintptr_t lookup = is_return_address && ip > 0 ? ip - 1 : ip;
  // Another thread, or this one interrupted by a signal, holds the cache: go without it.
  // g_cache is read under the lock: BeginSymbolizing on another thread sets it.
  if (!g_cache_lock.TryLock()) return SymbolizeUncached(ip, lookup);
  if (g_cache == nullptr) {
    g_cache_lock.Unlock();
    return SymbolizeUncached(ip, lookup);
  }
  CachedFrame& slot = g_cache[(lookup * 0x9e3779b97f4a7c15ULL) >> 52 & (kCacheSlots - 1)];
  SymbolizedFrame f;
  if (slot.lookup == lookup && lookup != 0) {
    f = slot.frame;
    // The cached offsets were computed for the same lookup address; only ip may differ by
    // the return-address adjustment, which is identical for the same lookup.
    f.ip = ip;
  } else {
    f = SymbolizeUncached(ip, lookup);
    slot.lookup = lookup;
    slot.frame = f;
  }
  g_cache_lock.Unlock();
  return f;
}

const char* MainExecutableFile() { return MainExecutablePath(); }

bool IsRdmaLibraryObject(const char* obj) {
  const char* base = BaseName(obj);
  return strncmp(base, "libibverbs.so", 13) == 0 || strncmp(base, "librdmacm.so", 12) == 0 ||
         strncmp(base, "libforkguard", 12) == 0;
}

namespace {

// "sym[+0xoff] (obj+0xoff)", "?? (obj+0xoff)" or "?? (0xip)".
void AppendFrameText(TextBuffer& out, const SymbolizedFrame& f, bool demangle, bool offset) {
  if (f.sym != nullptr) {
    AppendSymbol(out, f.sym, demangle);
    if (offset) out.Str("+0x").Hex(f.sym_off);
  } else {
    out.Str("??");
  }
  out.Str(" (");
  if (f.obj != nullptr) {
    out.Str(BaseName(f.obj)).Str("+0x").Hex(f.obj_off);
  } else {
    out.Ptr(f.ip);
  }
  out.Char(')');
}

}  // namespace

void FormatFrame(TextBuffer& out, int index, const SymbolizedFrame& f, bool demangle) {
  out.Char('#').Dec(index).Char(' ');
  AppendFrameText(out, f, demangle, /*offset=*/true);
}

void FormatInnermostUserFrame(TextBuffer& out, const RawStack& stack, bool demangle) {
  for (int i = 0; i < stack.depth; ++i) {
    SymbolizedFrame f = Symbolize(stack.ips[i], i > 0);
    if (f.obj != nullptr && IsRdmaLibraryObject(f.obj)) continue;
    if (f.sym == nullptr && f.obj == nullptr) continue;
    AppendFrameText(out, f, demangle, /*offset=*/false);
    return;
  }
  out.Str("an unknown caller");
}

bool IsSignalTrampoline(uintptr_t ip) {
  // glibc's __restore_rt on x86-64 (a local symbol dladdr cannot name):
  // mov $SYS_rt_sigreturn, %rax; syscall. Read only within the IP's page.
  static const unsigned char kCode[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  if (ip == 0 || (ip & 4095) > 4096 - sizeof(kCode)) return false;
  return memcmp(reinterpret_cast<const void*>(ip), kCode, sizeof(kCode)) == 0;
}

uint64_t StackSiteHash(const RawStack& stack) {
  // FNV-1a from a seed one digit short of its basis: kept, so sites stay what logs said.
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](const void* p, size_t n) { h = Fnv1a(h, p, n); };
  for (int i = 0; i < stack.depth; ++i) {
    // A fork from a signal handler: the frames past the signal trampoline are wherever the
    // program happened to be interrupted, not part of the call site.
    if (IsSignalTrampoline(stack.ips[i])) break;
    SymbolizedFrame f = Symbolize(stack.ips[i], i > 0);
    if (f.obj != nullptr) {
      const char* base = BaseName(f.obj);
      mix(base, strlen(base));
      mix(&f.obj_off, sizeof(f.obj_off));
    } else {
      mix(&f.ip, sizeof(f.ip));
    }
  }
  return h;
}

}  // namespace forkguard
