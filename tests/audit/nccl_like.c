// Loads libibverbs the way NCCL's ibvwrap does -- dlopen RTLD_LOCAL, then dlvsym for
// each function -- registers memory, and forks. LD_PRELOAD alone never sees these
// calls; the LD_AUDIT module routes them to the shim.
//
// Usage: nccl_like [--device NAME] [--deepbind LIB]
//   --device NAME   device to open (default: the first one)
//   --deepbind LIB  before registering, dlopen LIB with RTLD_DEEPBIND and call its
//                   deepbind_user_fork_init() (a plain PLT call to ibv_fork_init)
// Prints one "bind NAME@VERSION -> OBJECT" line per looked-up symbol (OBJECT: where
// the address dlvsym returned lives), then the results; exits 0 when every step worked
// (a failed fork is reported, not an error: FORKGUARD_MODE=error makes it fail).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct ibv_device** (*GetDeviceListFn)(int*);
typedef const char* (*GetDeviceNameFn)(struct ibv_device*);
typedef struct ibv_context* (*OpenDeviceFn)(struct ibv_device*);
typedef struct ibv_pd* (*AllocPdFn)(struct ibv_context*);
typedef struct ibv_mr* (*RegMrFn)(struct ibv_pd*, void*, size_t, int);
typedef int (*ForkInitFn)(void);
typedef void (*FreeDeviceListFn)(struct ibv_device**);

// Under --config=asan: rdma-core's providers keep their device objects for the life of the
// process (not a leak of this program or of forkguard).
const char* __lsan_default_suppressions(void);
const char* __lsan_default_suppressions(void) {
  return "leak:librxe-rdmav34.so\nleak:libibverbs.so.1\n";
}

static void* Bind(void* lib, const char* name, const char* version) {
  void* fn = dlvsym(lib, name, version);
  Dl_info info;
  const char* where = "(null)";
  if (fn != NULL && dladdr(fn, &info) != 0 && info.dli_fname != NULL) {
    where = strrchr(info.dli_fname, '/') ? strrchr(info.dli_fname, '/') + 1 : info.dli_fname;
  }
  printf("bind %s@%s -> %s\n", name, version, where);
  if (fn == NULL) {
    fprintf(stderr, "nccl_like: dlvsym(%s, %s): %s\n", name, version, dlerror());
    exit(2);
  }
  return fn;
}

int main(int argc, char** argv) {
  const char* want = NULL;
  const char* deepbind = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--device") == 0) {
      want = argv[i + 1];
    } else if (strcmp(argv[i], "--deepbind") == 0) {
      deepbind = argv[i + 1];
    } else {
      fprintf(stderr, "nccl_like: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  setvbuf(stdout, NULL, _IONBF, 0);  // keep lines ordered with the shim's stderr

  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "nccl_like: dlopen(libibverbs.so.1): %s\n", dlerror());
    return 2;
  }
  GetDeviceListFn get_device_list =
      (GetDeviceListFn)Bind(lib, "ibv_get_device_list", "IBVERBS_1.1");
  GetDeviceNameFn get_device_name =
      (GetDeviceNameFn)Bind(lib, "ibv_get_device_name", "IBVERBS_1.1");
  OpenDeviceFn open_device = (OpenDeviceFn)Bind(lib, "ibv_open_device", "IBVERBS_1.1");
  FreeDeviceListFn free_device_list =
      (FreeDeviceListFn)Bind(lib, "ibv_free_device_list", "IBVERBS_1.1");
  AllocPdFn alloc_pd = (AllocPdFn)Bind(lib, "ibv_alloc_pd", "IBVERBS_1.1");
  RegMrFn reg_mr = (RegMrFn)Bind(lib, "ibv_reg_mr", "IBVERBS_1.1");
  ForkInitFn fork_init = (ForkInitFn)Bind(lib, "ibv_fork_init", "IBVERBS_1.1");
  // The compat version has another ABI: it must stay libibverbs' own (never called).
  Bind(lib, "ibv_open_device", "IBVERBS_1.0");

  // NCCL turns fork support on before any registration.
  int rc = fork_init();
  printf("ibv_fork_init = %d\n", rc);

  if (deepbind != NULL) {
    void* user = dlopen(deepbind, RTLD_NOW | RTLD_DEEPBIND);
    if (user == NULL) {
      fprintf(stderr, "nccl_like: dlopen(%s, RTLD_DEEPBIND): %s\n", deepbind, dlerror());
      return 2;
    }
    int (*user_fork_init)(void) = (int (*)(void))dlsym(user, "deepbind_user_fork_init");
    if (user_fork_init == NULL) {
      fprintf(stderr, "nccl_like: dlsym(deepbind_user_fork_init): %s\n", dlerror());
      return 2;
    }
    printf("deepbind ibv_fork_init = %d\n", user_fork_init());
  }

  int n = 0;
  struct ibv_device** list = get_device_list(&n);
  if (list == NULL) {
    fprintf(stderr, "nccl_like: ibv_get_device_list: %s\n", strerror(errno));
    return 2;
  }
  struct ibv_device* device = NULL;
  for (int i = 0; i < n && device == NULL; ++i) {
    if (want == NULL || strcmp(get_device_name(list[i]), want) == 0) device = list[i];
  }
  if (device == NULL) {
    fprintf(stderr, "nccl_like: device %s not found (%d devices)\n", want ? want : "(any)", n);
    return 2;
  }
  struct ibv_context* ctx = open_device(device);
  if (ctx == NULL) {
    fprintf(stderr, "nccl_like: ibv_open_device: %s\n", strerror(errno));
    return 2;
  }
  char device_name[64];
  snprintf(device_name, sizeof device_name, "%s", get_device_name(device));
  free_device_list(list);  // the open context keeps what it needs
  struct ibv_pd* pd = alloc_pd(ctx);
  if (pd == NULL) {
    fprintf(stderr, "nccl_like: ibv_alloc_pd: %s\n", strerror(errno));
    return 2;
  }
  const size_t len = 4 * 4096;
  void* buf = NULL;
  if (posix_memalign(&buf, 4096, len) != 0) return 2;
  memset(buf, 1, len);
  struct ibv_mr* mr = reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
  if (mr == NULL) {
    fprintf(stderr, "nccl_like: ibv_reg_mr: %s\n", strerror(errno));
    return 2;
  }
  printf("registered %zu bytes on %s\n", len, device_name);

  pid_t pid = fork();
  if (pid == 0) _exit(0);  // the child does not touch the registered buffer
  if (pid < 0) {
    printf("fork failed: %s\n", strerror(errno));
    return 0;
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) {
    fprintf(stderr, "nccl_like: waitpid: %s\n", strerror(errno));
    return 2;
  }
  printf("child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return 0;
}
