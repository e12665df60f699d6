// shim_bench: one measured operation, repeated; prints the median and p90 in ns.
// bench/shim.sh runs it alternately with and without libforkguard.so preloaded
// and reports ratios. Nothing here knows about the shim.
//
//   shim_bench fork-small N          fork + _exit + waitpid, small process
//   shim_bench fork-256m N           the same with 256 MiB of touched memory
//   shim_bench fork-rdma N DEV       the same with a live context, PD and 4 MiB MR on DEV
//   shim_bench reg SIZE N DEV        ibv_reg_mr + ibv_dereg_mr of SIZE bytes on DEV
//   shim_bench libc N                a libc path the shim does not watch (open/read/close,
//                                    malloc/free)
//   shim_bench exec-loop N           N times: bash running a loop of 300 fork+exec of /bin/true
//                                    (every process it starts inherits LD_PRELOAD: process
//                                    start with the shim preloaded, what `forkguard run` costs)
//   shim_bench start N PROG [ARG..]  N times: sh running a loop of 300 fork+exec of PROG ARG..:
//                                    what a preload costs every process of a job; also prints
//                                    the median CPU time (user + system) of the 301 processes
//   shim_bench noop                  returns at once: a small dynamically linked C++ program
//                                    (libstdc++, libibverbs) that never touches RDMA, for start
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

extern char** environ;

#include "rdma/open_device.h"

namespace {

using forkguard::rdma::OpenDeviceAndPd;
using forkguard::rdma::OpenedDevice;

long long NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

long long TimevalNs(const timeval& tv) { return tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL; }

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "shim_bench: %s: %s\n", what, strerror(errno));
  exit(2);
}

void Report(const char* name, std::vector<long long> v) {
  std::sort(v.begin(), v.end());
  printf("%s median_ns=%lld p90_ns=%lld n=%zu\n", name, v[v.size() / 2], v[v.size() * 9 / 10],
         v.size());
}

void ForkLoop(const char* name, int n) {
  std::vector<long long> t;
  for (int i = 0; i < n; ++i) {
    long long t0 = NowNs();
    pid_t p = fork();
    if (p < 0) Die("fork");
    if (p == 0) _exit(0);
    int st;
    if (waitpid(p, &st, 0) != p) Die("waitpid");
    t.push_back(NowNs() - t0);
  }
  Report(name, t);
}

void* PageAligned(size_t len) {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) Die("mmap");
  memset(p, 1, len);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "noop") == 0) return 0;
  if (argc < 3) {
    fprintf(stderr, "usage: see the comment at the top of bench/shim_bench.cc\n");
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "fork-small") {
    ForkLoop("fork-small", atoi(argv[2]));
  } else if (mode == "fork-256m") {
    PageAligned(256u << 20);
    ForkLoop("fork-256m", atoi(argv[2]));
  } else if (mode == "fork-rdma" && argc >= 4) {
    OpenedDevice r = OpenDeviceAndPd(argv[3], Die);
    void* buf = PageAligned(4u << 20);
    if (!ibv_reg_mr(r.pd, buf, 4u << 20, IBV_ACCESS_LOCAL_WRITE)) Die("ibv_reg_mr");
    ForkLoop("fork-rdma", atoi(argv[2]));
  } else if (mode == "reg" && argc >= 5) {
    size_t len = strtoull(argv[2], nullptr, 10);
    int n = atoi(argv[3]);
    OpenedDevice r = OpenDeviceAndPd(argv[4], Die);
    void* buf = PageAligned(len);
    std::vector<long long> t;
    for (int i = 0; i < n; ++i) {
      long long t0 = NowNs();
      ibv_mr* mr = ibv_reg_mr(r.pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
      if (!mr) Die("ibv_reg_mr");
      if (ibv_dereg_mr(mr)) Die("ibv_dereg_mr");
      t.push_back(NowNs() - t0);
    }
    Report(("reg-" + std::string(argv[2])).c_str(), t);
  } else if (mode == "exec-loop") {
    int n = atoi(argv[2]);
    std::vector<long long> t;
    char* const args[] = {const_cast<char*>("bash"), const_cast<char*>("-c"),
                          const_cast<char*>("for ((i = 0; i < 300; i++)); do /bin/true; done"),
                          nullptr};
    for (int i = 0; i < n; ++i) {
      long long t0 = NowNs();
      pid_t pid = 0;
      if (posix_spawn(&pid, "/bin/bash", nullptr, nullptr, args, environ) != 0) Die("posix_spawn");
      int st = 0;
      if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) Die("bash");
      t.push_back(NowNs() - t0);
    }
    Report("exec-loop", t);
  } else if (mode == "start" && argc >= 4) {
    int n = atoi(argv[2]);
    std::vector<long long> t;
    // PROG is sh's $0 and its arguments sh's "$@": the loop names them without quoting.
    std::vector<char*> args = {
        const_cast<char*>("sh"), const_cast<char*>("-c"),
        const_cast<char*>(
            "i=0; while [ $i -lt 300 ]; do \"$0\" \"$@\" || exit 1; i=$((i + 1)); done")};
    for (int a = 3; a < argc; ++a) args.push_back(argv[a]);
    args.push_back(nullptr);
    std::vector<long long> cpu;
    for (int i = 0; i < n; ++i) {
      long long t0 = NowNs();
      pid_t pid = 0;
      if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, args.data(), environ) != 0)
        Die("posix_spawn");
      int st = 0;
      rusage ru{};
      // wait4's usage is sh's own plus that of every child it waited for: the CPU time of
      // all 301 processes, without the time they spent waiting for a CPU.
      if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) Die("sh");
      t.push_back(NowNs() - t0);
      cpu.push_back(TimevalNs(ru.ru_utime) + TimevalNs(ru.ru_stime));
    }
    Report("start", t);
    std::sort(cpu.begin(), cpu.end());
    printf("start-cpu cpu_ns=%lld\n", cpu[cpu.size() / 2]);
  } else if (mode == "libc") {
    int n = atoi(argv[2]);
    std::vector<long long> t;
    char b[64];
    for (int i = 0; i < n; ++i) {
      long long t0 = NowNs();
      int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
      if (fd < 0) Die("open");
      if (read(fd, b, sizeof b) < 0) Die("read");
      close(fd);
      void* volatile m = malloc(100 + i % 900);
      free(m);
      t.push_back(NowNs() - t0);
    }
    Report("libc", t);
  } else {
    fprintf(stderr, "shim_bench: unknown mode or missing arguments: %s\n", mode.c_str());
    return 2;
  }
  return 0;
}
