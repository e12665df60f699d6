// libforkguard_audit.so: the LD_AUDIT module (see shim/AUDIT.md).
//
// LD_PRELOAD only changes symbol *lookup by name in the global scope*. NCCL, OneFlow and
// brpc dlopen libibverbs RTLD_LOCAL and take its functions with dlsym/dlvsym on that
// handle, which returns libibverbs' own definition and never the shim's wrapper. The
// dynamic linker reports every such binding to la_symbind64 (for dlsym/dlvsym too since
// glibc 2.35), and what la_symbind64 returns is what the program gets. So: for a watched
// symbol defined by libibverbs/librdmacm, return the shim's exported wrapper of the same
// name instead; the wrapper forwards to the real function exactly as under LD_PRELOAD.
//
// This module runs in its own link namespace (its own libc), inside the dynamic linker
// with its lock held: no dlopen/dlsym here, nothing that could re-enter the loader. The
// shim's wrappers are found by reading the shim's dynamic symbol table through its
// link_map.
#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "shim/base/job_identity.h"
#include "shim/base/stderr_line.h"
#include "shim/base/sys.h"

namespace {

using forkguard::BaseName;

// The shim, as seen in la_objopen (nullptr until then). Written under the loader lock;
// read by la_symbind64, which lazy binding calls without it.
struct link_map* g_shim = nullptr;  // only through __atomic builtins
// Cookies are left at the loader's default, the link_map address, so refcook/defcook
// identify objects directly.

bool StartsWith(const char* s, const char* prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool IsShim(const char* name) { return strcmp(BaseName(name), "libforkguard.so") == 0; }

// Objects whose definitions may need redirecting: only these get LA_FLG_BINDTO, so
// bindings to any other object never reach la_symbind64.
bool IsRdmaLibrary(const char* name) {
  const char* base = BaseName(name);
  return StartsWith(base, "libibverbs.so") || StartsWith(base, "librdmacm.so");
}

// The shim exports its wrappers under the plain names; these prefixes are the watched
// families. A name the shim does not export is left alone, so the watched list is
// exactly the shim's wrapper list.
bool IsWatchedName(const char* name) {
  return StartsWith(name, "ibv_") || StartsWith(name, "rdma_");
}

const char* Getenv(const char* name, void*) { return getenv(name); }

// One line, prefixed like the shim's ("[host rN pid] "): under a launcher every rank's
// stderr is one stream. Best effort: stderr may be closed; the module never changes
// behaviour over it.
void Say(const char* text) {
  bool secure = getauxval(AT_SECURE) != 0;
  forkguard::JobIdentity id = forkguard::ReadJobIdentity(secure ? nullptr : Getenv, nullptr);
  char host[256];
  if (gethostname(host, sizeof(host) - 1) != 0) strcpy(host, "?");
  host[sizeof(host) - 1] = '\0';
  forkguard::SetIdentityHost(id, host);
  forkguard::SetStderrIdentity(id.short_host, id.rank);
  forkguard::WriteStderrLines(text);
}

// Dynamic-section pointers: glibc relocates them in place on x86-64 (absolute), some
// ports leave them as offsets. An offset is always below the load address.
uintptr_t DynPtr(const struct link_map* map, ElfW(Addr) value) {
  return value < map->l_addr ? value + map->l_addr : value;
}

struct DynamicSymbols {
  const ElfW(Sym) * symtab = nullptr;
  const char* strtab = nullptr;
  const uint32_t* gnu_hash = nullptr;
  const ElfW(Half) * versym = nullptr;
};

DynamicSymbols ReadDynamic(const struct link_map* map) {
  DynamicSymbols d;
  if (map == nullptr || map->l_ld == nullptr) return d;
  for (const ElfW(Dyn)* dyn = map->l_ld; dyn->d_tag != DT_NULL; ++dyn) {
    switch (dyn->d_tag) {
      case DT_SYMTAB:
        d.symtab = reinterpret_cast<const ElfW(Sym)*>(DynPtr(map, dyn->d_un.d_ptr));
        break;
      case DT_STRTAB:
        d.strtab = reinterpret_cast<const char*>(DynPtr(map, dyn->d_un.d_ptr));
        break;
      case DT_GNU_HASH:
        d.gnu_hash = reinterpret_cast<const uint32_t*>(DynPtr(map, dyn->d_un.d_ptr));
        break;
      case DT_VERSYM:
        d.versym = reinterpret_cast<const ElfW(Half)*>(DynPtr(map, dyn->d_un.d_ptr));
        break;
      default:
        break;
    }
  }
  return d;
}

uint32_t GnuHash(const char* name) {
  uint32_t h = 5381;
  for (const auto* p = reinterpret_cast<const unsigned char*>(name); *p != 0; ++p) h = h * 33 + *p;
  return h;
}

// True when symbol ndx is the default version of its name (or unversioned): the
// "@@VERSION" definition a plain dlsym would find. Compat versions such as
// ibv_open_device@IBVERBS_1.0 have another ABI and must not go to the wrapper.
bool IsDefaultVersion(const DynamicSymbols& d, unsigned int ndx) {
  if (d.versym == nullptr) return true;
  return (d.versym[ndx] & 0x8000) == 0;
}

// Address of the shim's exported, defined, default-version function `name`, or 0.
// Standard DT_GNU_HASH lookup (bloom filter skipped: correctness does not need it).
uintptr_t FindShimFunction(const struct link_map* shim, const char* name) {
  const DynamicSymbols d = ReadDynamic(shim);
  if (d.symtab == nullptr || d.strtab == nullptr || d.gnu_hash == nullptr) return 0;
  const uint32_t nbuckets = d.gnu_hash[0];
  const uint32_t symoffset = d.gnu_hash[1];
  const uint32_t bloom_size = d.gnu_hash[2];
  if (nbuckets == 0) return 0;
  const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(d.gnu_hash + 4);
  const uint32_t* buckets = reinterpret_cast<const uint32_t*>(bloom + bloom_size);
  const uint32_t* chain = buckets + nbuckets;
  const uint32_t hash = GnuHash(name);
  uint32_t index = buckets[hash % nbuckets];
  if (index < symoffset) return 0;
  for (;; ++index) {
    const uint32_t chain_hash = chain[index - symoffset];
    if ((chain_hash | 1) == (hash | 1)) {
      const ElfW(Sym)& sym = d.symtab[index];
      if (sym.st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym.st_info) == STT_FUNC &&
          ELF64_ST_BIND(sym.st_info) != STB_LOCAL && sym.st_value != 0 &&
          IsDefaultVersion(d, index) && strcmp(d.strtab + sym.st_name, name) == 0) {
        return shim->l_addr + sym.st_value;
      }
    }
    if ((chain_hash & 1) != 0) return 0;  // end of this bucket's chain
  }
}

// True when the object links libibverbs/librdmacm directly (DT_NEEDED). Its PLT
// bindings are reported to la_symbind64 only when it has LA_FLG_BINDFROM *and* the
// definer has LA_FLG_BINDTO (dlsym/dlvsym need just one of them). Without LD_AUDIT such
// bindings reach the shim anyway -- except for a library loaded RTLD_DEEPBIND, which
// binds to libibverbs first: this is what routes those to the shim.
bool NeedsRdmaLibrary(const struct link_map* map) {
  if (map->l_ld == nullptr) return false;
  const char* strtab = nullptr;
  for (const ElfW(Dyn)* dyn = map->l_ld; dyn->d_tag != DT_NULL; ++dyn) {
    if (dyn->d_tag == DT_STRTAB)
      strtab = reinterpret_cast<const char*>(DynPtr(map, dyn->d_un.d_ptr));
  }
  if (strtab == nullptr) return false;
  for (const ElfW(Dyn)* dyn = map->l_ld; dyn->d_tag != DT_NULL; ++dyn) {
    if (dyn->d_tag == DT_NEEDED && IsRdmaLibrary(strtab + dyn->d_un.d_val)) return true;
  }
  return false;
}

}  // namespace

#define FG_AUDIT_EXPORT __attribute__((visibility("default")))

extern "C" {

// The interface version: ours, or the loader's if older (la_symbind64 is in every one).
FG_AUDIT_EXPORT unsigned int la_version(unsigned int version) {
  return version < LAV_CURRENT ? version : LAV_CURRENT;
}

FG_AUDIT_EXPORT unsigned int la_objopen(struct link_map* map, Lmid_t lmid, uintptr_t* cookie) {
  (void)cookie;
  // dlmopen'ed namespaces have no shim of their own: leave them untouched.
  if (lmid != LM_ID_BASE || map->l_name == nullptr) return 0;
  if (IsShim(map->l_name)) {
    struct link_map* none = nullptr;
    __atomic_compare_exchange_n(&g_shim, &none, map, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return 0;
  }
  unsigned int flags = IsRdmaLibrary(map->l_name) ? LA_FLG_BINDTO : 0;
  if (NeedsRdmaLibrary(map)) flags |= LA_FLG_BINDFROM;
  return flags;
}

// After the startup objects are loaded, before main: the one place to tell a user the
// module is useless on its own.
FG_AUDIT_EXPORT void la_preinit(uintptr_t* cookie) {
  (void)cookie;
  if (__atomic_load_n(&g_shim, __ATOMIC_ACQUIRE) == nullptr) {
    Say("forkguard: libforkguard_audit.so does nothing without the shim: set "
        "LD_PRELOAD=libforkguard.so too (or use `forkguard run`)\n");
  }
}

FG_AUDIT_EXPORT uintptr_t la_symbind64(ElfW(Sym) * sym, unsigned int ndx, uintptr_t* refcook,
                                       uintptr_t* defcook, unsigned int* flags,
                                       const char* symname) {
  (void)flags;
  const uintptr_t unchanged = sym->st_value;
  const struct link_map* shim = __atomic_load_n(&g_shim, __ATOMIC_ACQUIRE);
  if (shim == nullptr || symname == nullptr || !IsWatchedName(symname)) return unchanged;
  // The shim finds the real functions with dlvsym/dlsym: those must get them.
  if (*refcook == reinterpret_cast<uintptr_t>(shim)) return unchanged;
  const auto* definer = reinterpret_cast<const struct link_map*>(*defcook);
  if (definer == shim || !IsDefaultVersion(ReadDynamic(definer), ndx)) return unchanged;
  const uintptr_t wrapper = FindShimFunction(shim, symname);
  return wrapper != 0 ? wrapper : unchanged;
}

}  // extern "C"
