#include "shim/next_symbol.h"

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

#include "shim/base/start_path.h"

namespace forkguard {
namespace {

// The loader relocates the address entries of an object's dynamic section in place (x86-64);
// the vDSO's are left as offsets.
template <typename T>
const T* DynamicPointer(ElfW(Addr) value, ElfW(Addr) base) {
  return reinterpret_cast<const T*>(value < base ? value + base : value);
}

// Compared byte by byte with constants in the code: no string constant in .rodata, no
// libc call at start (shim/base/start_path.h).
FORKGUARD_START_PATH bool IsLibc(const char* path) {
  if (path == nullptr) return false;
  const char* base = path;
  for (const char* p = path; *p != '\0'; ++p) {
    if (*p == '/') base = p + 1;
  }
  return base[0] == 'l' && base[1] == 'i' && base[2] == 'b' && base[3] == 'c' && base[4] == '.' &&
         base[5] == 's' && base[6] == 'o' && base[7] == '.';
}

// strcmp(a, b) == 0, in the start-up code (libc's strcmp is another page to fault in).
FORKGUARD_START_PATH bool SameName(const char* a, const char* b) {
  for (; *a == *b; ++a, ++b) {
    if (*a == '\0') return true;
  }
  return false;
}

}  // namespace

FORKGUARD_START_PATH NextSymbols::NextSymbols(const void* self) : self_(self) {
  dl_iterate_phdr(Collect, this);
}

// Called for each loaded object in the order of the loader's list; stops (returns 1) at libc.
FORKGUARD_START_PATH int NextSymbols::Collect(struct dl_phdr_info* info, size_t, void* data) {
  auto* me = static_cast<NextSymbols*>(data);
  if (!me->after_self_) {
    auto self = reinterpret_cast<ElfW(Addr)>(me->self_);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
      const ElfW(Phdr)& ph = info->dlpi_phdr[i];
      if (ph.p_type == PT_LOAD && self >= info->dlpi_addr + ph.p_vaddr &&
          self < info->dlpi_addr + ph.p_vaddr + ph.p_memsz) {
        me->after_self_ = true;
      }
    }
    // libc before us: we were loaded later (dlopen), and RTLD_NEXT searches another scope.
    return IsLibc(info->dlpi_name) ? 1 : 0;
  }
  if (me->count_ == kMaxObjects) return 1;
  Object o{};
  o.base = info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
    auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    for (; dyn->d_tag != DT_NULL; ++dyn) {
      switch (dyn->d_tag) {
        case DT_GNU_HASH:
          o.gnu_hash = DynamicPointer<Elf32_Word>(dyn->d_un.d_ptr, o.base);
          break;
        case DT_SYMTAB:
          o.symtab = DynamicPointer<ElfW(Sym)>(dyn->d_un.d_ptr, o.base);
          break;
        case DT_STRTAB:
          o.strtab = DynamicPointer<char>(dyn->d_un.d_ptr, o.base);
          break;
        case DT_VERSYM:
          o.versym = DynamicPointer<ElfW(Versym)>(dyn->d_un.d_ptr, o.base);
          break;
        default:
          break;
      }
    }
  }
  // An object without a dynamic section defines nothing; one without a GNU hash table (very
  // old or odd links) cannot be searched here: leave every lookup to dlsym.
  bool has_dynamic = o.symtab != nullptr || o.strtab != nullptr || o.gnu_hash != nullptr;
  if (has_dynamic && (o.gnu_hash == nullptr || o.symtab == nullptr || o.strtab == nullptr)) {
    return 1;
  }
  if (has_dynamic) me->objects_[me->count_++] = o;
  if (IsLibc(info->dlpi_name)) {
    me->usable_ = true;
    return 1;
  }
  return 0;
}

// dlsym's rules for a name without a version (glibc's do_lookup_x and check_match with
// DL_LOOKUP_RETURN_NEWEST): a defined, nonzero, non-local symbol of the name; unversioned,
// or the object's one non-hidden version of it. The first object that has it answers.
FORKGUARD_START_PATH void* NextSymbols::Find(const char* name) const {
  if (!usable_) return nullptr;
  uint32_t hash = 5381;  // the GNU hash (dl_new_hash)
  for (const char* c = name; *c != '\0'; ++c) hash = hash * 33 + static_cast<unsigned char>(*c);
  for (int k = 0; k < count_; ++k) {
    const Object& o = objects_[k];
    const Elf32_Word nbuckets = o.gnu_hash[0];
    const Elf32_Word symoffset = o.gnu_hash[1];
    const Elf32_Word bloom_size = o.gnu_hash[2];
    const Elf32_Word bloom_shift = o.gnu_hash[3];
    if (nbuckets == 0 || bloom_size == 0) continue;
    const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(o.gnu_hash + 4);
    constexpr unsigned kBits = sizeof(ElfW(Addr)) * 8;
    ElfW(Addr) word = bloom[(hash / kBits) % bloom_size];
    ElfW(Addr) mask =
        (ElfW(Addr){1} << (hash % kBits)) | (ElfW(Addr){1} << ((hash >> bloom_shift) % kBits));
    if ((word & mask) != mask) continue;
    const auto* buckets = reinterpret_cast<const Elf32_Word*>(bloom + bloom_size);
    const Elf32_Word* chain = buckets + nbuckets;
    Elf32_Word idx = buckets[hash % nbuckets];
    if (idx == 0 || idx < symoffset) continue;
    const ElfW(Sym)* found = nullptr;
    int versions = 0;
    for (;; ++idx) {
      const Elf32_Word h = chain[idx - symoffset];
      const ElfW(Sym)& s = o.symtab[idx];
      if ((h | 1) == (hash | 1) && SameName(name, o.strtab + s.st_name) &&
          s.st_shndx != SHN_UNDEF && s.st_value != 0 && ELF64_ST_BIND(s.st_info) != STB_LOCAL) {
        const int type = ELF64_ST_TYPE(s.st_info);
        // An indirect function's address comes from calling its resolver, and a unique or
        // TLS symbol has rules of its own: dlsym's to apply.
        if (type == STT_GNU_IFUNC || type == STT_TLS ||
            ELF64_ST_BIND(s.st_info) == STB_GNU_UNIQUE) {
          return nullptr;
        }
        if (type == STT_FUNC || type == STT_NOTYPE || type == STT_OBJECT) {
          const ElfW(Versym) v = o.versym != nullptr ? o.versym[idx] : 0;
          if ((v & 0x7fff) < 2) return reinterpret_cast<void*>(o.base + s.st_value);
          if ((v & 0x8000) == 0) {
            ++versions;
            found = &s;
          }
        }
      }
      if ((h & 1) != 0) break;
    }
    if (versions == 1) return reinterpret_cast<void*>(o.base + found->st_value);
    if (versions > 1) return nullptr;
  }
  return nullptr;
}

}  // namespace forkguard
