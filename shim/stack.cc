#include "shim/stack.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace forkguard {
namespace {

struct CodeRange {
  uintptr_t lo = 0;
  uintptr_t hi = 0;
};
constexpr int kMaxRanges = 8;
CodeRange g_own[kMaxRanges];
std::atomic<int> g_own_count{0};

int CollectOwnRanges(struct dl_phdr_info* info, size_t, void* data) {
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

}  // namespace

void LoadUnwinder() {
  if (g_unw_tried.load(std::memory_order_acquire)) return;
  if (g_unw_tried.exchange(true)) return;
  void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return;
  auto fn = reinterpret_cast<UnwBacktraceFn>(dlsym(h, "unw_backtrace"));
  g_unw_backtrace.store(fn, std::memory_order_release);
}

void InitOwnCodeRange() {
  if (g_own_count.load(std::memory_order_acquire) > 0) return;
  dl_iterate_phdr(CollectOwnRanges, reinterpret_cast<void*>(&InitOwnCodeRange));
}

bool IsOwnCode(uintptr_t ip) {
  int n = g_own_count.load(std::memory_order_acquire);
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
  // Only as deep as asked (plus the shim's own frames): unwinding costs per frame.
  int want = max_depth + 16;
  int n = unw != nullptr ? unw(ips, want) : 0;
  int first = 0;
  while (first < n && IsOwnCode(reinterpret_cast<uintptr_t>(ips[first]))) ++first;
  int depth = 0;
  for (int i = first; i < n && depth < max_depth; ++i) {
    out->ips[depth++] = reinterpret_cast<uintptr_t>(ips[i]);
  }
  out->depth = depth < 0 ? 0 : depth;
}

SymbolizedFrame Symbolize(uintptr_t ip, bool is_return_address) {
  SymbolizedFrame f;
  f.ip = ip;
  uintptr_t lookup = is_return_address && ip > 0 ? ip - 1 : ip;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(lookup), &info) != 0) {
    f.obj = info.dli_fname;
    f.obj_off = ip - reinterpret_cast<uintptr_t>(info.dli_fbase);
    if (info.dli_sname != nullptr && info.dli_saddr != nullptr) {
      f.sym = info.dli_sname;
      f.sym_off = ip - reinterpret_cast<uintptr_t>(info.dli_saddr);
    }
    // The main executable is reported by dladdr as "" on some loaders.
    if (f.obj != nullptr && f.obj[0] == '\0') f.obj = nullptr;
  }
  return f;
}

const char* BaseName(const char* path) {
  if (path == nullptr) return "";
  const char* slash = strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

bool IsRdmaLibraryObject(const char* obj) {
  const char* base = BaseName(obj);
  return strncmp(base, "libibverbs.so", 13) == 0 || strncmp(base, "librdmacm.so", 12) == 0 ||
         strncmp(base, "libforkguard", 12) == 0;
}

void FormatFrame(TextBuffer& out, int index, const SymbolizedFrame& f, bool demangle) {
  out.Char('#').Dec(index).Char(' ');
  if (f.sym != nullptr) {
    char* demangled = nullptr;
    if (demangle && f.sym[0] == '_' && f.sym[1] == 'Z') {
      int status = 0;
      demangled = abi::__cxa_demangle(f.sym, nullptr, nullptr, &status);
    }
    out.Str(demangled != nullptr ? demangled : f.sym);
    free(demangled);
    out.Str("+0x").Hex(f.sym_off);
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

void FormatInnermostUserFrame(TextBuffer& out, const RawStack& stack, bool demangle) {
  for (int i = 0; i < stack.depth; ++i) {
    SymbolizedFrame f = Symbolize(stack.ips[i], i > 0);
    if (f.obj != nullptr && IsRdmaLibraryObject(f.obj)) continue;
    if (f.sym == nullptr && f.obj == nullptr) continue;
    char* demangled = nullptr;
    if (f.sym != nullptr) {
      if (demangle && f.sym[0] == '_' && f.sym[1] == 'Z') {
        int status = 0;
        demangled = abi::__cxa_demangle(f.sym, nullptr, nullptr, &status);
      }
      out.Str(demangled != nullptr ? demangled : f.sym);
      free(demangled);
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
    return;
  }
  out.Str("an unknown caller");
}

uint64_t StackSiteHash(const RawStack& stack) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 1099511628211ULL;
    }
  };
  for (int i = 0; i < stack.depth; ++i) {
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
