// ucx_fork: what a UCX program does - ucp_init (UCX turns fork support on with
// ibv_fork_init by default, UCX_IB_FORK_INIT=try), then RDMA registration, then fork;
// the child reads the registered buffer, checks it holds the parent's pattern and writes to it
// (its own copy). No UCX headers (Debian ships only the runtime,
// libucx0): libucp.so.0 is dlopen'ed and ucp_params_t is declared here with the fields
// used (UCX 1.13, ucp/api/ucp.h). Output: "ucp_init: ok", "registered", "fork: child=N",
// "child exited N" (0: the child saw the parent's pattern, 3: it did not) / "child killed by
// signal N", "parent buffer: intact" / "parent buffer: CHANGED" (the child's write must not
// reach the parent), "done"; errors: "ucx_fork: error: ..." exit 2.
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

struct UcpParams {  // ucp_params_t's first fields
  uint64_t field_mask;
  uint64_t features;
  size_t request_size;
  void* request_init;
  void* request_cleanup;
  uint64_t tag_sender_mask;
  int mt_workers_shared;
  size_t estimated_num_eps;
  size_t estimated_num_ppn;
  const char* name;
  char reserved[256];
};
constexpr uint64_t kFieldFeatures = 1u << 0;  // UCP_PARAM_FIELD_FEATURES
constexpr uint64_t kFeatureTag = 1u << 0;     // UCP_FEATURE_TAG

// What the parent writes, and the child and the parent check.
char PatternAt(size_t i) { return static_cast<char>('a' + (i * 7) % 26); }

void FillPattern(char* buf, size_t len) {
  for (size_t i = 0; i < len; ++i) buf[i] = PatternAt(i);
}

bool HoldsPattern(const volatile char* buf, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    if (buf[i] != PatternAt(i)) return false;
  }
  return true;
}

[[noreturn]] void Die(const char* what, const char* detail) {
  fprintf(stderr, "ucx_fork: error: %s: %s\n", what, detail);
  exit(2);
}

}  // namespace

extern "C" __attribute__((noinline)) void fg_test_ucx_init(void** ctx) {
  void* ucp = dlopen("libucp.so.0", RTLD_NOW | RTLD_GLOBAL);
  if (ucp == nullptr) Die("dlopen libucp.so.0", dlerror());
  using ConfigRead = int (*)(const char*, const char*, void**);
  using InitVersion = int (*)(unsigned, unsigned, const UcpParams*, const void*, void**);
  using GetVersion = void (*)(unsigned*, unsigned*, unsigned*);
  auto config_read = reinterpret_cast<ConfigRead>(dlsym(ucp, "ucp_config_read"));
  auto init_version = reinterpret_cast<InitVersion>(dlsym(ucp, "ucp_init_version"));
  auto get_version = reinterpret_cast<GetVersion>(dlsym(ucp, "ucp_get_version"));
  if (!config_read || !init_version || !get_version) Die("dlsym", "ucp_* missing");
  void* config = nullptr;
  if (int rc = config_read(nullptr, nullptr, &config); rc != 0) Die("ucp_config_read", "failed");
  unsigned major = 0, minor = 0, release = 0;
  get_version(&major, &minor, &release);
  UcpParams p;
  memset(&p, 0, sizeof(p));
  p.field_mask = kFieldFeatures;
  p.features = kFeatureTag;
  if (int rc = init_version(major, minor, &p, config, ctx); rc != 0) Die("ucp_init", "failed");
  printf("ucp_init: ok (UCX %u.%u.%u)\n", major, minor, release);
}

extern "C" __attribute__((noinline)) char* fg_test_register_buffers(size_t len) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) Die("ibv_get_device_list", "no device");
  const char* want = getenv("RXE_DEV");
  ibv_device* dev = list[0];
  for (int i = 0; want != nullptr && i < n; ++i) {
    if (strcmp(ibv_get_device_name(list[i]), want) == 0) dev = list[i];
  }
  ibv_context* ctx = ibv_open_device(dev);
  if (ctx == nullptr) Die("ibv_open_device", strerror(errno));
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (pd == nullptr) Die("ibv_alloc_pd", strerror(errno));
  void* buf = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) Die("mmap", strerror(errno));
  FillPattern(static_cast<char*>(buf), len);
  if (ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE) == nullptr)
    Die("ibv_reg_mr", strerror(errno));
  printf("registered\n");
  return static_cast<char*>(buf);
}

extern "C" __attribute__((noinline)) pid_t fg_test_fork_worker(char* buf, size_t len) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    volatile char* b = buf;
    bool right = HoldsPattern(b, len);
    b[0] = 'c';
    _exit(right ? 0 : 3);
  }
  return pid;
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  void* ctx = nullptr;
  fg_test_ucx_init(&ctx);
  constexpr size_t kLen = 4096;
  char* buf = fg_test_register_buffers(kLen);
  pid_t pid = fg_test_fork_worker(buf, kLen);
  if (pid < 0) {
    printf("fork failed: errno=%d\n", errno);
  } else {
    printf("fork: child=%d\n", static_cast<int>(pid));
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) {
      printf("child killed by signal %d\n", WTERMSIG(st));
    } else {
      printf("child exited %d\n", WEXITSTATUS(st));
    }
    printf("parent buffer: %s\n", HoldsPattern(buf, kLen) ? "intact" : "CHANGED");
  }
  printf("done\n");
  return 0;
}
