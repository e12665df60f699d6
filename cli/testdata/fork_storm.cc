// A fork storm over live registrations: 16 threads fork (each child exits at once) while 4
// threads register and deregister 4 KiB on the device, for the watcher's test and bench.
//
// Usage: fork_storm [FORKS_PER_THREAD] [REGS_PER_THREAD]   (default 50, 200)
// Device: $RXE_DEV, else the first one. Prints "forks N regs N". Exit 100+ on a setup
// failure, 1 when a fork or a registration failed.
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  int forks_per = argc > 1 ? atoi(argv[1]) : 50;
  int regs_per = argc > 2 ? atoi(argv[2]) : 200;
  const char* want = getenv("RXE_DEV");
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) return 101;
  ibv_device* dev = list[0];
  for (int i = 0; i < n; ++i)
    if (want && strcmp(ibv_get_device_name(list[i]), want) == 0) dev = list[i];
  ibv_context* ctx = ibv_open_device(dev);
  ibv_free_device_list(list);
  if (!ctx) return 102;
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (!pd) return 103;
  std::atomic<long> forks{0}, regs{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      void* buf = nullptr;
      if (posix_memalign(&buf, 4096, 4096) != 0) {
        ++failures;
        return;
      }
      memset(buf, 1, 4096);
      for (int i = 0; i < regs_per; ++i) {
        ibv_mr* mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
        if (!mr) {
          ++failures;
          continue;
        }
        ++regs;
        ibv_dereg_mr(mr);
      }
      free(buf);
    });
  }
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < forks_per; ++i) {
        pid_t pid = fork();
        if (pid == 0) _exit(0);
        if (pid < 0) {
          ++failures;
          continue;
        }
        ++forks;
        while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  printf("forks %ld regs %ld\n", forks.load(), regs.load());
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return failures.load() == 0 ? 0 : 1;
}
