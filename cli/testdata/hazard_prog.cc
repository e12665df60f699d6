// A tiny program with the bug forkguard exists for: open an RDMA device,
// register memory, then fork. Used by run_rdma_test on the real device.
//
// Usage: hazard_prog [EXIT_CODE] [--touch | --release-in-child]
//   EXIT_CODE  what to exit with at the end (default 0), to check that
//              `forkguard run` preserves it
//   --touch    the child writes to the registered buffer (with
//              RDMAV_FORK_SAFE=1 it is MADV_DONTFORK there: SIGSEGV)
//   --release-in-child  the child is left the last holder of the device
//              files (the parent closes its descriptors without
//              deregistering), so that the MR is released when the child
//              exits, in the child; then the parent forks again
// Device: $RXE_DEV, else the first one. Prints "child: exit N" or
// "child: signal N". Exit 100+ on a setup failure.
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  int code = 0;
  bool touch = false;
  bool release_in_child = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--touch") == 0)
      touch = true;
    else if (strcmp(argv[i], "--release-in-child") == 0)
      release_in_child = true;
    else
      code = atoi(argv[i]);
  }
  const char* want = getenv("RXE_DEV");
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    fprintf(stderr, "hazard_prog: no RDMA device: %s\n", strerror(errno));
    return 101;
  }
  ibv_device* dev = list[0];
  for (int i = 0; i < n; ++i)
    if (want && strcmp(ibv_get_device_name(list[i]), want) == 0) dev = list[i];
  ibv_context* ctx = ibv_open_device(dev);
  ibv_free_device_list(list);
  if (!ctx) {
    fprintf(stderr, "hazard_prog: ibv_open_device: %s\n", strerror(errno));
    return 102;
  }
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (!pd) {
    fprintf(stderr, "hazard_prog: ibv_alloc_pd: %s\n", strerror(errno));
    return 103;
  }
  const size_t len = 1 << 16;
  void* buf = nullptr;
  if (posix_memalign(&buf, 4096, len) != 0) return 104;
  memset(buf, 1, len);
  ibv_mr* mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
  if (!mr) {
    fprintf(stderr, "hazard_prog: ibv_reg_mr: %s\n", strerror(errno));
    return 105;
  }
  fflush(stdout);
  if (release_in_child) {
    int go[2];
    if (pipe(go) != 0) return 106;
    pid_t holder = fork();  // inherits the device files
    if (holder < 0) {
      printf("fork failed: %s\n", strerror(errno));
      return 107;
    }
    if (holder == 0) {
      close(go[1]);
      char c;
      while (read(go[0], &c, 1) < 0 && errno == EINTR) {
      }
      _exit(0);  // the last descriptors close here: the MR is released in this process
    }
    close(go[0]);
    close(ctx->cmd_fd);
    close(ctx->async_fd);
    close(go[1]);
    int st = 0;
    while (waitpid(holder, &st, 0) < 0 && errno == EINTR) {
    }
    printf("holder: exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    fflush(stdout);
  }
  pid_t pid = fork();  // the hazard: after RDMA init, with a live MR
  if (pid < 0) {
    printf("fork failed: %s\n", strerror(errno));
  } else if (pid == 0) {
    if (touch) static_cast<volatile char*>(buf)[0] = 2;
    _exit(0);
  } else {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(st))
      printf("child: signal %d\n", WTERMSIG(st));
    else
      printf("child: exit %d\n", WEXITSTATUS(st));
  }
  if (release_in_child) return code;  // the MR, the PD and the context are gone already
  ibv_dereg_mr(mr);
  free(buf);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return code;
}
