// fork_after_rdma: a small program that does what trainers do - RDMA init,
// memory registration, then fork - in every order the shim must judge. The
// shim tests run it with LD_PRELOAD=libforkguard.so, against the stub
// libibverbs (host) or the real one on rxe0 (RDMA lane). Built -rdynamic so
// the shim can name fg_test_init_rdma / fg_test_register_buffers /
// fg_test_fork_worker in its stacks.
//
// Every fact a test needs is one line on stdout (see Usage()); errors of the
// program itself go to stderr as "fork_after_rdma: error: ..." and exit 2.
// Built twice from this file: linked against libibverbs/librdmacm, and with
// FG_TEST_DLOPEN_ONLY (no link; --dlopen-local loads libibverbs.so.1 with
// dlopen(RTLD_NOW|RTLD_LOCAL) and calls through dlsym(handle, ...)).
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pty.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#ifndef FG_TEST_DLOPEN_ONLY
#include <rdma/rdma_cma.h>
#endif

#include <algorithm>
#include <atomic>
#include <barrier>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

void Usage(FILE* out) {
  fputs(
      "usage: fork_after_rdma [options]\n"
      "  --order=rdma-first|fork-first  RDMA init then fork (default), or fork workers first\n"
      "  --reg=LIST            registration entry points, comma-separated: mr, iova, iova2,\n"
      "                        dmabuf, or all (default mr)\n"
      "  --heap                also register a heap buffer sharing a page with other data\n"
      "  --memory=KIND         the registered buffer's memory: anonymous (heap, default),\n"
      "                        hugetlb (one 2 MiB MAP_HUGETLB page) or shared (MAP_SHARED)\n"
      "  --fork-safe           ibv_fork_init() before registering\n"
      "  --fork-init-after     ibv_fork_init() after registering (prints its result)\n"
      "  --touch-buffer        the child writes the registered page-aligned buffer\n"
      "  --show-dontfork       after each fork: 'parent buffer dontfork: yes|no' (smaps dc)\n"
      "  --touch-heap-neighbor the child writes heap data sharing a page with the heap MR\n"
      "  --dereg-before-fork   dereg MRs, dealloc the PD and close the device before forking\n"
      "  --spawn               posix_spawn /bin/true instead of fork\n"
      "  --fork-exec           the child execs /bin/true\n"
      "  --fork-fn=F           how to fork: fork (default), _Fork, daemon (daemon(1, 1): the\n"
      "                        original process exits 0 inside it; the daemon prints\n"
      "                        'daemon: pid=N' and goes on as the child) or forkpty\n"
      "  --raw-clone           fork with syscall(SYS_clone, SIGCHLD) instead (no libc fork)\n"
      "  --rdmacm-release-first with --rdmacm-only: rdma_destroy_id + rdma_destroy_event_channel\n"
      "                        before forking (prints 'rdmacm: released')\n"
      "  --forks=N             fork N times from the same call site (default 1)\n"
      "  --rdmacm-only         librdmacm only: create_id + resolve_addr to $RXE_IP\n"
      "  --rdmacm-ep           librdmacm only: rdma_getaddrinfo + rdma_create_ep to $RXE_IP\n"
      "  --child-uses-parent-pd the child registers memory on the parent's PD\n"
      "  --exec-fn=F           with --fork-exec: execv (default), execve, execvp, execl,\n"
      "                        execle, execlp, execvpe or fexecve\n"
      "  --spawn-fn=F          with --spawn: posix_spawn (default) or posix_spawnp\n"
      "  --system              system(\"true\") and popen(\"true\") instead of fork\n"
      "  --open-uverbs=PATH    no libibverbs: open(PATH) (e.g. /dev/infiniband/uverbs0), fork\n"
      "  --open-uverbs-syscall=PATH  the same, opened with syscall(SYS_openat) (no libc open)\n"
      "  --exec-keep-fd=PATH   open(PATH) without O_CLOEXEC, then exec this program with\n"
      "                        --only-fork (the new image inherits the descriptor)\n"
      "  --only-fork           no RDMA calls at all: just fork\n"
      "  --raw-dontfork        with --open-uverbs: an MADV_DONTFORK page the child touches\n"
      "  --atfork-handlers     pthread_atfork handlers: prepare locks a mutex, parent/child\n"
      "                        unlock it (prints 'atfork: prepare=N parent=N mutex=free|held')\n"
      "  --segv-handler        the program's own SIGSEGV handler (child: prints\n"
      "                        'program segv handler ran', _exit(42))\n"
      "  --child-null-deref    the child writes to address 0x10 (not RDMA memory)\n"
      "  --exec-at-end         at the end, 3 x (register the buffer again + dereg) from one\n"
      "                        call site, then exec /bin/true with the rest still live (the\n"
      "                        shim's destructor never runs)\n"
      "  --churn               a thread registers/deregisters in a loop while the parent\n"
      "                        forks (prints 'churn: iterations=N')\n"
      "  --dlopen-local        dlopen(libibverbs.so.1, RTLD_NOW|RTLD_LOCAL) + dlsym(handle)\n"
      "  --vfork               vfork + exec /bin/true instead of fork\n"
      "  --threads=N           N more threads each register a page at once and stay alive\n"
      "                        across the fork (prints 'thread-registered: n=N')\n"
      "  --reg-invalid         also ibv_reg_mr(len=0); prints 'invalid reg: mr=null errno=N'\n"
      "Device: $RXE_DEV or the first one. Output (stdout): 'device: NAME',\n"
      "'registered: call=C addr=0x.. len=N', 'heap-neighbor: addr=0x..',\n"
      "'fork_init_after: ret=N', 'fork: child=PID', 'child exited N',\n"
      "'child killed by signal N', 'fork failed: errno=N (TEXT)', 'spawn: child=PID',\n"
      "'rdmacm: addr resolved', 'parent continues: buffer intact', 'done'.\n",
      out);
}

// The options that only turn a field on: field NAME is the flag --NAME (with - for _).
#define FG_SWITCHES(X)    \
  X(heap)                 \
  X(fork_safe)            \
  X(fork_init_after)      \
  X(touch_buffer)         \
  X(touch_heap_neighbor)  \
  X(dereg_before_fork)    \
  X(spawn)                \
  X(fork_exec)            \
  X(rdmacm_release_first) \
  X(rdmacm_only)          \
  X(rdmacm_ep)            \
  X(child_uses_parent_pd) \
  X(system)               \
  X(only_fork)            \
  X(raw_dontfork)         \
  X(atfork_handlers)      \
  X(segv_handler)         \
  X(child_null_deref)     \
  X(churn)                \
  X(exec_at_end)          \
  X(vfork)                \
  X(reg_invalid)          \
  X(show_dontfork)        \
  X(dlopen_local)

struct Options {
#define FG_SWITCH_FIELD(name) bool name = false;
  FG_SWITCHES(FG_SWITCH_FIELD)
#undef FG_SWITCH_FIELD
  bool fork_first = false;
  std::string reg = "mr";
  std::string memory = "anonymous";
  int forks = 1;
  int threads = 0;
  std::string exec_fn = "execv";
  std::string spawn_fn = "posix_spawn";
  std::string open_uverbs;
  bool open_via_syscall = false;
  std::string exec_keep_fd;
  std::string fork_fn = "fork";
};

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "fork_after_rdma: error: %s: %s\n", what, strerror(errno));
  exit(2);
}

[[noreturn]] void DieRc(const char* what, int rc) {
  fprintf(stderr, "fork_after_rdma: error: %s: returned %d (%s)\n", what, rc, strerror(rc));
  exit(2);
}

// The verbs entry points, either linked directly or looked up by handle in an
// RTLD_LOCAL libibverbs (which LD_PRELOAD cannot see): member NAME holds ibv_NAME.
// (`&ibv_reg_mr` names the function, not verbs.h's function-like macro.)
#define FG_VERBS_API(X) \
  X(get_device_list)    \
  X(free_device_list)   \
  X(get_device_name)    \
  X(open_device)        \
  X(close_device)       \
  X(alloc_pd)           \
  X(dealloc_pd)         \
  X(reg_mr)             \
  X(reg_mr_iova)        \
  X(reg_mr_iova2)       \
  X(reg_dmabuf_mr)      \
  X(dereg_mr)           \
  X(fork_init)

struct VerbsApi {
#define FG_MEMBER(name) decltype(&ibv_##name) name;
  FG_VERBS_API(FG_MEMBER)
#undef FG_MEMBER
};

template <typename F>
void Lookup(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  if (!*out) {
    fprintf(stderr, "fork_after_rdma: error: dlsym(%s): %s\n", name, dlerror());
    exit(2);
  }
}

VerbsApi LoadVerbs(bool dlopen_local) {
  VerbsApi api{};
  if (dlopen_local) {
    void* h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "fork_after_rdma: error: dlopen(libibverbs.so.1): %s\n", dlerror());
      exit(2);
    }
    printf("dlopen: libibverbs.so.1 RTLD_LOCAL\n");
#define FG_LOOKUP(name) Lookup(h, "ibv_" #name, &api.name);
    FG_VERBS_API(FG_LOOKUP)
#undef FG_LOOKUP
    return api;
  }
#ifdef FG_TEST_DLOPEN_ONLY
  fprintf(stderr, "fork_after_rdma: error: this build needs --dlopen-local\n");
  exit(2);
#else
#define FG_LINKED(name) api.name = &ibv_##name;
  FG_VERBS_API(FG_LINKED)
#undef FG_LINKED
  return api;
#endif
}

const VerbsApi* g_api = nullptr;

// --atfork-handlers: what a library with its own lock around fork does.
pthread_mutex_t g_atfork_mutex = PTHREAD_MUTEX_INITIALIZER;
std::atomic<int> g_atfork_prepare{0}, g_atfork_parent{0};
void AtforkPrepare() {
  pthread_mutex_lock(&g_atfork_mutex);
  ++g_atfork_prepare;
}
void AtforkParent() {
  ++g_atfork_parent;
  pthread_mutex_unlock(&g_atfork_mutex);
}
void AtforkChild() { pthread_mutex_unlock(&g_atfork_mutex); }

// --segv-handler: the program's own handler, which the shim must chain to.
void ProgramSegvHandler(int) {
  static const char kMsg[] = "program segv handler ran\n";
  ssize_t n = write(1, kMsg, sizeof(kMsg) - 1);
  (void)n;
  _exit(42);
}  // for the forked child (--child-uses-parent-pd)

struct Rdma {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  std::vector<ibv_mr*> mrs;
  char* buf = nullptr;  // page-aligned, registered
  size_t buf_len = 0;
  bool buf_mapped = false;        // mmap'd (--memory=hugetlb/shared), not from the heap
  char* heap_block = nullptr;     // malloc'd; a part of it is registered
  char* heap_neighbor = nullptr;  // unregistered byte on a registered page
};

// Whether the mapping holding `p` has the kernel's "dc" flag (MADV_DONTFORK), from smaps.
bool MappingIsDontfork(const void* p) {
  FILE* f = fopen("/proc/self/smaps", "re");
  if (!f) Die("/proc/self/smaps");
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  bool in = false;
  bool dc = false;
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    unsigned long lo = 0, hi = 0;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ':') != nullptr &&
        strncmp(line, "VmFlags", 7) != 0) {
      in = lo <= a && a < hi;
    } else if (in && strncmp(line, "VmFlags:", 8) == 0) {
      dc = strstr(line, " dc") != nullptr;
      break;
    }
  }
  fclose(f);
  return dc;
}

void PrintChildFate(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) Die("waitpid");
  if (WIFEXITED(status)) {
    printf("child exited %d\n", WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    printf("child killed by signal %d\n", WTERMSIG(status));
  } else {
    printf("child status 0x%x\n", status);
  }
  fflush(stdout);
}

}  // namespace

// Named, non-inlined steps with C linkage so that stacks show these names.
extern "C" {

__attribute__((noinline)) void fg_test_init_rdma(const VerbsApi& api, Rdma* r) {
  int n = 0;
  ibv_device** list = api.get_device_list(&n);
  if (!list) Die("ibv_get_device_list");
  if (n == 0) {
    errno = ENODEV;
    Die("ibv_get_device_list: no devices");
  }
  const char* want = getenv("RXE_DEV");
  ibv_device* dev = list[0];
  for (int i = 0; want && *want && i < n; ++i) {
    if (strcmp(api.get_device_name(list[i]), want) == 0) dev = list[i];
  }
  r->ctx = api.open_device(dev);
  if (!r->ctx) Die("ibv_open_device");
  printf("device: %s\n", api.get_device_name(dev));
  api.free_device_list(list);
  r->pd = api.alloc_pd(r->ctx);
  if (!r->pd) Die("ibv_alloc_pd");
}

__attribute__((noinline)) void fg_test_register_buffers(const VerbsApi& api, const Options& o,
                                                        Rdma* r) {
  const long page = sysconf(_SC_PAGESIZE);
  r->buf_len = 4 * page;
  void* p = nullptr;
  if (o.memory == "hugetlb" || o.memory == "shared") {
    bool huge = o.memory == "hugetlb";
    if (huge) r->buf_len = 2u << 20;
    p = mmap(nullptr, r->buf_len, PROT_READ | PROT_WRITE,
             huge ? MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB : MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) Die(huge ? "mmap MAP_HUGETLB (vm.nr_hugepages?)" : "mmap MAP_SHARED");
    r->buf_mapped = true;
  } else if (o.memory != "anonymous") {
    Die("--memory: anonymous, hugetlb or shared");
  } else if (posix_memalign(&p, page, r->buf_len) != 0) {
    Die("posix_memalign");
  }
  r->buf = static_cast<char*>(p);
  memset(r->buf, 'p', r->buf_len);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  auto record = [&](const char* call, ibv_mr* mr, void* addr, size_t len) {
    if (!mr) Die(call);
    if (mr->addr != addr || mr->length != len) {
      fprintf(stderr, "fork_after_rdma: error: %s returned addr=%p len=%zu, wanted %p %zu\n", call,
              mr->addr, mr->length, addr, len);
      exit(2);
    }
    r->mrs.push_back(mr);
    printf("registered: call=%s addr=%p len=%zu\n", call, addr, len);
  };
  // Each --reg choice registers its own page of the buffer. --reg is one
  // name, "all", or a comma-separated list.
  auto wants = [&o](const char* name) {
    if (o.reg == "all") return true;
    std::string list = "," + o.reg + ",";
    return list.find(std::string(",") + name + ",") != std::string::npos;
  };
  int used = 0;
  if (wants("mr")) {
    char* a = r->buf + page * used++;
    record("ibv_reg_mr", api.reg_mr(r->pd, a, page, access), a, page);
  }
  if (wants("iova")) {
    char* a = r->buf + page * used++;
    record("ibv_reg_mr_iova", api.reg_mr_iova(r->pd, a, page, 0x10000, access), a, page);
  }
  if (wants("iova2")) {
    char* a = r->buf + page * used++;
    record("ibv_reg_mr_iova2", api.reg_mr_iova2(r->pd, a, page, 0x20000, access), a, page);
  }
  if (wants("dmabuf")) {
    int fd = memfd_create("fork_after_rdma-dmabuf", MFD_CLOEXEC);
    if (fd < 0) Die("memfd_create");
    ibv_mr* mr = api.reg_dmabuf_mr(r->pd, 0, page, 0x30000, fd, access);
    record("ibv_reg_dmabuf_mr", mr, reinterpret_cast<void*>(0x30000), page);
  }
  if (used == 0 && !wants("dmabuf")) {
    fprintf(stderr, "fork_after_rdma: error: bad --reg=%s\n", o.reg.c_str());
    exit(2);
  }
  if (o.heap) {
    // 64 registered bytes inside a heap block, and an unregistered byte of the
    // same block on the same page (before or after the registered bytes).
    r->heap_block = static_cast<char*>(malloc(1024));
    if (!r->heap_block) Die("malloc");
    memset(r->heap_block, 'h', 1024);
    char* reg = r->heap_block + 512;
    auto page_of = [page](const char* x) { return reinterpret_cast<uintptr_t>(x) / page; };
    r->heap_neighbor = page_of(reg - 1) == page_of(reg) ? reg - 1 : reg + 64;
    record("ibv_reg_mr", api.reg_mr(r->pd, reg, 64, access), reg, 64);
    printf("heap-neighbor: addr=%p\n", static_cast<void*>(r->heap_neighbor));
  }
}

__attribute__((noinline)) void fg_test_release_rdma(const VerbsApi& api, Rdma* r) {
  for (ibv_mr* mr : r->mrs) {
    if (int rc = api.dereg_mr(mr); rc != 0) DieRc("ibv_dereg_mr", rc);
  }
  r->mrs.clear();
  if (r->pd) {
    if (int rc = api.dealloc_pd(r->pd); rc != 0) DieRc("ibv_dealloc_pd", rc);
    r->pd = nullptr;
  }
  if (r->ctx) {
    if (int rc = api.close_device(r->ctx); rc != 0) DieRc("ibv_close_device", rc);
    r->ctx = nullptr;
  }
}

// Forks one worker. The child only writes memory, execs, or _exits.
__attribute__((noinline)) pid_t fg_test_fork_worker(const Options& o, const Rdma& r) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = -1;
  if (o.fork_fn == "raw-clone") {
    pid = static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr));
  } else if (o.fork_fn == "_Fork") {
    pid = _Fork();
  } else if (o.fork_fn == "forkpty") {
    int master = -1;
    pid = forkpty(&master, nullptr, nullptr, nullptr);
  } else if (o.fork_fn == "daemon") {
    // noclose: the daemon keeps our stdout/stderr (the test reads them to EOF).
    if (daemon(1, 1) == 0) {
      pid = 0;
      printf("daemon: pid=%d\n", static_cast<int>(getpid()));
      fflush(stdout);
    }
  } else {
    pid = fork();
  }
  if (pid == 0) {
    alarm(60);  // a child that hangs (e.g. on a lock inherited held) dies of SIGALRM
    if (o.fork_exec) {
      char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
      const std::string& f = o.exec_fn;
      if (f == "execv") {
        execv("/bin/true", argv);
      } else if (f == "execve") {
        execve("/bin/true", argv, environ);
      } else if (f == "execvp") {
        execvp("true", argv);
      } else if (f == "execvpe") {
        execvpe("true", argv, environ);
      } else if (f == "execl") {
        execl("/bin/true", "/bin/true", static_cast<char*>(nullptr));
      } else if (f == "execle") {
        execle("/bin/true", "/bin/true", static_cast<char*>(nullptr), environ);
      } else if (f == "execlp") {
        execlp("true", "true", static_cast<char*>(nullptr));
      } else if (f == "fexecve") {
        int fd = open("/bin/true", O_RDONLY);
        if (fd >= 0) fexecve(fd, argv, environ);
      }
      _exit(127);
    }
    if (o.touch_buffer && r.buf) {
      volatile char* b = r.buf;
      b[0] = 'c';
      if (b[0] != 'c') _exit(3);
    }
    if (o.child_uses_parent_pd && r.pd && g_api) {
      // Wrong on purpose: the parent's PD is not usable here.
      static char page[4096] __attribute__((aligned(4096)));
      ibv_mr* mr = g_api->reg_mr(r.pd, page, sizeof(page), IBV_ACCESS_LOCAL_WRITE);
      if (mr) g_api->dereg_mr(mr);
    }
    if (o.child_null_deref) {
      volatile char* bad = reinterpret_cast<volatile char*>(0x10);
      bad[0] = 'c';
    }
    if (o.touch_heap_neighbor && r.heap_neighbor) {
      volatile char* b = r.heap_neighbor;
      b[0] = 'c';
      if (b[0] != 'c') _exit(3);
    }
    _exit(0);
  }
  return pid;
}

__attribute__((noinline)) pid_t fg_test_vfork_worker() {
  fflush(stdout);
  pid_t pid = vfork();
  if (pid == 0) {
    char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
    execv("/bin/true", argv);
    _exit(127);
  }
  return pid;
}

__attribute__((noinline)) pid_t fg_test_spawn_worker(const Options& o) {
  fflush(stdout);
  pid_t pid = -1;
  char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
  int rc = o.spawn_fn == "posix_spawnp"
               ? posix_spawnp(&pid, "true", nullptr, nullptr, argv, environ)
               : posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ);
  if (rc != 0) DieRc("posix_spawn", rc);
  return pid;
}

}  // extern "C"

namespace {

// Forks (or spawns) the configured workers. A failed fork is reported and the
// program carries on, as a data loader that catches the error would.
void ForkWorkers(const Options& o, const Rdma& r) {
  for (int i = 0; i < o.forks; ++i) {
    if (o.vfork) {
      pid_t pid = fg_test_vfork_worker();
      if (pid < 0) Die("vfork");
      printf("spawn: child=%d (vfork)\n", static_cast<int>(pid));
      PrintChildFate(pid);
      continue;
    }
    if (o.system) {
      fflush(stdout);
      int st = system("true");
      printf("system: status=%d\n", st);
      FILE* f = popen("true", "r");
      if (!f) Die("popen");
      printf("popen: status=%d\n", pclose(f));
      continue;
    }
    if (o.spawn) {
      pid_t pid = fg_test_spawn_worker(o);
      printf("spawn: child=%d\n", static_cast<int>(pid));
      PrintChildFate(pid);
      continue;
    }
    pid_t pid = fg_test_fork_worker(o, r);
    if (pid < 0) {
      int e = errno;
      printf("fork failed: errno=%d (%s)\n", e, strerror(e));
      fflush(stdout);
      continue;
    }
    printf("fork: child=%d\n", static_cast<int>(pid));
    if (o.show_dontfork && r.buf != nullptr) {
      printf("parent buffer dontfork: %s\n", MappingIsDontfork(r.buf) ? "yes" : "no");
    }
    PrintChildFate(pid);
  }
}

#ifndef FG_TEST_DLOPEN_ONLY
int RunRdmacmEp(const Options& o) {
  const char* ip = getenv("RXE_IP");
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* res = nullptr;
  if (rdma_getaddrinfo(ip && *ip ? ip : "10.11.12.1", "7471", &hints, &res) != 0) {
    Die("rdma_getaddrinfo");
  }
  rdma_cm_id* id = nullptr;
  if (rdma_create_ep(&id, res, nullptr, nullptr) != 0) Die("rdma_create_ep");
  printf("rdmacm: ep created\n");
  Rdma none;
  ForkWorkers(o, none);
  rdma_destroy_ep(id);
  rdma_freeaddrinfo(res);
  printf("done\n");
  return 0;
}

int RunRdmacmOnly(const Options& o) {
  if (o.rdmacm_ep) return RunRdmacmEp(o);
  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) Die("rdma_create_event_channel");
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) Die("rdma_create_id");
  const char* ip = getenv("RXE_IP");
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(7471);
  if (inet_pton(AF_INET, ip && *ip ? ip : "10.11.12.1", &dst.sin_addr) != 1) {
    errno = EINVAL;
    Die("inet_pton($RXE_IP)");
  }
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) != 0) {
    Die("rdma_resolve_addr");
  }
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev) != 0) Die("rdma_get_cm_event");
  if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED) {
    fprintf(stderr, "fork_after_rdma: error: got %s, wanted ADDR_RESOLVED\n",
            rdma_event_str(ev->event));
    exit(2);
  }
  rdma_ack_cm_event(ev);
  printf("rdmacm: addr resolved\n");
  if (o.rdmacm_release_first) {
    // Everything the program made is gone; librdmacm keeps its own device context.
    if (rdma_destroy_id(id) != 0) Die("rdma_destroy_id");
    rdma_destroy_event_channel(ch);
    id = nullptr;
    ch = nullptr;
    printf("rdmacm: released\n");
  }
  Rdma none;
  ForkWorkers(o, none);
  if (id != nullptr) rdma_destroy_id(id);
  if (ch != nullptr) rdma_destroy_event_channel(ch);
  printf("done\n");
  return 0;
}
#endif

const std::pair<const char*, bool Options::*> kSwitches[] = {
#define FG_SWITCH_ROW(name) {#name, &Options::name},
    FG_SWITCHES(FG_SWITCH_ROW)
#undef FG_SWITCH_ROW
};

// --NAME for the switch field NAME.
bool IsSwitch(const std::string& arg, const char* field) {
  std::string flag = std::string("--") + field;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return arg == flag;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&a](const char* prefix, std::string* out) {
      size_t n = strlen(prefix);
      if (a.compare(0, n, prefix) != 0) return false;
      *out = a.substr(n);
      return true;
    };
    auto sw = std::find_if(std::begin(kSwitches), std::end(kSwitches),
                           [&a](const auto& s) { return IsSwitch(a, s.first); });
    if (sw != std::end(kSwitches)) {
      o->*sw->second = true;
      continue;
    }
    std::string v;
    if (value("--order=", &v)) {
      if (v != "rdma-first" && v != "fork-first") return false;
      o->fork_first = v == "fork-first";
    } else if (value("--reg=", &v)) {
      o->reg = v;
    } else if (value("--memory=", &v)) {
      o->memory = v;
    } else if (value("--forks=", &v)) {
      o->forks = atoi(v.c_str());
      if (o->forks < 1) return false;
    } else if (value("--fork-fn=", &v)) {
      if (v != "fork" && v != "_Fork" && v != "daemon" && v != "forkpty") return false;
      o->fork_fn = v;
    } else if (a == "--raw-clone") {
      o->fork_fn = "raw-clone";
    } else if (value("--threads=", &v)) {
      o->threads = atoi(v.c_str());
      if (o->threads < 1) return false;
    } else if (value("--exec-fn=", &v)) {
      o->exec_fn = v;
      o->fork_exec = true;
    } else if (value("--spawn-fn=", &v)) {
      o->spawn_fn = v;
      o->spawn = true;
    } else if (value("--open-uverbs=", &v)) {
      o->open_uverbs = v;
    } else if (value("--open-uverbs-syscall=", &v)) {
      o->open_uverbs = v;
      o->open_via_syscall = true;
    } else if (value("--exec-keep-fd=", &v)) {
      o->exec_keep_fd = v;
    } else {
      return false;
    }
  }
  // Switches that imply another.
  o->heap |= o->touch_heap_neighbor;
  o->rdmacm_only |= o->rdmacm_ep || o->rdmacm_release_first;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    Usage(stdout);
    return 0;
  }
  if (!ParseArgs(argc, argv, &o)) {
    Usage(stderr);
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (o.rdmacm_only) {
#ifdef FG_TEST_DLOPEN_ONLY
    fprintf(stderr, "fork_after_rdma: error: --rdmacm-only needs the linked build\n");
    return 2;
#else
    return RunRdmacmOnly(o);
#endif
  }
  Rdma r;
  if (!o.exec_keep_fd.empty()) {
    int fd = open(o.exec_keep_fd.c_str(), O_RDWR);  // no O_CLOEXEC on purpose
    if (fd < 0) Die(o.exec_keep_fd.c_str());
    printf("opened: %s fd=%d, exec\n", o.exec_keep_fd.c_str(), fd);
    fflush(stdout);
    char* const args[] = {argv[0], const_cast<char*>("--only-fork"), nullptr};
    execv("/proc/self/exe", args);
    Die("execv /proc/self/exe");
  }
  if (o.only_fork) {
    ForkWorkers(o, r);
    printf("done\n");
    return 0;
  }
  if (!o.open_uverbs.empty()) {
    // What a statically linked libibverbs (or mlx5dv_open_device) leaves behind:
    // descriptors no interposed call explains, and maybe MADV_DONTFORK pages.
    int fd = o.open_via_syscall
                 ? static_cast<int>(
                       syscall(SYS_openat, AT_FDCWD, o.open_uverbs.c_str(), O_RDWR | O_CLOEXEC))
                 : open(o.open_uverbs.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) Die(o.open_uverbs.c_str());
    printf("opened: %s\n", o.open_uverbs.c_str());
    if (o.raw_dontfork) {
      const long page = sysconf(_SC_PAGESIZE);
      void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) Die("mmap");
      memset(p, 'p', page);
      if (madvise(p, page, MADV_DONTFORK) != 0) Die("madvise");
      r.buf = static_cast<char*>(p);
      printf("dontfork: addr=%p\n", p);
    }
    ForkWorkers(o, r);
    close(fd);
    printf("done\n");
    return 0;
  }
  if (o.fork_first) {
    ForkWorkers(o, r);
  }
  VerbsApi api = LoadVerbs(o.dlopen_local);
  g_api = &api;
  if (o.fork_safe) {
    if (int rc = api.fork_init(); rc != 0) DieRc("ibv_fork_init", rc);
  }
  fg_test_init_rdma(api, &r);
  fg_test_register_buffers(api, o, &r);
  if (o.reg_invalid) {
    // A failing call: the shim must pass the NULL and errno through untouched.
    errno = 0;
    ibv_mr* bad = api.reg_mr(r.pd, r.buf, 0, IBV_ACCESS_LOCAL_WRITE);
    int e = errno;
    printf("invalid reg: mr=%s errno=%d\n", bad ? "non-null" : "null", e);
    if (bad) r.mrs.push_back(bad);
  }
  if (o.fork_init_after) {
    printf("fork_init_after: ret=%d\n", api.fork_init());
  }
  // --threads: registrations from several threads at once; the threads are
  // alive while the parent forks.
  std::vector<std::thread> threads;
  std::vector<ibv_mr*> thread_mrs(o.threads, nullptr);
  std::vector<void*> thread_pages(o.threads, nullptr);
  std::barrier registered(o.threads + 1), forked(o.threads + 1);
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] {
      const long page = sysconf(_SC_PAGESIZE);
      if (posix_memalign(&thread_pages[t], page, page) != 0) Die("posix_memalign");
      thread_mrs[t] = api.reg_mr(r.pd, thread_pages[t], page, IBV_ACCESS_LOCAL_WRITE);
      if (!thread_mrs[t]) Die("ibv_reg_mr (thread)");
      registered.arrive_and_wait();
      forked.arrive_and_wait();
    });
  }
  if (o.threads > 0) {
    registered.arrive_and_wait();
    printf("thread-registered: n=%d\n", o.threads);
  }
  // --churn: another thread is inside the verbs wrappers while the parent forks.
  std::atomic<bool> stop_churn{false};
  std::atomic<long> churned{0};
  std::thread churn;
  if (o.churn) {
    churn = std::thread([&] {
      const long page = sysconf(_SC_PAGESIZE);
      void* p = nullptr;
      if (posix_memalign(&p, page, page) != 0) Die("posix_memalign");
      // Capped so that the event log stays small.
      while ((!stop_churn.load() || churned.load() == 0) && churned.load() < 5000) {
        ibv_mr* mr = api.reg_mr(r.pd, p, page, IBV_ACCESS_LOCAL_WRITE);
        if (!mr) Die("ibv_reg_mr (churn)");
        if (int rc = api.dereg_mr(mr); rc != 0) DieRc("ibv_dereg_mr (churn)", rc);
        churned.fetch_add(1);
      }
      // Past the cap the thread stays alive until the parent is done forking: every fork
      // then copies a process with this thread in it, whatever the speed. (Under TSan a
      // thread that ended unjoined before a fork is a "thread leak" at the child's _exit,
      // exit status 66; one alive at the fork turns the child's reports off.)
      while (!stop_churn.load()) usleep(1000);
      if (o.show_dontfork) {
        printf("churn page dontfork: %s\n", MappingIsDontfork(p) ? "yes" : "no");
      }
      free(p);
    });
    while (churned.load() == 0) sched_yield();  // the thread is running
  }
  if (o.dereg_before_fork) {
    fg_test_release_rdma(api, &r);
    printf("released\n");
  }
  if (o.atfork_handlers) {
    if (pthread_atfork(AtforkPrepare, AtforkParent, AtforkChild) != 0) Die("pthread_atfork");
  }
  if (o.segv_handler) {
    struct sigaction sa {};
    sa.sa_handler = ProgramSegvHandler;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, nullptr) != 0) Die("sigaction");
  }
  if (!o.fork_first) {
    ForkWorkers(o, r);
  }
  if (o.atfork_handlers) {
    bool held = pthread_mutex_trylock(&g_atfork_mutex) != 0;
    if (!held) pthread_mutex_unlock(&g_atfork_mutex);
    printf("atfork: prepare=%d parent=%d mutex=%s\n", g_atfork_prepare.load(),
           g_atfork_parent.load(), held ? "held" : "free");
  }
  if (o.churn) {
    stop_churn.store(true);
    churn.join();
    printf("churn: iterations=%ld\n", churned.load());
  }
  if (o.threads > 0) {
    forked.arrive_and_wait();
    for (std::thread& t : threads) t.join();
    for (ibv_mr* mr : thread_mrs) r.mrs.insert(r.mrs.begin(), mr);  // dereg before the PD goes
  }
  // The parent carries on: its own copy of the buffer is untouched.
  for (size_t i = 0; i < r.buf_len; ++i) {
    if (r.buf[i] != 'p') {
      fprintf(stderr, "fork_after_rdma: error: parent buffer changed at %zu\n", i);
      return 2;
    }
  }
  printf("parent continues: buffer intact\n");
  if (o.exec_at_end) {
    for (int i = 0; i < 3; ++i) {
      ibv_mr* mr = api.reg_mr(r.pd, r.buf, r.buf_len, IBV_ACCESS_LOCAL_WRITE);
      if (mr == nullptr) Die("ibv_reg_mr (exec-at-end)");
      if (int rc = api.dereg_mr(mr); rc != 0) DieRc("ibv_dereg_mr (exec-at-end)", rc);
    }
    printf("done\n");
    fflush(stdout);
    char* const argv[] = {const_cast<char*>("true"), nullptr};
    execv("/bin/true", argv);
    Die("execv /bin/true");
  }
  fg_test_release_rdma(api, &r);
  if (r.buf_mapped) {
    munmap(r.buf, r.buf_len);
  } else {
    free(r.buf);
  }
  free(r.heap_block);
  for (void* p : thread_pages) free(p);
  printf("done\n");
  return 0;
}
