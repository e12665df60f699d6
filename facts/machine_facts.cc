#include "facts/machine_facts.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <initializer_list>

#include "facts/rdma_netlink.h"

namespace forkguard::facts {
namespace {

ssize_t ReadRetry(int fd, void* buf, size_t n) {
  for (;;) {
    ssize_t r = read(fd, buf, n);
    if (r >= 0 || errno != EINTR) return r;
  }
}

int HexVal(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool StartsWith(const char* s, size_t n, const char* prefix) {
  size_t p = strlen(prefix);
  return n >= p && memcmp(s, prefix, p) == 0;
}

// Calls `line(s, n, ctx)` for each line of `path` (lines longer than 512 bytes are cut).
template <typename F>
bool ForEachLine(const char* path, F&& line) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  char cur[512];
  size_t used = 0;
  bool stop = false;
  while (!stop) {
    ssize_t n = ReadRetry(fd, buf, sizeof(buf));
    if (n <= 0) break;
    for (ssize_t i = 0; i < n && !stop; ++i) {
      if (buf[i] != '\n') {
        if (used < sizeof(cur) - 1) cur[used++] = buf[i];
        continue;
      }
      cur[used] = '\0';
      stop = line(cur, used);
      used = 0;
    }
  }
  if (!stop && used > 0) {
    cur[used] = '\0';
    line(cur, used);
  }
  close(fd);
  return true;
}

}  // namespace

Tri ReportedCopyOnFork(const char** why) {
  const char* dummy = nullptr;
  if (why == nullptr) why = &dummy;
  int fd = OpenRdmaNetlink(1);
  if (fd < 0) {
    *why = "no RDMA netlink (ib_core not loaded)";
    return Tri::kUnknown;
  }
  if (SendRdmaNetlinkRequest(fd, RDMA_NLDEV_CMD_SYS_GET, 0, 1) != 0) {
    close(fd);
    *why = "RDMA netlink did not take the request";
    return Tri::kUnknown;
  }
  alignas(nlmsghdr) char buf[8192];
  ssize_t n = recv(fd, buf, sizeof(buf), 0);
  close(fd);
  if (n <= 0) {
    *why = "RDMA netlink did not answer";
    return Tri::kUnknown;
  }
  Tri result = Tri::kUnknown;
  *why = "the kernel does not report it (no COPY_ON_FORK attribute over RDMA netlink)";
  auto* h = reinterpret_cast<nlmsghdr*>(buf);
  int len = static_cast<int>(n);
  for (; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
    if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_DONE) break;
    // Attributes follow the header directly (no family header for RDMA nldev).
    auto* a = reinterpret_cast<nlattr*>(static_cast<char*>(NLMSG_DATA(h)));
    int alen = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(0));
    while (alen >= static_cast<int>(sizeof(nlattr)) && a->nla_len >= sizeof(nlattr) &&
           a->nla_len <= alen) {
      if ((a->nla_type & NLA_TYPE_MASK) == RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK &&
          a->nla_len >= NLA_HDRLEN + 1) {
        uint8_t v = *(reinterpret_cast<uint8_t*>(a) + NLA_HDRLEN);
        result = v != 0 ? Tri::kYes : Tri::kNo;
        *why = "RDMA netlink";
      }
      int step = NLA_ALIGN(a->nla_len);
      alen -= step;
      a = reinterpret_cast<nlattr*>(reinterpret_cast<char*>(a) + step);
    }
  }
  return result;
}

int RdmaCoreFromLibName(const char* name) {
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

int RdmaCoreFromMaps() {
  int version = -1;
  ForEachLine("/proc/self/maps", [&](const char* s, size_t) {
    version = RdmaCoreFromLibName(s);
    return version >= 0;
  });
  return version;
}

int RdmaCoreInstalled(char* path, size_t cap) {
  if (path != nullptr && cap > 0) path[0] = '\0';
  static const char* const kCandidates[] = {
      "/usr/lib/x86_64-linux-gnu/libibverbs.so.1", "/usr/lib/aarch64-linux-gnu/libibverbs.so.1",
      "/usr/lib64/libibverbs.so.1", "/usr/lib/libibverbs.so.1", "/usr/local/lib/libibverbs.so.1"};
  for (const char* c : kCandidates) {
    char real[PATH_MAX];
    if (realpath(c, real) == nullptr) continue;
    if (path != nullptr && cap > 0) {
      strncpy(path, real, cap - 1);
      path[cap - 1] = '\0';
    }
    return RdmaCoreFromLibName(real);
  }
  return -1;
}

bool ForkSafeFromEnvironment(char* out, size_t cap) {
  for (const char* name : {"RDMAV_FORK_SAFE", "IBV_FORK_SAFE"}) {
    const char* v = getenv(name);
    if (v == nullptr) continue;
    if (out != nullptr && cap > 0) {
      size_t n = strlen(name);
      size_t i = 0;
      for (; i < n && i + 1 < cap; ++i) out[i] = name[i];
      if (i + 1 < cap) out[i++] = '=';
      for (const char* p = v; *p != '\0' && i + 1 < cap; ++p) out[i++] = *p;
      out[i] = '\0';
    }
    return true;
  }
  return false;
}

bool HugepagesSafeFromEnvironment() { return getenv("RDMAV_HUGEPAGES_SAFE") != nullptr; }

MemoryKind SmapsVma::Kind() const {
  if (shared) return MemoryKind::kShared;
  if (hugetlb) return MemoryKind::kHugetlb;
  if (anon_huge) return MemoryKind::kThp;
  if (file_backed) return MemoryKind::kPrivateFile;
  return MemoryKind::kAnonymous;
}

bool ParseSmapsHeader(const char* s, size_t n, SmapsVma* out) {
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
  ++i;
  // perms: "rw-p" / "rw-s"
  if (i + 4 > n) return false;
  bool shared = s[i + 3] == 's';
  i += 4;
  // offset, dev, inode
  for (int field = 0; field < 2; ++field) {
    while (i < n && s[i] == ' ') ++i;
    while (i < n && s[i] != ' ') ++i;
  }
  while (i < n && s[i] == ' ') ++i;
  bool inode = false;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; ++i) inode = inode || s[i] != '0';
  *out = SmapsVma();
  out->start = a;
  out->end = b;
  out->shared = shared;
  out->file_backed = inode;
  return true;
}

bool VmFlagsHas(const char* s, size_t n, const char* flag) {
  static const char kPrefix[] = "VmFlags:";
  if (!StartsWith(s, n, kPrefix)) return false;
  size_t i = sizeof(kPrefix) - 1;
  while (i < n) {
    while (i < n && (s[i] == ' ' || s[i] == '\t')) ++i;
    size_t w = i;
    while (i < n && s[i] != ' ' && s[i] != '\t') ++i;
    if (i - w == 2 && s[w] == flag[0] && s[w + 1] == flag[1]) return true;
  }
  return false;
}

bool ApplySmapsAttribute(const char* s, size_t n, SmapsVma* vma) {
  if (StartsWith(s, n, "AnonHugePages:")) {
    for (size_t i = 14; i < n; ++i) {
      if (s[i] >= '1' && s[i] <= '9') {
        vma->anon_huge = true;
        break;
      }
      if (s[i] != ' ' && s[i] != '0') break;
    }
    return false;
  }
  if (StartsWith(s, n, "KernelPageSize:")) {
    uint64_t kb = 0;
    for (size_t i = 15; i < n && kb < (uint64_t{1} << 40); ++i) {
      if (s[i] == ' ') continue;
      if (s[i] < '0' || s[i] > '9') break;
      kb = kb * 10 + static_cast<uint64_t>(s[i] - '0');
    }
    vma->page_size = kb * 1024;
    return false;
  }
  if (StartsWith(s, n, "VmFlags:")) {
    vma->hugetlb = VmFlagsHas(s, n, "ht");
    vma->dontfork = VmFlagsHas(s, n, "dc");
    return true;
  }
  return false;
}

MemoryKind KindOfRange(uintptr_t addr, size_t len) {
  MemoryKind kind = MemoryKind::kUnknown;
  SmapsVma cur;
  bool in = false;
  uintptr_t end = addr + len;
  ForEachLine("/proc/self/smaps", [&](const char* s, size_t n) {
    SmapsVma h;
    if (ParseSmapsHeader(s, n, &h)) {
      cur = h;
      in = addr < h.end && h.start < end;
      return false;
    }
    if (in && ApplySmapsAttribute(s, n, &cur)) {
      kind = cur.Kind();
      return true;
    }
    return false;
  });
  return kind;
}

bool BootId(char* out, size_t cap) {
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ReadRetry(fd, out, cap - 1);
  close(fd);
  if (n <= 0) return false;
  size_t len = static_cast<size_t>(n);
  while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' ')) --len;
  out[len] = '\0';
  for (size_t i = 0; i < len; ++i) {
    char c = out[i];
    if (!(HexVal(c) >= 0 || c == '-')) return false;
  }
  return len > 0;
}

}  // namespace forkguard::facts
