// The machine facts a fork verdict rests on, in one place: what the kernel reports about
// copy-on-fork (RDMA netlink), the rdma-core version, who turned fork support on (the
// environment's part), and the memory kind of a mapping as /proc/self/smaps shows it. The
// kernel's measured behaviour is facts/pin_probe.h; the rule is facts/fork_rule.h.
//
// A leaf (libc only). Everything here is malloc-free and reads into the caller's or stack
// buffers, so the shim can call it outside its fork path; nothing here forks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "facts/fork_rule.h"

namespace forkguard::facts {

// RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK (Linux >= 5.13 reports it). kUnknown when the kernel has
// no RDMA netlink (ib_core not loaded) or does not know the attribute; `why` (optional)
// gets a static phrase saying which.
Tri ReportedCopyOnFork(const char** why);

// rdma-core's version from libibverbs' real file name ("libibverbs.so.1.14.44.0" -> 44:
// rdma-core's CMake names it 1.${ABI}.${PACKAGE_VERSION}), or -1.
int RdmaCoreFromLibName(const char* name);
// The libibverbs mapped in this process (/proc/self/maps), or -1.
int RdmaCoreFromMaps();
// The libibverbs.so.1 a program here would load (the usual library directories, symlinks
// resolved), or -1; `path` (may be null) receives the file it resolved to ("" if none).
int RdmaCoreInstalled(char* path, size_t cap);

// RDMAV_FORK_SAFE / IBV_FORK_SAFE: rdma-core turns fork support on when either is set, to
// any value. Writes "NAME=value" into `out` (cut to cap) and returns true when one is set.
bool ForkSafeFromEnvironment(char* out, size_t cap);
// RDMAV_HUGEPAGES_SAFE set (any value).
bool HugepagesSafeFromEnvironment();

// One mapping of /proc/<pid>/smaps, classified. Feed the header line, then the attribute
// lines ("AnonHugePages:", "VmFlags:"); Kind() when VmFlags was seen.
struct SmapsVma {
  uintptr_t start = 0;
  uintptr_t end = 0;
  bool shared = false;       // perms "...s"
  bool file_backed = false;  // inode != 0
  bool hugetlb = false;      // VmFlags "ht"
  bool dontfork = false;     // VmFlags "dc"
  bool anon_huge = false;    // AnonHugePages > 0 kB
  uint64_t page_size = 0;    // KernelPageSize in bytes (0: not seen)
  MemoryKind Kind() const;
};
// Parses "start-end perms offset dev inode [path]"; false for anything else.
bool ParseSmapsHeader(const char* s, size_t n, SmapsVma* out);
// Applies an attribute line to `vma` (AnonHugePages, KernelPageSize, VmFlags); returns true
// on "VmFlags:",
// the last line of a mapping's block.
bool ApplySmapsAttribute(const char* s, size_t n, SmapsVma* vma);
// True when a "VmFlags:" line has `flag` (two letters).
bool VmFlagsHas(const char* s, size_t n, const char* flag);

// The memory kind of [addr, addr+len) in this process (reads /proc/self/smaps; for the
// probe and the CLI, not the fork path). Mixed kinds: the first mapping's.
MemoryKind KindOfRange(uintptr_t addr, size_t len);

// /proc/sys/kernel/random/boot_id (36 characters + NUL) into `out`; false when unreadable.
bool BootId(char* out, size_t cap);

}  // namespace forkguard::facts
