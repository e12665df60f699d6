// reg_sites: registers one page from many call chains, over and over, for the shim's
// per-call-site stack cache (shim/stack/stack.h CaptureRepeatedStack): one helper reached from
// two callers, recursion of varying depth, frames of varying size (alloca), frames with
// and without frame pointers, another thread. Prints "site LABEL" before each
// registration, in order; the test compares the logged stacks by label. Then keeps the
// last registration (from caller_b) live, forks, and the child touches the page.
//   reg_sites [DEVICE]   (default: RXE_DEV, else the first device)
#include <alloca.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

ibv_pd* g_pd = nullptr;
char* g_buf = nullptr;
ibv_mr* g_keep = nullptr;

[[noreturn]] void Die(const char* what) {
  perror(what);
  exit(2);
}

}  // namespace

// Not static, no namespace: plain names in the shim's messages.
extern "C" {

__attribute__((noinline)) void reg_sites_helper(const char* label, bool keep) {
  printf("site %s\n", label);
  ibv_mr* mr = ibv_reg_mr(g_pd, g_buf, 4096, IBV_ACCESS_LOCAL_WRITE);
  if (mr == nullptr) Die("ibv_reg_mr");
  if (keep) {
    g_keep = mr;
  } else if (ibv_dereg_mr(mr) != 0) {
    Die("ibv_dereg_mr");
  }
  __asm__ volatile("");
}

__attribute__((noinline)) void reg_sites_caller_a(const char* label) {
  reg_sites_helper(label, false);
  __asm__ volatile("");
}

__attribute__((noinline)) void reg_sites_caller_b(const char* label, bool keep) {
  reg_sites_helper(label, keep);
  __asm__ volatile("");
}

// Without a frame pointer: the unwind info's CFA = RSP + N.
__attribute__((noinline, optimize("omit-frame-pointer"))) void reg_sites_no_fp(int n) {
  char local[64];
  snprintf(local, sizeof(local), "nofp");
  reg_sites_helper(local, false);
  __asm__ volatile("" ::"r"(n));
}

__attribute__((noinline)) void reg_sites_recurse(int n, const char* label) {
  if (n == 0) {
    reg_sites_helper(label, false);
  } else {
    reg_sites_recurse(n - 1, label);
  }
  __asm__ volatile("");
}

// A frame whose size changes from call to call (the same return addresses).
__attribute__((noinline)) void reg_sites_alloca(int bytes, const char* label) {
  volatile char* p = static_cast<volatile char*>(alloca(bytes));
  p[0] = 1;
  reg_sites_helper(label, false);
  __asm__ volatile("" ::"r"(p));
}

__attribute__((noinline)) void reg_sites_alloca_caller(int bytes, const char* label) {
  reg_sites_alloca(bytes, label);
  __asm__ volatile("");
}

}  // extern "C"

namespace {

// Every loop below that registers is kept a loop: one label must be one call site. With
// optimization (the sanitizer configs build with -O1) GCC unrolls a short counted loop
// completely, and each copy of the call is another return address, i.e. truly another
// stack (seen: thread-a's three calls as three call sites under --config=asan/tsan).
#define REG_SITES_KEEP_LOOP _Pragma("GCC unroll 1")

void* Thread(void*) {
  REG_SITES_KEEP_LOOP
  for (int i = 0; i < 3; ++i) reg_sites_caller_a("thread-a");
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* want = argc > 1 ? argv[1] : getenv("RXE_DEV");
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) Die("ibv_get_device_list");
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n && ctx == nullptr; ++i) {
    if (want == nullptr || strcmp(want, ibv_get_device_name(list[i])) == 0) {
      ctx = ibv_open_device(list[i]);
    }
  }
  ibv_free_device_list(list);
  if (ctx == nullptr) Die("ibv_open_device");
  g_pd = ibv_alloc_pd(ctx);
  if (g_pd == nullptr) Die("ibv_alloc_pd");
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) Die("mmap");
  g_buf = static_cast<char*>(p);
  memset(g_buf, 'x', 4096);
  REG_SITES_KEEP_LOOP
  for (int round = 0; round < 4; ++round) {
    reg_sites_caller_a("a1");
    reg_sites_caller_b("b", false);
    reg_sites_caller_a("a2");  // another call site in main: another stack
    reg_sites_no_fp(round);
    static const char* const kDepth[] = {"r0", "r1", "r2", "r3"};
    REG_SITES_KEEP_LOOP
    for (int d = 0; d < 6; ++d) reg_sites_recurse(d % 4, kDepth[d % 4]);
    REG_SITES_KEEP_LOOP
    for (int k = 0; k < 4; ++k) reg_sites_alloca(16 + 1000 * ((k + round) % 4), "alloca");
    reg_sites_alloca_caller(32, "alloca-caller-1");
    reg_sites_alloca_caller(5000, "alloca-caller-2");
    pthread_t t;
    if (pthread_create(&t, nullptr, Thread, nullptr) != 0) Die("pthread_create");
    pthread_join(t, nullptr);
  }
  reg_sites_caller_b("b-keep", true);
  pid_t child = fork();
  if (child < 0) Die("fork");
  if (child == 0) {
    volatile char c = g_buf[10];  // SIGSEGV with fork support on (MADV_DONTFORK)
    (void)c;
    _exit(0);
  }
  int st = 0;
  if (waitpid(child, &st, 0) != child) Die("waitpid");
  printf("child %d %s %d\n", child, WIFSIGNALED(st) ? "signal" : "exit",
         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  ibv_dereg_mr(g_keep);
  printf("done\n");
  return 0;
}
