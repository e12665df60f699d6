// The descriptor backstop: finds RDMA device descriptors without any intercepted symbol
// (static libibverbs, mlx5dv_open_device, handle lookups the audit module did not see).
// Async-signal-safe: raw getdents64 and readlink into stack buffers, no malloc.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "shim/proc_facts.h"

namespace forkguard {
namespace {

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

}  // namespace

void ClassifyFdTarget(const char* target, RdmaFds* fds) {
  static const char kPrefix[] = "/dev/infiniband/";
  if (strncmp(target, kPrefix, sizeof(kPrefix) - 1) != 0) return;
  const char* rest = target + sizeof(kPrefix) - 1;
  if (strncmp(rest, "uverbs", 6) == 0) {
    ++fds->uverbs;
  } else if (strcmp(rest, "rdma_cm") == 0) {
    ++fds->rdma_cm;
  }
}

RdmaFds ScanRdmaFds() {
  RdmaFds fds;
  int dir = static_cast<int>(
      syscall(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir < 0) return fds;
  alignas(8) char buf[4096];
  for (;;) {
    long n = syscall(SYS_getdents64, dir, buf, sizeof(buf));
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buf + off);
      off += d->d_reclen;
      if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
      char path[64] = "/proc/self/fd/";
      size_t plen = strlen(path);
      size_t nlen = strnlen(d->d_name, sizeof(path) - plen - 1);
      memcpy(path + plen, d->d_name, nlen);
      path[plen + nlen] = '\0';
      char target[64];
      ssize_t t = readlink(path, target, sizeof(target) - 1);
      if (t <= 0) continue;
      target[t] = '\0';
      ClassifyFdTarget(target, &fds);
    }
  }
  close(dir);
  return fds;
}

}  // namespace forkguard
