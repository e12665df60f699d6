#include "shim/proc_facts.h"

#include <fcntl.h>
#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "shim/sys.h"

namespace forkguard {
namespace {

int HexVal(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool ParseSmapsHeader(const char* s, size_t n, uintptr_t* start, uintptr_t* end) {
  size_t i = 0;
  uintptr_t a = 0;
  uintptr_t b = 0;
  size_t digits = 0;
  for (; i < n && HexVal(s[i]) >= 0; ++i, ++digits) a = (a << 4) | HexVal(s[i]);
  if (digits == 0 || i >= n || s[i] != '-') return false;
  ++i;
  digits = 0;
  for (; i < n && HexVal(s[i]) >= 0; ++i, ++digits) b = (b << 4) | HexVal(s[i]);
  if (digits == 0 || i >= n || s[i] != ' ') return false;
  *start = a;
  *end = b;
  return true;
}

bool VmFlagsHasDontCopy(const char* s, size_t n) {
  static const char kPrefix[] = "VmFlags:";
  if (n < sizeof(kPrefix) - 1 || memcmp(s, kPrefix, sizeof(kPrefix) - 1) != 0) return false;
  size_t i = sizeof(kPrefix) - 1;
  while (i < n) {
    while (i < n && (s[i] == ' ' || s[i] == '\t')) ++i;
    size_t startw = i;
    while (i < n && s[i] != ' ' && s[i] != '\t') ++i;
    if (i - startw == 2 && s[startw] == 'd' && s[startw + 1] == 'c') return true;
  }
  return false;
}

void SmapsScanner::Line(const char* s, size_t n) {
  uintptr_t a;
  uintptr_t b;
  if (ParseSmapsHeader(s, n, &a, &b)) {
    ++vma_count_;
    have_vma_ = true;
    cur_.start = a;
    cur_.end = b;
    return;
  }
  if (have_vma_ && n >= 8 && memcmp(s, "VmFlags:", 8) == 0) {
    if (VmFlagsHasDontCopy(s, n)) {
      ++dontfork_count_;
      if (stored_ < cap_) out_[stored_++] = cur_;
    }
    have_vma_ = false;
  }
}

void SmapsScanner::Feed(const char* data, size_t n) {
  // Line by line with memchr; only a line's beginning matters (long paths are cut).
  while (n > 0) {
    const char* nl = static_cast<const char*>(memchr(data, '\n', n));
    size_t len = nl != nullptr ? static_cast<size_t>(nl - data) : n;
    size_t room = sizeof(line_) - line_len_;
    size_t take = len < room ? len : room;
    memcpy(line_ + line_len_, data, take);
    line_len_ += take;
    if (nl == nullptr) return;
    Line(line_, line_len_);
    line_len_ = 0;
    data = nl + 1;
    n -= len + 1;
  }
}

void SmapsScanner::Finish() {
  if (line_len_ > 0) Line(line_, line_len_);
  line_len_ = 0;
}

bool ReadDontforkVmas(Vma* out, int cap, int* stored, int* dontfork_count, int* vma_count) {
  int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  SmapsScanner scanner(out, cap);
  char buf[8192];
  for (;;) {
    ssize_t n = ReadNoEintr(fd, buf, sizeof(buf));
    if (n <= 0) break;
    scanner.Feed(buf, static_cast<size_t>(n));
  }
  close(fd);
  scanner.Finish();
  *stored = scanner.stored();
  *dontfork_count = scanner.dontfork_count();
  *vma_count = scanner.vma_count();
  return true;
}

int ReadThreadCount() {
  char buf[4096];
  if (ReadSmallFile("/proc/self/status", buf, sizeof(buf)) < 0) return -1;
  const char* p = strstr(buf, "\nThreads:");
  if (p == nullptr) return -1;
  p += 9;
  while (*p == ' ' || *p == '\t') ++p;
  int v = 0;
  bool any = false;
  while (*p >= '0' && *p <= '9') {
    v = v * 10 + (*p++ - '0');
    any = true;
  }
  return any ? v : -1;
}

long ReadMaxMapCount() {
  char buf[64];
  if (ReadSmallFile("/proc/sys/vm/max_map_count", buf, sizeof(buf)) <= 0) return -1;
  long v = 0;
  bool any = false;
  for (const char* p = buf; *p >= '0' && *p <= '9'; ++p) {
    v = v * 10 + (*p - '0');
    any = true;
  }
  return any ? v : -1;
}

int CountMaps() {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[8192];
  int lines = 0;
  for (;;) {
    ssize_t n = ReadNoEintr(fd, buf, sizeof(buf));
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) lines += buf[i] == '\n';
  }
  close(fd);
  return lines;
}

int RdmaCoreFromLibName(const char* name) {
  // libibverbs.so.1.<ABI>.<rdma-core>.0 (rdma-core's CMake: 1.${PABI}.${PACKAGE_VERSION}).
  const char* p = strstr(name, "libibverbs.so.1.");
  if (p == nullptr) return -1;
  p += 16;
  while (*p >= '0' && *p <= '9') ++p;
  if (*p != '.') return -1;
  ++p;
  if (*p < '0' || *p > '9') return -1;
  int v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
  return v;
}

int RdmaCoreVersionFromMaps() {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  // Lines are read whole into `line` (a path longer than it is skipped).
  char buf[4096];
  char line[512];
  size_t used = 0;
  int version = -1;
  while (version < 0) {
    ssize_t n = ReadNoEintr(fd, buf, sizeof(buf));
    if (n <= 0) break;
    for (ssize_t i = 0; i < n && version < 0; ++i) {
      if (buf[i] != '\n') {
        if (used < sizeof(line) - 1) line[used++] = buf[i];
        continue;
      }
      line[used] = '\0';
      used = 0;
      version = RdmaCoreFromLibName(line);
    }
  }
  close(fd);
  return version;
}

KernelCof CofFromRelease(const char* release) {
  if (release == nullptr) return KernelCof::kUnknown;
  int major = 0;
  int minor = 0;
  const char* p = release;
  if (*p < '0' || *p > '9') return KernelCof::kUnknown;
  while (*p >= '0' && *p <= '9') major = major * 10 + (*p++ - '0');
  if (*p != '.') return KernelCof::kUnknown;
  ++p;
  if (*p < '0' || *p > '9') return KernelCof::kUnknown;
  while (*p >= '0' && *p <= '9') minor = minor * 10 + (*p++ - '0');
  // Copy-on-fork for pinned pages: Linux 5.13 (commit 70e806e4e645 "mm: Do early cow for
  // pinned pages during fork() for ptes").
  return (major > 5 || (major == 5 && minor >= 13)) ? KernelCof::kYes : KernelCof::kNo;
}

namespace {

// Asks the RDMA netlink interface (RDMA_NLDEV_CMD_SYS_GET), as rdma-core does. Returns
// kUnknown when the kernel has no RDMA netlink (no rdma modules loaded) or the attribute.
KernelCof CofFromNetlink() {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
  if (fd < 0) return KernelCof::kUnknown;
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  struct {
    nlmsghdr hdr;
    char pad[16];
  } req{};
  req.hdr.nlmsg_len = NLMSG_LENGTH(0);
  req.hdr.nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_SYS_GET);
  req.hdr.nlmsg_flags = NLM_F_REQUEST;
  req.hdr.nlmsg_seq = 1;
  KernelCof result = KernelCof::kUnknown;
  if (sendto(fd, &req, req.hdr.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) <
      0) {
    close(fd);
    return result;
  }
  alignas(nlmsghdr) char buf[8192];
  ssize_t n = recv(fd, buf, sizeof(buf), 0);
  close(fd);
  if (n <= 0) return result;
  auto* h = reinterpret_cast<nlmsghdr*>(buf);
  int len = static_cast<int>(n);
  for (; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
    if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_DONE) break;
    auto* a = reinterpret_cast<nlattr*>(static_cast<char*>(NLMSG_DATA(h)));
    int alen = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(0));
    while (alen >= static_cast<int>(sizeof(nlattr)) && a->nla_len >= sizeof(nlattr) &&
           a->nla_len <= alen) {
      if ((a->nla_type & NLA_TYPE_MASK) == RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK &&
          a->nla_len >= NLA_HDRLEN + 1) {
        uint8_t v = *(reinterpret_cast<uint8_t*>(a) + NLA_HDRLEN);
        result = v != 0 ? KernelCof::kYes : KernelCof::kNo;
      }
      int step = NLA_ALIGN(a->nla_len);
      alen -= step;
      a = reinterpret_cast<nlattr*>(reinterpret_cast<char*>(a) + step);
    }
  }
  return result;
}

std::atomic<int> g_cof_state{0};                    // 0 unasked, 1 asking, 2 cached
KernelCofFact g_cof{KernelCof::kUnknown, nullptr};  // read once g_cof_state is 2

}  // namespace

KernelCofFact CachedKernelCopyOnFork() {
  if (g_cof_state.load(std::memory_order_acquire) == 2) return g_cof;
  return KernelCofFact();
}

KernelCofFact KernelCopyOnFork() {
  if (g_cof_state.load(std::memory_order_acquire) == 2) return g_cof;
  int expected = 0;
  if (!g_cof_state.compare_exchange_strong(expected, 1)) {
    // Another thread is asking: do not wait for it.
    if (g_cof_state.load(std::memory_order_acquire) == 2) return g_cof;
    return KernelCofFact();
  }
  KernelCofFact fact;
  KernelCof nl = CofFromNetlink();
  if (nl != KernelCof::kUnknown) {
    fact.value = nl;
    fact.source = "netlink";
  } else {
    utsname u;
    if (uname(&u) == 0) {
      fact.value = CofFromRelease(u.release);
      if (fact.value != KernelCof::kUnknown) fact.source = "uname";
    }
  }
  g_cof = fact;
  g_cof_state.store(2, std::memory_order_release);
  return g_cof;
}

}  // namespace forkguard
