// A stub libibverbs.so.1 for host tests of the forkguard shim: no RDMA device,
// but the behaviour the shim depends on is real.
//  * Symbol versions as in rdma-core 44 (libibverbs.map beside this file): the
//    default IBVERBS_1.1 functions plus IBVERBS_1.0 compat versions. A compat
//    version here fails loudly (ENOSYS + a "stub-ibverbs: IBVERBS_1.0" line on
//    stderr), so a wrapper that forwards to the wrong version is caught.
//  * ibv_reg_mr and ibv_reg_mr_iova call ibv_reg_mr_iova2 through this
//    library's own PLT, and the RDMAV_FORK_SAFE / IBV_FORK_SAFE environment
//    variables call ibv_fork_init through the PLT, as rdma-core does: one user
//    call can pass several interposed wrappers.
//  * With fork support on, registration calls madvise(MADV_DONTFORK) on the
//    page-aligned range (a forked child really gets SIGSEGV); deregistration
//    undoes it when no other live MR shares the pages. ibv_fork_init after a
//    registration returns EINVAL and does nothing.
//  * Device files are /dev/null, never /dev/infiniband/*.
// Knobs for tests: FORKGUARD_STUB_FORK_STATUS=unneeded makes
// ibv_is_fork_initialized() report IBV_FORK_UNNEEDED while ranges are still
// marked (what rdma-core 44 does on a copy-on-fork kernel).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// verbs.h turns these into inline helpers; the library defines the functions.
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define EXPORT __attribute__((visibility("default")))
#define SYMVER(internal, versioned) __asm__(".symver " #internal "," versioned)

// stub_NAME_1_1, exported as the default version ibv_NAME@@IBVERBS_1.1 with the given
// parameters; the function's body follows the macro.
#define DEFAULT_1_1(ret, name, ...)                        \
  ret stub_##name##_1_1(__VA_ARGS__);                      \
  SYMVER(stub_##name##_1_1, "ibv_" #name "@@IBVERBS_1.1"); \
  EXPORT ret stub_##name##_1_1(__VA_ARGS__)

enum { kStubDevices = 2 };

struct StubMr {
  struct ibv_mr mr;
  uintptr_t page_start;
  uintptr_t page_end;
  int dontfork;
  struct StubMr* next;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

// A fork while another thread holds g_lock would leave it locked forever in the
// child (tests fork from one thread while another registers: --churn). The
// child gets a fresh lock; the lists it guards change by single stores.
static void StubChildReinitLock(void) { pthread_mutex_init(&g_lock, NULL); }
__attribute__((constructor)) static void StubRegisterAtfork(void) {
  pthread_atfork(NULL, NULL, StubChildReinitLock);
}
static pthread_once_t g_init_once = PTHREAD_ONCE_INIT;
static int g_fork_enabled;
static int g_registered_once;  // rdma-core's "too_late"
static struct StubMr* g_live_mrs;
static uint32_t g_next_key = 0x100;
static struct ibv_device g_devices[kStubDevices];

static void StubCompatCalled(const char* name) {
  fprintf(stderr, "stub-ibverbs: IBVERBS_1.0 compat %s called: wrong symbol version\n", name);
  errno = ENOSYS;
}

static void InitDevices(void) {
  for (int i = 0; i < kStubDevices; ++i) {
    struct ibv_device* d = &g_devices[i];
    memset(d, 0, sizeof(*d));
    snprintf(d->name, sizeof(d->name), "stub%d", i);
    snprintf(d->dev_name, sizeof(d->dev_name), "uverbs%d", i);
    snprintf(d->dev_path, sizeof(d->dev_path), "/dev/null");
    snprintf(d->ibdev_path, sizeof(d->ibdev_path), "/dev/null");
    d->node_type = IBV_NODE_CA;
    d->transport_type = IBV_TRANSPORT_IB;
  }
}

// rdma-core's ibverbs_init(): the environment turns fork support on through
// the exported ibv_fork_init (a PLT call, so an interposer sees it).
static void LibraryInit(void) {
  InitDevices();
  if (getenv("RDMAV_FORK_SAFE") || getenv("IBV_FORK_SAFE")) {
    if (ibv_fork_init() != 0) {
      fprintf(stderr, "Warning: fork()-safety requested but init failed\n");
    }
  }
}

// A zeroed object of `size` bytes for a call whose arguments are `valid`:
// NULL with errno EINVAL when they are not, ENOMEM when memory runs out.
static void* NewObject(int valid, size_t size) {
  if (!valid) {
    errno = EINVAL;
    return NULL;
  }
  void* p = calloc(1, size);
  if (!p) errno = ENOMEM;
  return p;
}

// ---- devices -------------------------------------------------------------

DEFAULT_1_1(struct ibv_device**, get_device_list, int* num_devices) {
  pthread_once(&g_init_once, LibraryInit);
  struct ibv_device** list = calloc(kStubDevices + 1, sizeof(*list));
  if (!list) {
    errno = ENOMEM;
    return NULL;
  }
  for (int i = 0; i < kStubDevices; ++i) list[i] = &g_devices[i];
  if (num_devices) *num_devices = kStubDevices;
  return list;
}

DEFAULT_1_1(void, free_device_list, struct ibv_device** list) { free(list); }

DEFAULT_1_1(const char*, get_device_name, struct ibv_device* device) { return device->name; }

DEFAULT_1_1(struct ibv_context*, open_device, struct ibv_device* device) {
  struct ibv_context* ctx = NewObject(device != NULL, sizeof(*ctx));
  if (!ctx) return NULL;
  ctx->device = device;
  ctx->cmd_fd = open(device->dev_path, O_RDWR | O_CLOEXEC);
  ctx->async_fd = -1;
  if (ctx->cmd_fd < 0) {
    int saved = errno;
    free(ctx);
    errno = saved;
    return NULL;
  }
  pthread_mutex_init(&ctx->mutex, NULL);
  return ctx;
}

DEFAULT_1_1(int, close_device, struct ibv_context* context) {
  if (!context) return EINVAL;
  close(context->cmd_fd);
  pthread_mutex_destroy(&context->mutex);
  free(context);
  return 0;
}

// ---- protection domains --------------------------------------------------

DEFAULT_1_1(struct ibv_pd*, alloc_pd, struct ibv_context* context) {
  struct ibv_pd* pd = NewObject(context != NULL, sizeof(*pd));
  if (!pd) return NULL;
  pd->context = context;
  pthread_mutex_lock(&g_lock);
  pd->handle = g_next_key++;
  pthread_mutex_unlock(&g_lock);
  return pd;
}

DEFAULT_1_1(int, dealloc_pd, struct ibv_pd* pd) {
  if (!pd) return EINVAL;
  free(pd);
  return 0;
}

// ---- fork support ----------------------------------------------------------

EXPORT int ibv_fork_init(void) {
  pthread_mutex_lock(&g_lock);
  int ret = 0;
  if (g_fork_enabled) {
    ret = 0;
  } else if (g_registered_once) {
    ret = EINVAL;  // like rdma-core: too late, nothing changes
  } else {
    g_fork_enabled = 1;
  }
  pthread_mutex_unlock(&g_lock);
  return ret;
}

EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) {
  pthread_mutex_lock(&g_lock);
  int enabled = g_fork_enabled;
  pthread_mutex_unlock(&g_lock);
  const char* status = getenv("FORKGUARD_STUB_FORK_STATUS");
  if (status && strcmp(status, "unneeded") == 0) return IBV_FORK_UNNEEDED;
  return enabled ? IBV_FORK_ENABLED : IBV_FORK_DISABLED;
}

static int PageRangeShared(const struct StubMr* self) {
  for (const struct StubMr* m = g_live_mrs; m; m = m->next) {
    if (m != self && m->dontfork && m->page_start < self->page_end &&
        self->page_start < m->page_end) {
      return 1;
    }
  }
  return 0;
}

// [*start, *end): the pages that [base, base + size) touches.
static void PageRange(const void* base, size_t size, uintptr_t* start, uintptr_t* end) {
  long page = sysconf(_SC_PAGESIZE);
  *start = (uintptr_t)base & ~(uintptr_t)(page - 1);
  *end = ((uintptr_t)base + size + page - 1) & ~(uintptr_t)(page - 1);
}

// ibv_dontfork_range / ibv_dofork_range: madvise the pages when fork support is on.
static int AdviseRange(void* base, size_t size, int advice) {
  if (!g_fork_enabled || size == 0) return 0;
  uintptr_t start, end;
  PageRange(base, size, &start, &end);
  return madvise((void*)start, end - start, advice) == 0 ? 0 : errno;
}

EXPORT int ibv_dontfork_range(void* base, size_t size) {
  return AdviseRange(base, size, MADV_DONTFORK);
}

EXPORT int ibv_dofork_range(void* base, size_t size) {
  return AdviseRange(base, size, MADV_DOFORK);
}

// ---- memory regions --------------------------------------------------------

// Fills in m's ibv_mr under a fresh key and puts m on the live list (g_lock held).
static void LinkMr(struct StubMr* m, struct ibv_pd* pd, void* addr, size_t length) {
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = g_next_key;
  m->mr.lkey = g_next_key;
  m->mr.rkey = g_next_key;
  ++g_next_key;
  m->next = g_live_mrs;
  g_live_mrs = m;
}

EXPORT struct ibv_mr* ibv_reg_mr_iova2(struct ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                       unsigned int access) {
  (void)iova;
  (void)access;
  struct StubMr* m = NewObject(pd && length != 0, sizeof(*m));
  if (!m) return NULL;
  PageRange(addr, length, &m->page_start, &m->page_end);

  pthread_mutex_lock(&g_lock);
  g_registered_once = 1;
  // Exported helper called through the PLT, as in rdma-core.
  int rc = ibv_dontfork_range(addr, length);
  if (rc != 0) {
    pthread_mutex_unlock(&g_lock);
    free(m);
    errno = rc;
    return NULL;
  }
  m->dontfork = g_fork_enabled;
  LinkMr(m, pd, addr, length);
  pthread_mutex_unlock(&g_lock);
  return &m->mr;
}

DEFAULT_1_1(struct ibv_mr*, reg_mr, struct ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

EXPORT struct ibv_mr* ibv_reg_mr_iova(struct ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                      int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

// dma-buf memory is not mapped by the registration: nothing to madvise.
EXPORT struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd* pd, uint64_t offset, size_t length,
                                        uint64_t iova, int fd, int access) {
  (void)access;
  struct StubMr* m = NewObject(pd && length != 0 && fd >= 0, sizeof(*m));
  if (!m) return NULL;
  pthread_mutex_lock(&g_lock);
  g_registered_once = 1;
  LinkMr(m, pd, (void*)(uintptr_t)(iova + offset), length);
  pthread_mutex_unlock(&g_lock);
  return &m->mr;
}

DEFAULT_1_1(int, dereg_mr, struct ibv_mr* mr) {
  if (!mr) return EINVAL;
  struct StubMr* m = (struct StubMr*)mr;  // mr is the first member
  pthread_mutex_lock(&g_lock);
  struct StubMr** link = &g_live_mrs;
  while (*link && *link != m) link = &(*link)->next;
  if (!*link) {
    pthread_mutex_unlock(&g_lock);
    return EINVAL;
  }
  *link = m->next;
  if (m->dontfork && !PageRangeShared(m)) {
    madvise((void*)m->page_start, m->page_end - m->page_start, MADV_DOFORK);
  }
  pthread_mutex_unlock(&g_lock);
  free(m);
  return 0;
}

// ---- IBVERBS_1.0 compat versions: reaching one is a forwarding bug --------

// stub_NAME_1_0, exported as ibv_NAME@IBVERBS_1.0 with the given parameters
// (unused): reports the call and returns `failed`.
#define COMPAT_1_0(ret, name, failed, ...)                \
  ret stub_##name##_1_0(__VA_ARGS__);                     \
  SYMVER(stub_##name##_1_0, "ibv_" #name "@IBVERBS_1.0"); \
  EXPORT ret stub_##name##_1_0(__VA_ARGS__) {             \
    StubCompatCalled("ibv_" #name);                       \
    return failed;                                        \
  }
#define UNUSED __attribute__((unused))

COMPAT_1_0(struct ibv_device**, get_device_list, NULL, UNUSED int* n)
COMPAT_1_0(void, free_device_list, /* nothing */, UNUSED void** list)
COMPAT_1_0(const char*, get_device_name, NULL, UNUSED void* device)
COMPAT_1_0(void*, open_device, NULL, UNUSED void* device)
COMPAT_1_0(int, close_device, -1, UNUSED void* context)
COMPAT_1_0(void*, alloc_pd, NULL, UNUSED void* context)
COMPAT_1_0(int, dealloc_pd, -1, UNUSED void* pd)
COMPAT_1_0(void*, reg_mr, NULL, UNUSED void* pd, UNUSED void* addr, UNUSED size_t length,
           UNUSED int access)
COMPAT_1_0(int, dereg_mr, -1, UNUSED void* mr)
