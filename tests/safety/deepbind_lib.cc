// Loaded by behave_prog with RTLD_DEEPBIND: its own helper_value wins over the
// program's, and its fork/ibv_* calls bind to libc/libibverbs directly (past any
// LD_PRELOAD interposer). Opens stub0/rxe0 when asked, registers, forks.
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" __attribute__((visibility("default"))) const char* helper_value() { return "deep"; }

extern "C" __attribute__((visibility("default"))) int deep_run() {
  const char* dev = getenv("BEHAVE_DEEP_DEV");
  if (dev != nullptr && dev[0] != '\0') {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ibv_context* ctx = nullptr;
    for (int i = 0; list != nullptr && i < n && ctx == nullptr; ++i) {
      if (strcmp(dev, ibv_get_device_name(list[i])) == 0) ctx = ibv_open_device(list[i]);
    }
    if (list != nullptr) ibv_free_device_list(list);
    ibv_pd* pd = ctx != nullptr ? ibv_alloc_pd(ctx) : nullptr;
    void* buf = mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ibv_mr* mr = pd != nullptr ? ibv_reg_mr(pd, buf, 65536, IBV_ACCESS_LOCAL_WRITE) : nullptr;
    printf("deep: rdma %s\n", mr != nullptr ? "registered" : "failed");
  }
  printf("deep: helper=%s\n", helper_value());
  fflush(stdout);
  pid_t p = fork();
  if (p == 0) _exit(9);
  int st = 0;
  waitpid(p, &st, 0);
  printf("deep: child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  fflush(stdout);
  return 0;
}
