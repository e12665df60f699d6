// The shim's system helpers: thin, policy-free wrappers of libc and the kernel that several
// files of the shim need. A leaf: no dependencies beyond libc.
//
// Every function here is async-signal-safe and never calls malloc (the fork path, the
// forked child and the SIGSEGV handler use them), and may run before the shim's constructor.
// Header-only: the LD_AUDIT module (audit.cc), which links nothing of the shim, and the
// libc-only sources compiled into it use them too.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace forkguard {

// Last path component of `path` ("" for nullptr).
inline const char* BaseName(const char* path) {
  if (path == nullptr) return "";
  const char* slash = strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// Copies at most cap - 1 bytes of `src` (nullptr: "") into `dst` and NUL-terminates it;
// returns the length copied. `cap` must be at least 1.
inline size_t CopyCString(char* dst, size_t cap, const char* src) {
  if (src == nullptr) src = "";
  size_t n = strnlen(src, cap - 1);
  // n < cap by construction: the plain memcpy, not _FORTIFY_SOURCE's __memcpy_chk, whose
  // import alone costs every process a page fault at load (the loader runs its IFUNC
  // resolver, on a page of libc that little else touches).
  __builtin_memcpy(dst, src, n);
  dst[n] = '\0';
  return n;
}

// FNV-1a, 64 bit: hashes that must stay equal across processes of one program (call sites).
constexpr uint64_t kFnv1aBasis = 14695981039346656037ULL;
constexpr uint64_t kFnv1aPrime = 1099511628211ULL;
constexpr uint64_t Fnv1a(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * kFnv1aPrime;
  return h;
}
constexpr uint64_t Fnv1aStr(uint64_t h, const char* s) {
  for (; *s != '\0'; ++s) h = (h ^ static_cast<unsigned char>(*s)) * kFnv1aPrime;
  return h;
}
// One step with a whole value (not its bytes) as the "byte".
constexpr uint64_t Fnv1aValue(uint64_t h, uint64_t v) { return (h ^ v) * kFnv1aPrime; }

// One read(2) / write(2), repeated while it fails with EINTR. Returns what the last call
// returned (a short count is the caller's to handle).
inline ssize_t ReadNoEintr(int fd, void* buf, size_t n) {
  for (;;) {
    ssize_t r = read(fd, buf, n);
    if (r >= 0 || errno != EINTR) return r;
  }
}
inline ssize_t WriteNoEintr(int fd, const void* buf, size_t n) {
  for (;;) {
    ssize_t w = write(fd, buf, n);
    if (w >= 0 || errno != EINTR) return w;
  }
}

// Writes all `n` bytes (short writes and EINTR continued); false on the first error.
inline bool WriteAll(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w = WriteNoEintr(fd, p, n);
    if (w < 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads a small file (/proc) into buf, NUL-terminated, at most cap - 1 bytes; returns the
// length, or -1 when it cannot be opened or read.
inline ssize_t ReadSmallFile(const char* path, char* buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t total = 0;
  while (total + 1 < cap) {
    ssize_t n = ReadNoEintr(fd, buf + total, cap - 1 - total);
    if (n < 0) {
      close(fd);
      return -1;
    }
    if (n == 0) break;
    total += static_cast<size_t>(n);
  }
  close(fd);
  buf[total] = '\0';
  return static_cast<ssize_t>(total);
}

// Private anonymous read-write pages (plus `extra_flags`, e.g. MAP_NORESERVE), zero-filled;
// nullptr when mmap fails. The shim's memory on the fork path: never the heap, whose pages
// can share a page with a registered (MADV_DONTFORK) buffer and be gone in a forked child.
inline void* MapAnonymous(size_t bytes, int extra_flags = 0) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags,
                 -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// The page size, asked once: an atomic (relaxed; concurrent first calls all compute the same
// value), no guard variable.
inline uintptr_t PageSize() {
  static std::atomic<uintptr_t> page{0};
  uintptr_t p = page.load(std::memory_order_relaxed);
  if (p == 0) {
    p = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    page.store(p, std::memory_order_relaxed);
  }
  return p;
}

// CLOCK_MONOTONIC in nanoseconds.
inline int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A value that reads as `kInitial` while its storage starts as zero bytes. Every global of
// the shim is zero-filled (.bss) and none is initialized data (.data): a preloaded object's
// writable file-backed page is one more mapping in every process, which every fork() of the
// host copies and every exit unmaps (docs/shim-cost.md;
// //tests/shim:mapping_test checks it). It holds the value's distance from kInitial, in
// unsigned arithmetic (wraps, never overflows).
template <typename T, T kInitial>
class ZeroFilled {
  using U = std::make_unsigned_t<T>;

 public:
  T get() const { return static_cast<T>(static_cast<U>(v_) + static_cast<U>(kInitial)); }
  void set(T v) { v_ = static_cast<T>(static_cast<U>(v) - static_cast<U>(kInitial)); }

 private:
  T v_ = 0;
};

// The same for a std::atomic<T>: load and store with the given order.
template <typename T, T kInitial>
class ZeroFilledAtomic {
  using U = std::make_unsigned_t<T>;

 public:
  T load(std::memory_order o = std::memory_order_seq_cst) const {
    return static_cast<T>(static_cast<U>(v_.load(o)) + static_cast<U>(kInitial));
  }
  void store(T v, std::memory_order o = std::memory_order_seq_cst) {
    v_.store(static_cast<T>(static_cast<U>(v) - static_cast<U>(kInitial)), o);
  }

 private:
  std::atomic<T> v_{0};
};

}  // namespace forkguard
