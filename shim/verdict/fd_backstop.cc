// The descriptor backstop: finds RDMA device descriptors without any intercepted symbol
// (static libibverbs, mlx5dv_open_device, handle lookups the audit module did not see).
// Async-signal-safe: raw getdents64 and fstatat into stack buffers, no malloc.
//
// Cost matters (it runs at every fork): /proc lookups cost microseconds each, so each
// descriptor gets one stat and is classified by device number; readlink is only used for
// character devices whose numbers we could not learn from /proc/devices and /proc/misc.
// The descriptors themselves are never used: other threads own them and may close (and
// reuse) a number while we look (a data race, and a misclassification), so each is stat'ed
// through its /proc/self/fd entry, which the kernel resolves atomically (ENOENT: closed).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "shim/base/sys.h"
#include "shim/verdict/proc_facts.h"

namespace forkguard {
namespace {

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

constexpr int kMiscMajor = 10;
ZeroFilledAtomic<int, -1> g_uverbs_major;
ZeroFilledAtomic<int, -1> g_rdma_cm_minor;

// Character devices that are never RDMA: mem (null, zero, urandom), tty, console/ptmx, pts.
bool IsCommonCharDevice(unsigned maj) { return maj == 1 || maj == 4 || maj == 5 || maj == 136; }

}  // namespace

int FindNumberForName(const char* text, const char* section, const char* name) {
  const char* p = text;
  if (section != nullptr) {
    p = strstr(text, section);
    if (p == nullptr) return -1;
    p += strlen(section);
  }
  size_t nlen = strlen(name);
  while (*p != '\0') {
    while (*p == '\n') ++p;
    // A blank line ends the section ("Character devices:" is followed by "Block devices:").
    if (section != nullptr && (*p == '\0' || (*p != ' ' && (*p < '0' || *p > '9')))) return -1;
    const char* q = p;
    while (*q == ' ') ++q;
    int num = 0;
    bool any = false;
    while (*q >= '0' && *q <= '9') {
      num = num * 10 + (*q++ - '0');
      any = true;
    }
    while (*q == ' ') ++q;
    if (any && strncmp(q, name, nlen) == 0 && (q[nlen] == '\n' || q[nlen] == '\0')) return num;
    const char* nl = strchr(p, '\n');
    if (nl == nullptr) break;
    p = nl;
  }
  return -1;
}

void LearnRdmaDeviceNumbers(char* buf, size_t cap) {
  if (g_uverbs_major.load(std::memory_order_relaxed) < 0 &&
      ReadSmallFile("/proc/devices", buf, cap) > 0) {
    g_uverbs_major.store(FindNumberForName(buf, "Character devices:", "infiniband_verbs"));
  }
  if (g_rdma_cm_minor.load(std::memory_order_relaxed) < 0 &&
      ReadSmallFile("/proc/misc", buf, cap) > 0) {
    g_rdma_cm_minor.store(FindNumberForName(buf, nullptr, "rdma_cm"));
  }
}

void LearnRdmaDeviceNumbers() {
  char buf[8192];
  LearnRdmaDeviceNumbers(buf, sizeof(buf));
}

bool RdmaDevicesExist() {
  return g_uverbs_major.load(std::memory_order_relaxed) >= 0 ||
         g_rdma_cm_minor.load(std::memory_order_relaxed) >= 0;
}

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
  int uverbs_major = g_uverbs_major.load(std::memory_order_relaxed);
  int rdma_cm_minor = g_rdma_cm_minor.load(std::memory_order_relaxed);
  alignas(8) char buf[4096];
  for (;;) {
    long n = syscall(SYS_getdents64, dir, buf, sizeof(buf));
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buf + off);
      off += d->d_reclen;
      const char* name = d->d_name;
      if (name[0] < '0' || name[0] > '9') continue;
      int fd = 0;
      for (const char* c = name; *c >= '0' && *c <= '9'; ++c) fd = fd * 10 + (*c - '0');
      if (fd == dir) continue;
      struct stat st;
      // Follows the magic link to the open file; ENOENT when it was closed meanwhile.
      if (fstatat(dir, name, &st, 0) != 0 || !S_ISCHR(st.st_mode)) continue;
      unsigned maj = major(st.st_rdev);
      unsigned min = minor(st.st_rdev);
      if (uverbs_major >= 0 && maj == static_cast<unsigned>(uverbs_major)) {
        ++fds.uverbs;
        continue;
      }
      if (maj == kMiscMajor && rdma_cm_minor >= 0 && min == static_cast<unsigned>(rdma_cm_minor)) {
        ++fds.rdma_cm;
        continue;
      }
      if (IsCommonCharDevice(maj)) continue;
      // Known numbers and not one of them: not RDMA (misc devices other than rdma_cm
      // included, when rdma_cm's minor is known).
      if (uverbs_major >= 0 && (maj != kMiscMajor || rdma_cm_minor >= 0)) continue;
      // Numbers unknown (modules loaded after we looked): ask for the path.
      char target[64];
      ssize_t t = readlinkat(dir, name, target, sizeof(target) - 1);
      if (t <= 0) continue;
      target[t] = '\0';
      ClassifyFdTarget(target, &fds);
    }
  }
  close(dir);
  return fds;
}

}  // namespace forkguard
