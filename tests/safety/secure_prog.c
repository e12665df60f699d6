/* secure_prog: installed setuid-root by hostile_env_test and run by an
 * unprivileged user (AT_SECURE). LD_PRELOAD paths are ignored for such a program,
 * so it loads the shim itself with dlopen (absolute path: allowed), then the stub
 * libibverbs, opens a device through the shim's exported wrapper and forks with
 * libc's fork (the shim's pthread_atfork handler decides it: a dlopen'ed shim is
 * not first in the symbol search order, so its own fork is not what `fork` binds to). The shim's
 * configuration must then be the defaults whatever FORKGUARD_* says.  Usage: secure_prog SHIM
 * STUB_LIBIBVERBS */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <unistd.h>

struct ibv_device;
typedef struct ibv_device** (*list_fn)(int*);
typedef void* (*open_fn)(struct ibv_device*);
typedef void (*free_fn)(struct ibv_device**);

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  printf("secure=%lu\n", getauxval(AT_SECURE));
  void* shim = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  void* verbs = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
  if (shim == NULL || verbs == NULL) {
    printf("dlopen failed: %s\n", dlerror());
    return 3;
  }
  list_fn list = (list_fn)dlsym(verbs, "ibv_get_device_list");
  free_fn free_list = (free_fn)dlsym(verbs, "ibv_free_device_list");
  open_fn open_dev = (open_fn)dlsym(shim, "ibv_open_device");
  if (list == NULL || free_list == NULL || open_dev == NULL) return 4;
  int n = 0;
  struct ibv_device** devs = list(&n);
  void* ctx = n > 0 ? open_dev(devs[0]) : NULL;
  if (devs != NULL) free_list(devs);
  printf("context %s\n", ctx != NULL ? "open" : "failed");
  fflush(stdout);
  pid_t p = fork();
  if (p == 0) _exit(0);
  if (p < 0) {
    printf("fork failed: %s\n", strerror(errno));
    return 0;
  }
  int st = 0;
  waitpid(p, &st, 0);
  printf("fork ok\n");
  return 0;
}
