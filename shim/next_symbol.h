// The next definition of a function after a given object, as dlsym(RTLD_NEXT) finds it, for
// the libc functions the shim resolves at start: read from the loaded objects' own dynamic
// symbol tables (GNU hash), without dlsym. dlsym cost each process that loads the shim
// about 900 instructions per function (its error-catching frame, the caller's object, the
// loader's lock), most of what the constructor did.
//
// Only the plain case is answered: the objects that follow `self` in the process's list of
// loaded objects, up to and including libc, which at start-up is the order of the global
// search scope dlsym(RTLD_NEXT) walks from a preloaded library. Anything else - `self` not
// before libc (loaded by dlopen), an object without a GNU hash table, an indirect function
// (IFUNC), more than one default version, a name found nowhere there - gives nullptr, and
// the caller asks dlsym.
#pragma once

#include <link.h>

#include <cstddef>

namespace forkguard {

class NextSymbols {
 public:
  // The objects after the one whose code contains `self`. Takes the loader's lock once
  // (dl_iterate_phdr): not for a signal handler.
  explicit NextSymbols(const void* self);

  // The address dlsym(RTLD_NEXT, name) gives from `self`'s object, or nullptr (see above).
  void* Find(const char* name) const;

 private:
  struct Object {
    ElfW(Addr) base;
    const Elf32_Word* gnu_hash;
    const ElfW(Sym) * symtab;
    const char* strtab;
    const ElfW(Versym) * versym;  // null: the object has no symbol versions
  };
  static constexpr int kMaxObjects = 16;
  Object objects_[kMaxObjects] = {};
  int count_ = 0;
  bool usable_ = false;  // self found, libc after it, every object in between has a table

  static int Collect(struct dl_phdr_info* info, size_t size, void* data);
  const void* self_;
  bool after_self_ = false;
};

}  // namespace forkguard
