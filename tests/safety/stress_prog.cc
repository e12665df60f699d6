// stress_prog: the workload of the issue-8 concurrency and log-integrity tests,
// run under libforkguard.so (tests/safety/*_test.cc). Linked against libibverbs:
// the stub on the host (LD_LIBRARY_PATH), rxe0 in the guest.
//
//   stress_prog stress FORKS_PER_THREAD DEV
//     Three phases, 16 forking threads each (every child _exit(0)s at once):
//       clean:  no RDMA resource exists yet
//       pinned: a context, a PD and one "pinned" 64 KiB MR stay live for the whole
//               phase while 4 threads register/deregister their own buffers
//       after:  everything deregistered, deallocated and closed again
//     stdout: "pinned ADDR LEN", then one "fork PHASE TID CHILD" line per fork, "done".
//   stress_prog spam THREADS ITERS PAIRS DEV [TALLY]
//     Event-log volume: ibv_fork_init, open DEV; THREADS threads each do ITERS x (alloc PD, reg 4
//     KiB, dereg, dealloc PD); then PAIRS x (alloc PD, dealloc PD) on the main thread; close.
//     With TALLY (a file): thread t stores how many of its ibv_reg_mr calls have returned in
//     the t-th 64-bit word of TALLY (shared mapping: it survives a SIGKILL).
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "rdma/open_device.h"

namespace {

using forkguard::rdma::OpenDeviceAndPd;
using forkguard::rdma::OpenedDevice;

constexpr int kForkThreads = 16;
constexpr int kRegThreads = 4;

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "stress_prog: %s failed: %s\n", what, strerror(errno));
  exit(3);
}

struct ForkRecord {
  const char* phase;
  long tid;
  pid_t child;
};

// The device `dev` ("-": the first one) and a protection domain on it.
OpenedDevice Open(const char* dev) {
  return OpenDeviceAndPd(strcmp(dev, "-") == 0 ? nullptr : dev, Die);
}

void* Pages(size_t len) {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) Die("mmap");
  memset(p, 7, len);
  return p;
}

// 16 threads x n forks; records go to `out` (preallocated, one slot per fork).
void ForkPhase(const char* phase, int n, std::vector<ForkRecord>* out) {
  out->assign(static_cast<size_t>(kForkThreads) * n, ForkRecord{phase, 0, 0});
  std::atomic<bool> go{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kForkThreads; ++t) {
    threads.emplace_back([&, t] {
      long tid = syscall(SYS_gettid);
      while (!go.load()) sched_yield();
      for (int i = 0; i < n; ++i) {
        pid_t p = fork();
        if (p == 0) _exit(0);
        if (p < 0) {
          failures.fetch_add(1);
          continue;
        }
        int st = 0;
        if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failures++;
        (*out)[static_cast<size_t>(t) * n + i] = ForkRecord{phase, tid, p};
      }
    });
  }
  go.store(true);
  for (auto& th : threads) th.join();
  if (failures.load() != 0) {
    fprintf(stderr, "stress_prog: %d forks failed or children did not exit 0\n", failures.load());
    exit(4);
  }
}

int Stress(int n, const char* dev) {
  std::vector<ForkRecord> clean, pinned, after;
  ForkPhase("clean", n, &clean);

  OpenedDevice r = Open(dev);
  constexpr size_t kPinnedLen = 64 * 1024;
  void* pinned_buf = Pages(kPinnedLen);
  ibv_mr* pinned_mr = ibv_reg_mr(r.pd, pinned_buf, kPinnedLen, IBV_ACCESS_LOCAL_WRITE);
  if (pinned_mr == nullptr) Die("ibv_reg_mr (pinned)");
  std::atomic<bool> stop{false};
  std::atomic<long> regs{0};
  std::vector<std::thread> regs_threads;
  for (int t = 0; t < kRegThreads; ++t) {
    regs_threads.emplace_back([&, t] {
      size_t len = 4096u << t;  // 4, 8, 16, 32 KiB
      void* buf = Pages(len);
      while (!stop.load()) {
        ibv_mr* mr = ibv_reg_mr(r.pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
        if (mr == nullptr) Die("ibv_reg_mr");
        if (ibv_dereg_mr(mr) != 0) Die("ibv_dereg_mr");
        regs.fetch_add(1);
      }
      munmap(buf, len);
    });
  }
  // Registration churn is under way before the first fork of the phase.
  while (regs.load() < kRegThreads) sched_yield();
  ForkPhase("pinned", n, &pinned);
  stop.store(true);
  for (auto& th : regs_threads) th.join();
  if (ibv_dereg_mr(pinned_mr) != 0) Die("ibv_dereg_mr (pinned)");
  if (ibv_dealloc_pd(r.pd) != 0) Die("ibv_dealloc_pd");
  if (ibv_close_device(r.ctx) != 0) Die("ibv_close_device");

  ForkPhase("after", n, &after);

  printf("pinned 0x%lx %zu\n", reinterpret_cast<unsigned long>(pinned_buf), kPinnedLen);
  printf("registrations %ld\n", regs.load());
  for (auto* v : {&clean, &pinned, &after}) {
    for (const ForkRecord& f : *v) printf("fork %s %ld %d\n", f.phase, f.tid, f.child);
  }
  printf("done\n");
  return 0;
}

int Spam(int threads, int iters, int pairs, const char* dev, const char* tally_path) {
  if (ibv_fork_init() != 0) Die("ibv_fork_init");
  std::atomic<uint64_t>* tally = nullptr;
  if (tally_path != nullptr) {
    int fd = open(tally_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    size_t bytes = sizeof(uint64_t) * static_cast<size_t>(threads);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) Die("tally file");
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) Die("mmap tally");
    close(fd);
    tally = static_cast<std::atomic<uint64_t>*>(p);
  }
  OpenedDevice r = Open(dev);
  if (ibv_dealloc_pd(r.pd) != 0) Die("ibv_dealloc_pd");
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      void* buf = Pages(4096);
      for (int i = 0; i < iters; ++i) {
        ibv_pd* pd = ibv_alloc_pd(r.ctx);
        if (pd == nullptr) Die("ibv_alloc_pd");
        ibv_mr* mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
        if (mr == nullptr) Die("ibv_reg_mr");
        if (tally != nullptr) tally[t].store(static_cast<uint64_t>(i) + 1);
        if (ibv_dereg_mr(mr) != 0) Die("ibv_dereg_mr");
        if (ibv_dealloc_pd(pd) != 0) Die("ibv_dealloc_pd");
      }
    });
  }
  for (auto& t : ts) t.join();
  for (int i = 0; i < pairs; ++i) {
    ibv_pd* pd = ibv_alloc_pd(r.ctx);
    if (pd == nullptr || ibv_dealloc_pd(pd) != 0) Die("ibv_alloc_pd/dealloc_pd");
  }
  if (ibv_close_device(r.ctx) != 0) Die("ibv_close_device");
  printf("done\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOFBF, 1 << 20);
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "stress" && argc == 4) return Stress(atoi(argv[2]), argv[3]);
  if (mode == "spam" && (argc == 6 || argc == 7))
    return Spam(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argv[5],
                argc == 7 ? argv[6] : nullptr);
  fprintf(stderr, "usage: see the comment at the top of tests/safety/stress_prog.cc\n");
  return 2;
}
