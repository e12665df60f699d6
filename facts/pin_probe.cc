#include "facts/pin_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "facts/machine_facts.h"

namespace forkguard::facts {
namespace {

constexpr size_t kHuge = 2u << 20;

// A minimal io_uring: one submission at a time.
struct Ring {
  int fd = -1;
  void* sq = MAP_FAILED;
  size_t sq_len = 0;
  void* cq = MAP_FAILED;
  size_t cq_len = 0;
  io_uring_sqe* sqes = static_cast<io_uring_sqe*>(MAP_FAILED);
  size_t sqes_len = 0;
  io_uring_params p{};

  // 0 or -errno.
  int Setup() {
    long r = syscall(__NR_io_uring_setup, 4, &p);
    if (r < 0) return -errno;
    fd = static_cast<int>(r);
    sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    cq_len = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
    if ((p.features & IORING_FEAT_SINGLE_MMAP) != 0 && cq_len > sq_len) sq_len = cq_len;
    sq = mmap(nullptr, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
              IORING_OFF_SQ_RING);
    if (sq == MAP_FAILED) return -errno;
    if ((p.features & IORING_FEAT_SINGLE_MMAP) != 0) {
      cq = sq;
    } else {
      cq = mmap(nullptr, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                IORING_OFF_CQ_RING);
      if (cq == MAP_FAILED) return -errno;
    }
    sqes_len = p.sq_entries * sizeof(io_uring_sqe);
    void* s = mmap(nullptr, sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                   IORING_OFF_SQES);
    if (s == MAP_FAILED) return -errno;
    sqes = static_cast<io_uring_sqe*>(s);
    return 0;
  }

  unsigned* SqField(unsigned off) {
    return reinterpret_cast<unsigned*>(static_cast<char*>(sq) + off);
  }
  unsigned* CqField(unsigned off) {
    return reinterpret_cast<unsigned*>(static_cast<char*>(cq) + off);
  }

  // Submits one WRITE_FIXED of registered buffer 0 and waits for it: the result (bytes
  // written) or -errno.
  int WriteFixed(int out_fd, void* buf, unsigned len) {
    unsigned mask = *SqField(p.sq_off.ring_mask);
    unsigned tail = __atomic_load_n(SqField(p.sq_off.tail), __ATOMIC_ACQUIRE);
    unsigned idx = tail & mask;
    io_uring_sqe* sqe = &sqes[idx];
    memset(sqe, 0, sizeof(*sqe));
    sqe->opcode = IORING_OP_WRITE_FIXED;
    sqe->fd = out_fd;
    sqe->addr = reinterpret_cast<uint64_t>(buf);
    sqe->len = len;
    sqe->off = 0;
    sqe->buf_index = 0;
    SqField(p.sq_off.array)[idx] = idx;
    __atomic_store_n(SqField(p.sq_off.tail), tail + 1, __ATOMIC_RELEASE);
    // The wait can end before the completion is posted (seen on 5.10 at boot: the probe
    // failed with EAGAIN): wait again, with nothing more to submit (the one entry is
    // consumed once), until it is there.
    unsigned head = 0, ctail = 0;
    unsigned to_submit = 1;
    for (int waits = 0;; ++waits) {
      long r = syscall(__NR_io_uring_enter, fd, to_submit, 1, IORING_ENTER_GETEVENTS, nullptr, 0);
      if (r < 0 && errno != EINTR) return -errno;
      if (r > 0) to_submit = 0;
      head = __atomic_load_n(CqField(p.cq_off.head), __ATOMIC_ACQUIRE);
      ctail = __atomic_load_n(CqField(p.cq_off.tail), __ATOMIC_ACQUIRE);
      if (head != ctail) break;
      if (waits >= 1000) return -EAGAIN;
    }
    unsigned cmask = *CqField(p.cq_off.ring_mask);
    auto* cqes = reinterpret_cast<io_uring_cqe*>(static_cast<char*>(cq) + p.cq_off.cqes);
    int res = cqes[head & cmask].res;
    __atomic_store_n(CqField(p.cq_off.head), head + 1, __ATOMIC_RELEASE);
    return res;
  }

  ~Ring() {
    if (sqes != MAP_FAILED) munmap(sqes, sqes_len);
    if (cq != MAP_FAILED && cq != sq) munmap(cq, cq_len);
    if (sq != MAP_FAILED) munmap(sq, sq_len);
    if (fd >= 0) close(fd);
  }
};

void Unknown(PinProbe* out, MemoryKind kind, ProbeWhy why, int err = 0) {
  int k = static_cast<int>(kind);
  out->fate[k] = PinFate::kUnknown;
  out->why[k] = why;
  out->err[k] = why == ProbeWhy::kFailed ? err : 0;
}

// The memory of one kind, page-filled with 'A'. Null with `why` set when it cannot be had.
struct Buffer {
  void* map = MAP_FAILED;
  size_t map_len = 0;
  char* data = nullptr;
  size_t len = 0;
  ~Buffer() {
    if (map != MAP_FAILED) munmap(map, map_len);
  }
};

long ReadLong(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[32];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  return atol(buf);
}

// Free 2 MiB hugetlb pages not reserved by a mapping.
long FreeHugePages() {
  long free_pages = ReadLong("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
  long reserved = ReadLong("/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages");
  if (free_pages < 0) return -1;
  return free_pages - (reserved > 0 ? reserved : 0);
}

ProbeWhy Allocate(MemoryKind kind, Buffer* b, int* err) {
  switch (kind) {
    case MemoryKind::kAnonymous:
      b->map_len = b->len = 64 << 10;
      b->map =
          mmap(nullptr, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (b->map == MAP_FAILED) break;
      madvise(b->map, b->map_len, MADV_NOHUGEPAGE);
      b->data = static_cast<char*>(b->map);
      memset(b->data, 'A', b->len);
      return KindOfRange(reinterpret_cast<uintptr_t>(b->data), b->len) == MemoryKind::kAnonymous
                 ? ProbeWhy::kNone
                 : ProbeWhy::kNotProbeable;
    case MemoryKind::kThp: {
      b->map_len = 2 * kHuge;
      b->map =
          mmap(nullptr, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (b->map == MAP_FAILED) break;
      uintptr_t start = (reinterpret_cast<uintptr_t>(b->map) + kHuge - 1) & ~(kHuge - 1);
      b->data = reinterpret_cast<char*>(start);
      b->len = kHuge;
      if (madvise(b->data, b->len, MADV_HUGEPAGE) != 0) return ProbeWhy::kNoThp;
      memset(b->data, 'A', b->len);
      return KindOfRange(start, b->len) == MemoryKind::kThp ? ProbeWhy::kNone : ProbeWhy::kNoThp;
    }
    case MemoryKind::kHugetlb:
      b->map_len = b->len = kHuge;
      b->map = mmap(nullptr, b->map_len, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
      if (b->map == MAP_FAILED) return ProbeWhy::kNoHugetlbPages;
      b->data = static_cast<char*>(b->map);
      memset(b->data, 'A', b->len);
      // The parent's write after the fork needs a second page for its copy; without one
      // the kernel takes the page from the child instead and the answer would be wrong.
      if (FreeHugePages() < 1) return ProbeWhy::kNoHugetlbPages;
      return ProbeWhy::kNone;
    default:
      return ProbeWhy::kNotProbeable;
  }
  *err = errno;
  return ProbeWhy::kFailed;
}

ProbeWhy SetupWhy(int err) {
  if (err == ENOSYS) return ProbeWhy::kNoIoUring;
  if (err == EPERM || err == EACCES) return ProbeWhy::kIoUringDisabled;
  if (err == ENOMEM) return ProbeWhy::kMemlock;
  return ProbeWhy::kFailed;
}

}  // namespace

void ProbeKind(MemoryKind kind, PinProbe* out) { ProbeKindForTesting(kind, out, false); }

void ProbeKindForTesting(MemoryKind kind, PinProbe* out, bool discard_instead_of_fork) {
  int k = static_cast<int>(kind);
  int err = 0;
  Buffer b;
  ProbeWhy why = Allocate(kind, &b, &err);
  if (why != ProbeWhy::kNone) return Unknown(out, kind, why, err);
  Ring ring;
  if (int r = ring.Setup(); r < 0) return Unknown(out, kind, SetupWhy(-r), -r);
  iovec iov{b.data, b.len};
  if (syscall(__NR_io_uring_register, ring.fd, IORING_REGISTER_BUFFERS, &iov, 1) != 0) {
    int e = errno;
    if (e == ENOMEM) return Unknown(out, kind, ProbeWhy::kMemlock);
    if (e == EOPNOTSUPP || e == EFAULT) return Unknown(out, kind, ProbeWhy::kNotProbeable);
    return Unknown(out, kind, SetupWhy(e), e);
  }
  int mfd = static_cast<int>(syscall(SYS_memfd_create, "forkguard-pin-probe", MFD_CLOEXEC));
  if (mfd < 0) return Unknown(out, kind, ProbeWhy::kFailed, errno);
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    int e = errno;
    close(mfd);
    return Unknown(out, kind, ProbeWhy::kFailed, e);
  }
  // The child holds the copy-on-write share of the pages until the parent is done: it
  // waits for end-of-file on the pipe and touches nothing.
  pid_t pid = discard_instead_of_fork ? 0 : fork();
  if (discard_instead_of_fork) {
    // The detector's own check: the parent's mapping gets new pages while the pins keep the
    // old ones, as a fork that does not copy pinned pages leaves them.
    close(pipefd[0]);
    madvise(b.data, b.len, MADV_DONTNEED);
    pid = -2;
  } else if (pid < 0) {
    int e = errno;
    close(pipefd[0]);
    close(pipefd[1]);
    close(mfd);
    return Unknown(out, kind, ProbeWhy::kFailed, e);
  }
  if (pid == 0) {
    close(pipefd[1]);
    char c;
    while (read(pipefd[0], &c, 1) < 0 && errno == EINTR) {
    }
    _exit(0);
  }
  if (pid > 0) close(pipefd[0]);
  memset(b.data, 'B', b.len);
  int res = ring.WriteFixed(mfd, b.data, static_cast<unsigned>(b.len));
  close(pipefd[1]);
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (res != static_cast<int>(b.len)) {
    close(mfd);
    return Unknown(out, kind, ProbeWhy::kFailed, res < 0 ? -res : EIO);
  }
  // What the pinned pages held: the parent's new data ('B') or what was there at fork ('A').
  size_t fresh = 0;
  size_t old = 0;
  char chunk[4096];
  for (size_t off = 0; off < b.len; off += sizeof(chunk)) {
    ssize_t n = pread(mfd, chunk, sizeof(chunk), static_cast<off_t>(off));
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      fresh += chunk[i] == 'B';
      old += chunk[i] == 'A';
    }
  }
  close(mfd);
  if (fresh == b.len) {
    out->fate[k] = PinFate::kIntact;
  } else if (old > 0) {
    out->fate[k] = PinFate::kStale;
  } else {
    return Unknown(out, kind, ProbeWhy::kFailed, EIO);
  }
  out->why[k] = ProbeWhy::kNone;
  out->err[k] = 0;
}

PinProbe RunPinProbe() {
  PinProbe p;
  for (MemoryKind k : {MemoryKind::kShared, MemoryKind::kPrivateFile, MemoryKind::kUnknown}) {
    Unknown(&p, k, ProbeWhy::kNotProbeable);
  }
  for (MemoryKind k : {MemoryKind::kAnonymous, MemoryKind::kThp, MemoryKind::kHugetlb}) {
    ProbeKind(k, &p);
  }
  return p;
}

bool PinProbeCacheDir(char* out, size_t cap) {
  return PinProbeCacheDir(out, cap, getauxval(AT_SECURE) != 0);
}

bool PinProbeCacheDir(char* out, size_t cap, bool secure) {
  // Under AT_SECURE the environment is the unprivileged caller's: it names no path here (the
  // system cache, at its fixed path, is read instead).
  if (secure) return false;
  const char* dir = getenv("FORKGUARD_CACHE_DIR");
  int n = -1;
  if (dir != nullptr && dir[0] == '/') {
    n = snprintf(out, cap, "%s", dir);
  } else if (const char* x = getenv("XDG_CACHE_HOME"); x != nullptr && x[0] == '/') {
    n = snprintf(out, cap, "%s/forkguard", x);
  } else if (const char* h = getenv("HOME"); h != nullptr && h[0] == '/') {
    n = snprintf(out, cap, "%s/.cache/forkguard", h);
  }
  return n > 0 && static_cast<size_t>(n) < cap;
}

bool PinProbeCachePath(char* out, size_t cap) {
  return PinProbeCachePath(out, cap, getauxval(AT_SECURE) != 0);
}

bool PinProbeCachePath(char* out, size_t cap, bool secure) {
  char dir[1024];
  char boot[64];
  if (!PinProbeCacheDir(dir, sizeof(dir), secure) || !BootId(boot, sizeof(boot))) return false;
  int n = snprintf(out, cap, "%s/pin-probe-%s", dir, boot);
  return n > 0 && static_cast<size_t>(n) < cap;
}

size_t FormatPinProbe(const PinProbe& p, char* buf, size_t cap) {
  utsname u{};
  if (uname(&u) != 0) strcpy(u.release, "?");
  int n = snprintf(buf, cap, "forkguard pin-probe 1\nkernel %s\n", u.release);
  size_t used = n > 0 ? static_cast<size_t>(n) : 0;
  for (MemoryKind k : {MemoryKind::kAnonymous, MemoryKind::kThp, MemoryKind::kHugetlb}) {
    int i = static_cast<int>(k);
    if (used >= cap) break;
    if (p.fate[i] != PinFate::kUnknown) {
      n = snprintf(buf + used, cap - used, "%s %s\n", MemoryKindName(k), PinFateName(p.fate[i]));
    } else if (p.why[i] == ProbeWhy::kFailed) {
      n = snprintf(buf + used, cap - used, "%s unknown failed %d\n", MemoryKindName(k), p.err[i]);
    } else {
      n = snprintf(buf + used, cap - used, "%s unknown %s\n", MemoryKindName(k),
                   ProbeWhyName(p.why[i]));
    }
    if (n > 0) used += static_cast<size_t>(n);
  }
  return used < cap ? used : cap;
}

bool ParsePinProbe(const char* text, PinProbe* out) {
  static const char kHead[] = "forkguard pin-probe 1\n";
  if (strncmp(text, kHead, sizeof(kHead) - 1) != 0) return false;
  PinProbe p;
  for (MemoryKind k : {MemoryKind::kShared, MemoryKind::kPrivateFile, MemoryKind::kUnknown}) {
    Unknown(&p, k, ProbeWhy::kNotProbeable);
  }
  const char* s = text + sizeof(kHead) - 1;
  while (*s != '\0') {
    const char* nl = strchr(s, '\n');
    size_t len = nl != nullptr ? static_cast<size_t>(nl - s) : strlen(s);
    char line[128];
    if (len < sizeof(line)) {
      memcpy(line, s, len);
      line[len] = '\0';
      char* words[4] = {};
      int w = 0;
      for (char* t = line; *t != '\0' && w < 4;) {
        while (*t == ' ') *t++ = '\0';
        if (*t == '\0') break;
        words[w++] = t;
        while (*t != '\0' && *t != ' ') ++t;
      }
      MemoryKind kind;
      if (w >= 2 && strcmp(words[0], "kernel") != 0 && ParseMemoryKind(words[0], &kind)) {
        int i = static_cast<int>(kind);
        if (strcmp(words[1], "intact") == 0 || strcmp(words[1], "stale") == 0) {
          p.fate[i] = words[1][0] == 'i' ? PinFate::kIntact : PinFate::kStale;
          p.why[i] = ProbeWhy::kNone;
        } else if (strcmp(words[1], "unknown") == 0 && w >= 3) {
          ProbeWhy why;
          if (!ParseProbeWhy(words[2], &why) || why == ProbeWhy::kNone) return false;
          p.fate[i] = PinFate::kUnknown;
          p.why[i] = why;
          p.err[i] = w >= 4 ? atoi(words[3]) : 0;
        } else {
          return false;
        }
      }
    }
    if (nl == nullptr) break;
    s = nl + 1;
  }
  *out = p;
  return true;
}

namespace {

// Reads a cache file opened O_NOFOLLOW|O_NONBLOCK: used only if it is a regular file owned by
// `uid` (or root) that no one else can write, of a cache's size.
bool ReadCacheFd(int fd, uid_t uid, PinProbe* out) {
  struct stat st;
  char text[2048];
  size_t n = 0;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_uid == uid || st.st_uid == 0) &&
            (st.st_mode & (S_IWGRP | S_IWOTH)) == 0 && st.st_size > 0 &&
            static_cast<size_t>(st.st_size) < sizeof(text);
  while (ok && n < sizeof(text) - 1) {
    ssize_t got = read(fd, text + n, sizeof(text) - 1 - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) ok = false;
    if (got <= 0) break;
    n += static_cast<size_t>(got);
  }
  close(fd);
  if (!ok || n == 0) return false;
  text[n] = '\0';
  return ParsePinProbe(text, out);
}

// O_NONBLOCK: a FIFO (or a device) in a cache file's place opens at once and is refused by
// ReadCacheFd, never waited on. O_NOCTTY: a terminal there does not become ours.
constexpr int kCacheOpenFlags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;

}  // namespace

bool ReadUserPinProbeCache(PinProbe* out, bool secure) {
  char path[1200];
  if (!PinProbeCachePath(path, sizeof(path), secure)) return false;
  int fd = open(path, kCacheOpenFlags);
  return fd >= 0 && ReadCacheFd(fd, geteuid(), out);
}

bool SystemPinProbeCachePath(const char* dir, char* out, size_t cap) {
  char boot[64];
  if (!BootId(boot, sizeof(boot))) return false;
  int n = snprintf(out, cap, "%s/pin-probe-%s", dir, boot);
  return n > 0 && static_cast<size_t>(n) < cap;
}

bool ReadSystemPinProbeCache(PinProbe* out, const char* dir) {
  char boot[64];
  char name[128];
  if (!BootId(boot, sizeof(boot))) return false;
  snprintf(name, sizeof(name), "pin-probe-%s", boot);
  // The directory is root's and no one else's to write: nothing in it was put there by a user
  // (a file owned by root could otherwise be moved in from elsewhere, or replaced).
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return false;
  struct stat st;
  bool ok = fstat(dfd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
            (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
  int fd = ok ? openat(dfd, name, kCacheOpenFlags) : -1;
  close(dfd);
  return fd >= 0 && ReadCacheFd(fd, 0, out);
}

void MergePinProbe(const PinProbe* user, const PinProbe* system, PinProbe* out) {
  PinProbe m;
  for (int i = 0; i < kMemoryKinds; ++i) {
    const PinProbe* from = nullptr;
    if (user != nullptr && user->fate[i] != PinFate::kUnknown) {
      from = user;
    } else if (system != nullptr && system->fate[i] != PinFate::kUnknown) {
      from = system;
    } else if (user != nullptr && user->why[i] != ProbeWhy::kNotProbed) {
      from = user;
    } else {
      from = system;
    }
    if (from == nullptr) continue;
    m.fate[i] = from->fate[i];
    m.why[i] = from->why[i];
    m.err[i] = from->err[i];
  }
  *out = m;
}

bool ReadPinProbeCache(PinProbe* out) { return ReadPinProbeCache(out, getauxval(AT_SECURE) != 0); }

bool ReadPinProbeCache(PinProbe* out, bool secure) {
  return ReadPinProbeCache(out, secure, kSystemPinProbeDir, nullptr);
}

bool ReadPinProbeCache(PinProbe* out, bool secure, const char* system_dir, unsigned* from) {
  PinProbe user;
  PinProbe system;
  // Under AT_SECURE the user's cache is not named (PinProbeCacheDir); the system cache is
  // root's under a fixed path, nothing the caller's environment chose.
  bool have_user = ReadUserPinProbeCache(&user, secure);
  bool have_system = system_dir != nullptr && ReadSystemPinProbeCache(&system, system_dir);
  if (from != nullptr) {
    *from = (have_user ? kFromUserCache : 0u) | (have_system ? kFromSystemCache : 0u);
  }
  if (!have_user && !have_system) return false;
  MergePinProbe(have_user ? &user : nullptr, have_system ? &system : nullptr, out);
  return true;
}

bool WritePinProbeCache(const PinProbe& p, char* err, size_t cap) {
  char dir[1024];
  char path[1200];
  if (!PinProbeCacheDir(dir, sizeof(dir)) || !PinProbeCachePath(path, sizeof(path))) {
    snprintf(err, cap,
             "no cache directory (FORKGUARD_CACHE_DIR, XDG_CACHE_HOME, HOME; none under "
             "AT_SECURE) or boot id");
    return false;
  }
  // Every missing component, 0700.
  for (char* s = dir + 1;; ++s) {
    bool end = *s == '\0';
    if (*s == '/' || end) {
      char saved = *s;
      *s = '\0';
      if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, cap, "mkdir %s: %s", dir, strerror(errno));
        return false;
      }
      *s = saved;
    }
    if (end) break;
  }
  char tmp[1300];
  snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, static_cast<int>(getpid()));
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    snprintf(err, cap, "create %s: %s", tmp, strerror(errno));
    return false;
  }
  char text[2048];
  size_t len = FormatPinProbe(p, text, sizeof(text));
  bool ok = write(fd, text, len) == static_cast<ssize_t>(len);
  int e = errno;
  ok = close(fd) == 0 && ok;
  if (ok && rename(tmp, path) == 0) return true;
  if (!ok) errno = e;
  snprintf(err, cap, "write %s: %s", path, strerror(errno));
  unlink(tmp);
  return false;
}

bool ProbeAgain(ProbeWhy w) {
  return w != ProbeWhy::kNone && w != ProbeWhy::kNoIoUring && w != ProbeWhy::kIoUringDisabled &&
         w != ProbeWhy::kNotProbeable;
}

PinProbe PinProbeForThisBoot(bool* probed, unsigned* from, const char* system_dir) {
  PinProbe p;
  if (ReadPinProbeCache(&p, getauxval(AT_SECURE) != 0, system_dir, from)) {
    // A kind left unknown for a reason that can change during a boot (hugetlb pages
    // reserved since, THP turned on, a higher memlock limit, a passing failure) is probed
    // again; io_uring's absence is not.
    bool again = false;
    for (MemoryKind k : {MemoryKind::kAnonymous, MemoryKind::kThp, MemoryKind::kHugetlb}) {
      int i = static_cast<int>(k);
      if (p.fate[i] != PinFate::kUnknown || !ProbeAgain(p.why[i])) continue;
      ProbeKind(k, &p);
      again = true;
    }
    if (probed != nullptr) *probed = again;
    if (again) {
      char err[256];
      WritePinProbeCache(p, err, sizeof(err));
    }
    return p;
  }
  p = RunPinProbe();
  char err[256];
  WritePinProbeCache(p, err, sizeof(err));
  if (probed != nullptr) *probed = true;
  return p;
}

bool WriteSystemPinProbeCache(const PinProbe& p, const char* dir, char* err, size_t cap) {
  // DIR as its parent and its last component: each opened O_NOFOLLOW | O_DIRECTORY, so that
  // no symbolic link planted on the way is followed.
  char parent[1024];
  const char* slash = strrchr(dir, '/');
  const char* base = slash != nullptr ? slash + 1 : nullptr;
  if (dir[0] != '/' || base == nullptr || base[0] == '\0' || strcmp(base, ".") == 0 ||
      strcmp(base, "..") == 0 || static_cast<size_t>(slash - dir) >= sizeof(parent)) {
    snprintf(err, cap, "%s: not an absolute directory path", dir);
    return false;
  }
  size_t plen = slash == dir ? 1 : static_cast<size_t>(slash - dir);
  memcpy(parent, dir, plen);
  parent[plen] = '\0';
  char name[128];
  char tmp[160];
  char boot[64];
  if (!BootId(boot, sizeof(boot))) {
    snprintf(err, cap, "no boot id (/proc/sys/kernel/random/boot_id)");
    return false;
  }
  snprintf(name, sizeof(name), "pin-probe-%s", boot);
  snprintf(tmp, sizeof(tmp), ".%s.%d.tmp", name, static_cast<int>(getpid()));
  int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (pfd < 0) {
    snprintf(err, cap, "open %s: %s", parent, strerror(errno));
    return false;
  }
  if (mkdirat(pfd, base, 0755) != 0 && errno != EEXIST) {
    snprintf(err, cap, "mkdir %s: %s", dir, strerror(errno));
    close(pfd);
    return false;
  }
  int dfd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int e = errno;
  close(pfd);
  if (dfd < 0) {
    snprintf(err, cap, "open %s: %s", dir, strerror(e));
    return false;
  }
  struct stat st;
  if (fstat(dfd, &st) != 0 || st.st_uid != geteuid()) {
    snprintf(err, cap, "%s is owned by uid %u, not by this user (%u): refused", dir,
             static_cast<unsigned>(st.st_uid), static_cast<unsigned>(geteuid()));
    close(dfd);
    return false;
  }
  // Readable by everyone, written by its owner only (whatever the umask made it).
  if ((st.st_mode & 07777) != 0755 && fchmod(dfd, 0755) != 0) {
    snprintf(err, cap, "chmod 0755 %s: %s", dir, strerror(errno));
    close(dfd);
    return false;
  }
  int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    snprintf(err, cap, "create %s/%s: %s", dir, tmp, strerror(errno));
    close(dfd);
    return false;
  }
  char text[2048];
  size_t len = FormatPinProbe(p, text, sizeof(text));
  bool ok = fchmod(fd, 0644) == 0 && write(fd, text, len) == static_cast<ssize_t>(len);
  e = errno;
  ok = close(fd) == 0 && ok;
  if (ok && renameat(dfd, tmp, dfd, name) == 0) {
    close(dfd);
    return true;
  }
  if (!ok) errno = e;
  snprintf(err, cap, "write %s/%s: %s", dir, name, strerror(errno));
  unlinkat(dfd, tmp, 0);
  close(dfd);
  return false;
}

}  // namespace forkguard::facts
