// behave_prog: programs whose behaviour must be the same with and without
// libforkguard.so (behaviour preservation and hostile environment).
// stdout is deterministic; the tests compare it and the exit status across runs.
//
//   behave_prog hazard DEV        open DEV, PD, 64 KiB MR, fork; child exits 0
//   behave_prog segv DEV ORDER    own SIGSEGV handler (siglongjmp): a PROT_NONE touch in the
//                                 parent; after registering a buffer (run with
//                                 RDMAV_FORK_SAFE=1) a child touches a PROT_NONE page and
//                                 the MADV_DONTFORK buffer (ORDER guard-first|range-first):
//                                 the program's handler must see both faults with the
//                                 kernel's si_code and address
//   behave_prog sigfork DEV N periodic|oneshot
//                                 N forks from main while a SIGALRM handler also forks
//                                 (a 1 ms periodic timer, or one timer per main fork;
//                                 at most one handler fork per main fork)
//                                 (single-threaded: fork from a handler is allowed here);
//                                 then a second thread registers memory
//   behave_prog threads DEV T N   T threads x N forks at once, children exit with codes
//   behave_prog deepbind LIB      dlopen(LIB, RTLD_DEEPBIND) and run it (deepbind_lib.cc)
// DEV "-" means no RDMA at all.
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

extern "C" __attribute__((visibility("default"))) const char* helper_value() { return "main"; }

namespace {

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "behave_prog: %s failed: %s\n", what, strerror(errno));
  exit(3);
}

void Say(const char* s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(1, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void* Pages(size_t len, int prot = PROT_READ | PROT_WRITE) {
  void* p = mmap(nullptr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) Die("mmap");
  if (prot & PROT_WRITE) memset(p, 7, len);
  return p;
}

ibv_pd* g_pd;

// Opens DEV, allocates a PD (g_pd) and registers `len` bytes at `buf`; "-" does nothing.
bool Rdma(const char* dev, void* buf, size_t len) {
  if (strcmp(dev, "-") == 0) return false;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) Die("ibv_get_device_list");
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n && ctx == nullptr; ++i) {
    if (strcmp(dev, ibv_get_device_name(list[i])) == 0) ctx = ibv_open_device(list[i]);
  }
  ibv_free_device_list(list);
  if (ctx == nullptr) Die("ibv_open_device");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (pd == nullptr) Die("ibv_alloc_pd");
  if (ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE) == nullptr) Die("ibv_reg_mr");
  g_pd = pd;
  return true;
}

int Hazard(const char* dev) {
  void* buf = Pages(65536);
  Rdma(dev, buf, 65536);
  fflush(stdout);
  pid_t p = fork();
  if (p < 0) Die("fork");
  if (p == 0) _exit(0);
  int st = 0;
  waitpid(p, &st, 0);
  printf("child status %d\ndone\n", st);
  return 0;
}

// --- segv ---
sigjmp_buf g_jump;
volatile void* g_expect_addr;
volatile int g_caught;

void OnSegv(int, siginfo_t* si, void*) {
  char line[160];
  snprintf(line, sizeof(line), "handler: SIGSEGV si_code=%d at_expected_addr=%s\n", si->si_code,
           si->si_addr == g_expect_addr ? "yes" : "no");
  Say(line);
  g_caught = g_caught + 1;
  siglongjmp(g_jump, 1);
}

void Touch(volatile char* p) {
  g_expect_addr = const_cast<char*>(p);
  if (sigsetjmp(g_jump, 1) == 0) {
    *p = 1;
    Say("touch: no fault\n");
  }
}

int Segv(const char* dev, bool range_first) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = OnSegv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, nullptr) != 0) Die("sigaction");
  char* guard = static_cast<char*>(Pages(4096, PROT_NONE));
  Say("parent: touching PROT_NONE\n");
  Touch(guard + 10);
  char* buf = static_cast<char*>(Pages(65536));
  bool rdma = Rdma(dev, buf, 65536);
  Say(rdma ? "parent: registered\n" : "parent: no rdma\n");
  pid_t p = fork();
  if (p < 0) Die("fork");
  if (p == 0) {
    if (!range_first) {
      Say("child: touching PROT_NONE\n");
      Touch(guard + 20);
    }
    Say("child: touching the registered buffer\n");
    Touch(buf + 100);
    if (range_first) {
      Say("child: touching PROT_NONE\n");
      Touch(guard + 20);
    }
    char line[64];
    snprintf(line, sizeof(line), "child: faults caught %d\n", g_caught);
    Say(line);
    _exit(5);
  }
  int st = 0;
  waitpid(p, &st, 0);
  printf("parent: child exit=%d signal=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
         WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  // The parent's own handler still works after all that.
  fflush(stdout);
  Touch(guard + 30);
  printf("parent: faults caught %d\n", g_caught);
  return 0;
}

// --- sigfork ---
volatile sig_atomic_t g_handler_forks, g_handler_bad, g_in_handler;
// The main loop's iteration, and the last iteration a handler forked in. A tick in an
// iteration that already had its handler fork returns at once: on a loaded machine a
// handler fork can outlast the 1 ms period, and a handler that forked on every tick would
// then starve the main loop forever (a livelock of the test, with or without the shim).
volatile sig_atomic_t g_iteration = 0, g_forked_in = -1;

void OnAlarm(int) {
  if (g_forked_in == g_iteration) return;
  g_forked_in = g_iteration;
  int saved = errno;
  pid_t p = fork();
  if (p == 0) _exit(7);
  if (p > 0) {
    int st = 0;
    while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 7) {
      g_handler_forks = g_handler_forks + 1;
    } else {
      g_handler_bad = g_handler_bad + 1;
    }
  } else {
    g_handler_bad = g_handler_bad + 1;
  }
  errno = saved;
}

int SigFork(const char* dev, int n, bool oneshot) {
  void* buf = Pages(65536);
  Rdma(dev, buf, 65536);
  fflush(stdout);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnAlarm;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, nullptr);
  if (!oneshot) {
    itimerval it{{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, nullptr);
  }
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    g_iteration = i;
    if (oneshot) {
      // One timer per iteration, 50 us .. 1.5 ms: the handler's fork lands at varied
      // points of this fork and can never starve the main loop (sanitizer builds, where
      // one handler fork may take longer than 1 ms).
      itimerval it{{0, 0}, {0, 50 + (i * 137) % 1500}};
      setitimer(ITIMER_REAL, &it, nullptr);
    }
    pid_t p = fork();
    if (p == 0) _exit(3);
    if (p < 0) {
      if (errno == EINTR) {
        --i;
        continue;
      }
      ++bad;
      continue;
    }
    int st = 0;
    while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 3) ++bad;
  }
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  // Another thread now uses RDMA (the shim takes its state lock): must not hang.
  if (g_pd != nullptr) {
    std::thread([&] {
      ibv_mr* mr = ibv_reg_mr(g_pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
      if (mr == nullptr || ibv_dereg_mr(mr) != 0) Die("ibv_reg_mr/dereg_mr on a second thread");
    }).join();
    printf("second thread registered\n");
  }
  fprintf(stderr, "behave_prog: handler forks %d\n", static_cast<int>(g_handler_forks));
  printf("main forks %d bad %d\nhandler forked: %s bad %d\n", n, bad,
         g_handler_forks > 0 ? "yes" : "no", static_cast<int>(g_handler_bad));
  return bad == 0 && g_handler_bad == 0 ? 0 : 1;
}

// --- threads ---
int Threads(const char* dev, int t, int n) {
  void* buf = Pages(65536);
  Rdma(dev, buf, 65536);
  fflush(stdout);
  std::vector<int> ok(static_cast<size_t>(t), 0);
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (int k = 0; k < t; ++k) {
    ts.emplace_back([&, k] {
      while (!go.load()) sched_yield();
      for (int i = 0; i < n; ++i) {
        int code = (k * 7 + i) % 250;
        pid_t p = fork();
        if (p == 0) _exit(code);
        if (p < 0) continue;
        int st = 0;
        if (waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == code) ++ok[k];
      }
    });
  }
  go.store(true);
  for (auto& th : ts) th.join();
  int total = 0;
  for (int k = 0; k < t; ++k) {
    printf("thread %d: %d of %d children exited with their code\n", k, ok[k], n);
    total += ok[k];
  }
  printf("total %d\n", total);
  return total == t * n ? 0 : 1;
}

int DeepBind(const char* lib) {
  void* h = dlopen(lib, RTLD_NOW | RTLD_DEEPBIND);
  if (h == nullptr) {
    fprintf(stderr, "behave_prog: dlopen: %s\n", dlerror());
    return 3;
  }
  auto run = reinterpret_cast<int (*)()>(dlsym(h, "deep_run"));
  if (run == nullptr) return 3;
  fflush(stdout);
  int r = run();
  printf("main: helper=%s deep_run=%d\n", helper_value(), r);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "hazard" && argc == 3) return Hazard(argv[2]);
  if (mode == "segv" && argc == 4) return Segv(argv[2], strcmp(argv[3], "range-first") == 0);
  if (mode == "sigfork" && argc == 5) {
    return SigFork(argv[2], atoi(argv[3]), strcmp(argv[4], "oneshot") == 0);
  }
  if (mode == "threads" && argc == 5) return Threads(argv[2], atoi(argv[3]), atoi(argv[4]));
  if (mode == "deepbind" && argc == 3) return DeepBind(argv[2]);
  fprintf(stderr, "usage: see the comment at the top of tests/safety/behave_prog.cc\n");
  return 2;
}
