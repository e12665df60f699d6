// fork_truth: what a fork really does to one registered buffer, measured with real
// RDMA operations on one device (rxe0 in the Soft-RoCE guest). One run is one cell of
// the fork matrix (scripts/lanes/matrix-lane): a memory kind, with fork support as the
// caller's environment (RDMAV_FORK_SAFE, RDMAV_HUGEPAGES_SAFE) and --fork-init say.
// --kind takes a list: the kinds are measured one after the other in this process (fork
// support is per process), each with its own buffer, MRs and child, deregistered and
// unmapped before the next one (so that a fork sees one kind's registration only).
//
// One kind's run:
//   1. opens the device, two RC QPs connected to each other over the port (loopback),
//      maps the buffer of the kind, fills it with pattern A and registers it (a refused
//      registration is an outcome: the run goes on with the fork and the child's touch);
//   2. checks the measurement itself: an RDMA WRITE from the buffer's MR into a second
//      MR delivers pattern A;
//   3. forks a child that stays alive and does not touch the buffer yet;
//   4. the parent writes pattern B over the buffer; an RDMA WRITE from the buffer's MR
//      into the second MR: does the device read B (fresh) or A (stale)?
//   5. the second MR, filled with C, is RDMA-WRITten into the buffer's MR: does the
//      parent read C (seen) or not (lost)?
//   6. the child reads every page of the buffer: does it live or die (SIGSEGV)?
// A fork that fails (forkguard's error mode) skips 3 and 6 and measures 4-5 alone.
//
// Output: one JSON line per kind on stdout, printed when that kind was measured. Exit 0
// when every kind was measured; 2 when one could not be (the reason on stderr as
// "fork_truth: error: ...", the kinds after it not run): never a guess.
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/support/rc_qp.h"

namespace {

constexpr size_t kHuge = 2u << 20;
constexpr size_t kSmall = 64u << 10;

[[noreturn]] void Fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fork_truth: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

void Usage(FILE* out) {
  fputs(
      "usage: fork_truth --kind=KIND[,KIND...] [--fork-init]\n"
      "  anon     64 KiB of anonymous small pages (MADV_NOHUGEPAGE)\n"
      "  thp      2 MiB anonymous, 2 MiB aligned, MADV_HUGEPAGE (checked in smaps)\n"
      "  hugetlb  2 MiB MAP_HUGETLB (needs /proc/sys/vm/nr_hugepages)\n"
      "  file     64 KiB MAP_PRIVATE PROT_READ file mapping, registered read-only\n"
      "  shared   64 KiB MAP_SHARED anonymous\n"
      "  --fork-init  ibv_fork_init() before registering (RDMAV_FORK_SAFE and\n"
      "               RDMAV_HUGEPAGES_SAFE come from the environment)\n"
      "Device: $RXE_DEV (else the first), GID index $RXE_GID_INDEX (default 1).\n"
      "Prints one JSON line per kind; exit 2 when a kind could not be measured.\n",
      out);
}

struct Rdma {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qa = nullptr;  // posts from the buffer's MR
  ibv_qp* qb = nullptr;  // posts from the second MR
};

ibv_context* OpenDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) Fail("no RDMA device (ibv_get_device_list: %d)", n);
  const char* want = getenv("RXE_DEV");
  ibv_device* dev = nullptr;
  for (int i = 0; i < n; ++i) {
    if (want == nullptr || strcmp(ibv_get_device_name(list[i]), want) == 0) {
      dev = list[i];
      break;
    }
  }
  if (dev == nullptr) Fail("device %s not found", want);
  ibv_context* ctx = ibv_open_device(dev);
  if (ctx == nullptr) Fail("ibv_open_device(%s): %s", ibv_get_device_name(dev), strerror(errno));
  ibv_free_device_list(list);
  return ctx;
}

ibv_qp* MakeQp(const Rdma& r) {
  ibv_qp_init_attr a = {};
  a.send_cq = r.cq;
  a.recv_cq = r.cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 4;
  a.cap.max_recv_wr = 1;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(r.pd, &a);
  if (qp == nullptr) Fail("ibv_create_qp: %s", strerror(errno));
  return qp;
}

void Connect(ibv_qp* qp, uint32_t dest, const ibv_gid& gid, int gid_index) {
  constexpr int kAccess = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (const char* step = forkguard::test_support::ConnectRcQp(qp, dest, gid, gid_index, kAccess))
    Fail("%s: %s", step, strerror(errno));
}

Rdma Setup() {
  Rdma r;
  r.ctx = OpenDevice();
  r.pd = ibv_alloc_pd(r.ctx);
  if (r.pd == nullptr) Fail("ibv_alloc_pd: %s", strerror(errno));
  r.cq = ibv_create_cq(r.ctx, 16, nullptr, nullptr, 0);
  if (r.cq == nullptr) Fail("ibv_create_cq: %s", strerror(errno));
  r.qa = MakeQp(r);
  r.qb = MakeQp(r);
  const char* gi = getenv("RXE_GID_INDEX");
  int gid_index = gi != nullptr ? atoi(gi) : 1;
  ibv_gid gid;
  if (ibv_query_gid(r.ctx, 1, gid_index, &gid))
    Fail("ibv_query_gid(%d): %s", gid_index, strerror(errno));
  Connect(r.qa, r.qb->qp_num, gid, gid_index);
  Connect(r.qb, r.qa->qp_num, gid, gid_index);
  return r;
}

// One RDMA WRITE of len bytes from (laddr, lkey) on qp to (raddr, rkey), waited for.
void Write(const Rdma& r, ibv_qp* qp, void* laddr, uint32_t lkey, void* raddr, uint32_t rkey,
           size_t len) {
  ibv_sge sge = {};
  sge.addr = reinterpret_cast<uintptr_t>(laddr);
  sge.length = static_cast<uint32_t>(len);
  sge.lkey = lkey;
  ibv_send_wr wr = {};
  wr.wr_id = 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(raddr);
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (int e = ibv_post_send(qp, &wr, &bad)) Fail("ibv_post_send: %s", strerror(e));
  timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ibv_wc wc;
  for (;;) {
    int n = ibv_poll_cq(r.cq, 1, &wc);
    if (n < 0) Fail("ibv_poll_cq: %d", n);
    if (n == 1) break;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec - t0.tv_sec > 20) Fail("RDMA WRITE did not complete in 20 s");
  }
  if (wc.status != IBV_WC_SUCCESS)
    Fail("RDMA WRITE completed with %s", ibv_wc_status_str(wc.status));
}

// Does [addr, addr+len) hold the pattern seeded by `seed`? Position-dependent (a page
// mapped twice or a shifted copy is not mistaken for it), one 64-bit word at a time
// (CPU-bound code is several times slower in the TCG guest). Lengths are multiples of 8.
uint64_t PatternWord(uint8_t seed, size_t i) {
  return (seed * 0x0101010101010101ull) ^ (i * 0x9E3779B97F4A7C15ull);
}
void Fill(uint8_t* p, size_t len, uint8_t seed) {
  uint64_t* w = reinterpret_cast<uint64_t*>(p);
  for (size_t i = 0; i < len / 8; ++i) w[i] = PatternWord(seed, i);
}
bool Holds(const uint8_t* p, size_t len, uint8_t seed) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
  for (size_t i = 0; i < len / 8; ++i)
    if (w[i] != PatternWord(seed, i)) return false;
  return true;
}

// The smaps entry of the mapping that holds addr: its AnonHugePages (kB) and whether
// its VmFlags carry "dc" (MADV_DONTFORK).
void Smaps(const void* addr, long* anon_huge_kb, bool* dontfork) {
  *anon_huge_kb = -1;
  *dontfork = false;
  FILE* f = fopen("/proc/self/smaps", "re");
  if (f == nullptr) Fail("/proc/self/smaps: %s", strerror(errno));
  char line[512];
  bool in = false;
  uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  while (fgets(line, sizeof line, f) != nullptr) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      in = lo <= a && a < hi;
      continue;
    }
    if (!in) continue;
    long kb;
    if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) *anon_huge_kb = kb;
    if (strncmp(line, "VmFlags:", 8) == 0) *dontfork = strstr(line, " dc") != nullptr;
  }
  fclose(f);
}

std::string LoadedLibibverbs() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name != nullptr && strstr(info->dlpi_name, "/libibverbs.so") != nullptr) {
          char real[PATH_MAX];
          if (realpath(info->dlpi_name, real) != nullptr) *static_cast<std::string*>(data) = real;
        }
        return 0;
      },
      &found);
  return found;
}

struct Buffer {
  uint8_t* p = nullptr;
  size_t len = 0;
  void* map = nullptr;  // the whole mapping (thp maps twice the length to align)
  size_t map_len = 0;
  bool writable = true;
  long anon_huge_kb = -1;
  // The buffer is all of mapping `m` (len bytes).
  void UseWholeMapping(void* m) {
    p = static_cast<uint8_t*>(m);
    map = m;
    map_len = len;
  }
};

Buffer MapKind(const std::string& kind) {
  Buffer b;
  if (kind == "anon" || kind == "shared") {
    b.len = kSmall;
    int flags = MAP_ANONYMOUS | (kind == "shared" ? MAP_SHARED : MAP_PRIVATE);
    void* m = mmap(nullptr, b.len, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (m == MAP_FAILED) Fail("mmap %s: %s", kind.c_str(), strerror(errno));
    if (kind == "anon" && madvise(m, b.len, MADV_NOHUGEPAGE) != 0)
      Fail("MADV_NOHUGEPAGE: %s", strerror(errno));
    b.UseWholeMapping(m);
  } else if (kind == "thp") {
    b.len = kHuge;
    void* m = mmap(nullptr, 2 * kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) Fail("mmap thp: %s", strerror(errno));
    b.map = m;
    b.map_len = 2 * kHuge;
    uintptr_t a = (reinterpret_cast<uintptr_t>(m) + kHuge - 1) & ~(kHuge - 1);
    b.p = reinterpret_cast<uint8_t*>(a);
    if (madvise(b.p, b.len, MADV_HUGEPAGE) != 0) Fail("MADV_HUGEPAGE: %s", strerror(errno));
  } else if (kind == "hugetlb") {
    b.len = kHuge;
    void* m = mmap(nullptr, b.len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (m == MAP_FAILED)
      Fail("mmap MAP_HUGETLB: %s (reserve pages: /proc/sys/vm/nr_hugepages)", strerror(errno));
    b.UseWholeMapping(m);
  } else if (kind == "file") {
    b.len = kSmall;
    b.writable = false;
    const char* dir = getenv("TMPDIR");
    std::string path =
        std::string(dir != nullptr && *dir != 0 ? dir : "/tmp") + "/fork_truth.XXXXXX";
    int fd = mkstemp(path.data());
    if (fd < 0) Fail("mkstemp %s: %s", path.c_str(), strerror(errno));
    unlink(path.c_str());
    uint8_t* tmp = static_cast<uint8_t*>(malloc(b.len));
    Fill(tmp, b.len, 0xA1);
    if (write(fd, tmp, b.len) != static_cast<ssize_t>(b.len))
      Fail("write %s: %s", path.c_str(), strerror(errno));
    free(tmp);
    void* m = mmap(nullptr, b.len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) Fail("mmap file: %s", strerror(errno));
    close(fd);
    b.UseWholeMapping(m);
    return b;
  } else {
    Fail("unknown --kind=%s", kind.c_str());
  }
  Fill(b.p, b.len, 0xA1);
  if (kind == "thp") {
    bool dc;
    Smaps(b.p, &b.anon_huge_kb, &dc);
    if (b.anon_huge_kb < static_cast<long>(kHuge >> 10))
      Fail("the thp buffer is not backed by a huge page (AnonHugePages %ld kB)", b.anon_huge_kb);
  }
  return b;
}

const char* ChildOutcome(int status) {
  static char buf[32];
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) return "segv";
  if (WIFSIGNALED(status)) {
    snprintf(buf, sizeof buf, "signal %d", WTERMSIG(status));
    return buf;
  }
  snprintf(buf, sizeof buf, "exit %d", WEXITSTATUS(status));
  return buf;
}

// One kind, measured and printed; everything it made is released before it returns.
void Measure(const Rdma& r, const std::string& kind, bool fork_init, int fork_init_rc) {
  Buffer b = MapKind(kind);

  // The second MR: where the device delivers what it read, and what it writes from.
  uint8_t* peer = static_cast<uint8_t*>(
      mmap(nullptr, b.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (peer == MAP_FAILED) Fail("mmap peer: %s", strerror(errno));
  memset(peer, 0, b.len);
  ibv_mr* pmr = ibv_reg_mr(
      r.pd, peer, b.len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (pmr == nullptr) Fail("ibv_reg_mr(second MR): %s", strerror(errno));

  int access =
      b.writable ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0;
  errno = 0;
  ibv_mr* mr = ibv_reg_mr(r.pd, b.p, b.len, access);
  int reg_errno = mr == nullptr ? errno : 0;
  long huge_kb;
  bool dontfork;
  Smaps(b.p, &huge_kb, &dontfork);

  // The measurement works before any fork: the device reads pattern A.
  if (mr != nullptr) {
    Write(r, r.qa, b.p, mr->lkey, peer, pmr->rkey, b.len);
    if (!Holds(peer, b.len, 0xA1))
      Fail("before the fork the device did not read the buffer's data");
  }

  int cmd[2], ack[2];
  if (pipe2(cmd, O_CLOEXEC) != 0 || pipe2(ack, O_CLOEXEC) != 0) Fail("pipe: %s", strerror(errno));
  fflush(stdout);
  fflush(stderr);
  errno = 0;
  pid_t child = fork();
  int fork_errno = errno;
  if (child == 0) {
    close(cmd[1]);
    close(ack[0]);
    char c;
    while (read(cmd[0], &c, 1) == 1) {
      if (c == 't') {
        // Touch: read every page (a read never breaks copy-on-write sharing).
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < b.len; i += 4096) sum = static_cast<uint8_t>(sum + b.p[i]);
        (void)sum;
        if (write(ack[1], "k", 1) != 1) _exit(3);
      } else {
        break;
      }
    }
    _exit(0);
  }
  close(cmd[0]);
  close(ack[1]);

  // The parent writes, then the device reads the buffer through its MR.
  const char* device_reads = "n/a";
  const char* device_writes = "n/a";
  if (mr != nullptr) {
    if (b.writable) Fill(b.p, b.len, 0xB2);
    memset(peer, 0, b.len);
    Write(r, r.qa, b.p, mr->lkey, peer, pmr->rkey, b.len);
    if (memcmp(peer, b.p, b.len) == 0)
      device_reads = "fresh";
    else if (Holds(peer, b.len, 0xA1))
      device_reads = "stale";
    else
      device_reads = "other";
    if (b.writable) {
      Fill(peer, b.len, 0xC3);
      Write(r, r.qb, peer, pmr->lkey, b.p, mr->rkey, b.len);
      if (Holds(b.p, b.len, 0xC3))
        device_writes = "seen";
      else if (Holds(b.p, b.len, 0xB2))
        device_writes = "lost";
      else
        device_writes = "other";
    }
  }

  // The child touches the buffer: does it live?
  std::string child_outcome = "none";
  if (child > 0) {
    char c = 0;
    bool alive = false;
    if (write(cmd[1], "t", 1) == 1) {
      pollfd p = {ack[0], POLLIN, 0};
      if (poll(&p, 1, 20000) == 1 && read(ack[0], &c, 1) == 1 && c == 'k') alive = true;
    }
    if (alive) {
      child_outcome = "alive";
      close(cmd[1]);
      int st;
      if (waitpid(child, &st, 0) != child) Fail("waitpid: %s", strerror(errno));
    } else {
      close(cmd[1]);
      int st = 0;
      pid_t w = 0;
      for (int i = 0; i < 200 && (w = waitpid(child, &st, WNOHANG)) == 0; ++i) usleep(100000);
      if (w != child) {
        kill(child, SIGKILL);
        waitpid(child, &st, 0);
        Fail("the child neither answered nor died in 20 s");
      }
      child_outcome = ChildOutcome(st);
    }
  }

  printf(
      "{\"kind\":\"%s\",\"pid\":%d,\"fork_init\":%s,\"fork_init_rc\":%d,\"libibverbs\":\"%s\","
      "\"len\":%zu,"
      "\"reg\":\"%s\",\"reg_errno\":%d,\"dontfork\":%s,\"anon_huge_kb\":%ld,"
      "\"fork\":\"%s\",\"fork_errno\":%d,\"device_reads\":\"%s\",\"device_writes\":\"%s\","
      "\"child\":\"%s\"}\n",
      kind.c_str(), static_cast<int>(getpid()), fork_init ? "true" : "false", fork_init_rc,
      LoadedLibibverbs().c_str(), b.len, mr != nullptr ? "ok" : "refused", reg_errno,
      dontfork ? "true" : "false", huge_kb, child > 0 ? "ok" : "refused",
      child > 0 ? 0 : fork_errno, device_reads, device_writes, child_outcome.c_str());
  fflush(stdout);
  if (child <= 0) close(cmd[1]);
  close(ack[0]);
  if (mr != nullptr && ibv_dereg_mr(mr) != 0) Fail("ibv_dereg_mr: %s", strerror(errno));
  if (ibv_dereg_mr(pmr) != 0) Fail("ibv_dereg_mr(second MR): %s", strerror(errno));
  munmap(peer, b.len);
  munmap(b.map, b.map_len);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> kinds;
  bool fork_init = false;
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--kind=", 7) == 0) {
      std::string list = argv[i] + 7;
      size_t start = 0;
      while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        if (comma > start) kinds.push_back(list.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (strcmp(argv[i], "--fork-init") == 0) {
      fork_init = true;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      Usage(stdout);
      return 0;
    } else {
      Usage(stderr);
      return 2;
    }
  }
  if (kinds.empty()) {
    Usage(stderr);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);

  Rdma r = Setup();
  int fork_init_rc = 0;
  if (fork_init) fork_init_rc = ibv_fork_init();
  for (const std::string& kind : kinds) Measure(r, kind, fork_init, fork_init_rc);
  ibv_destroy_qp(r.qa);
  ibv_destroy_qp(r.qb);
  ibv_destroy_cq(r.cq);
  ibv_dealloc_pd(r.pd);
  ibv_close_device(r.ctx);
  return 0;
}
