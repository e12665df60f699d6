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

// ---- devices -------------------------------------------------------------

struct ibv_device** stub_get_device_list_1_1(int* num_devices);
SYMVER(stub_get_device_list_1_1, "ibv_get_device_list@@IBVERBS_1.1");
EXPORT struct ibv_device** stub_get_device_list_1_1(int* num_devices) {
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

void stub_free_device_list_1_1(struct ibv_device** list);
SYMVER(stub_free_device_list_1_1, "ibv_free_device_list@@IBVERBS_1.1");
EXPORT void stub_free_device_list_1_1(struct ibv_device** list) { free(list); }

const char* stub_get_device_name_1_1(struct ibv_device* device);
SYMVER(stub_get_device_name_1_1, "ibv_get_device_name@@IBVERBS_1.1");
EXPORT const char* stub_get_device_name_1_1(struct ibv_device* device) { return device->name; }

struct ibv_context* stub_open_device_1_1(struct ibv_device* device);
SYMVER(stub_open_device_1_1, "ibv_open_device@@IBVERBS_1.1");
EXPORT struct ibv_context* stub_open_device_1_1(struct ibv_device* device) {
  if (!device) {
    errno = EINVAL;
    return NULL;
  }
  struct ibv_context* ctx = calloc(1, sizeof(*ctx));
  if (!ctx) {
    errno = ENOMEM;
    return NULL;
  }
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

int stub_close_device_1_1(struct ibv_context* context);
SYMVER(stub_close_device_1_1, "ibv_close_device@@IBVERBS_1.1");
EXPORT int stub_close_device_1_1(struct ibv_context* context) {
  if (!context) return EINVAL;
  close(context->cmd_fd);
  pthread_mutex_destroy(&context->mutex);
  free(context);
  return 0;
}

// ---- protection domains --------------------------------------------------

struct ibv_pd* stub_alloc_pd_1_1(struct ibv_context* context);
SYMVER(stub_alloc_pd_1_1, "ibv_alloc_pd@@IBVERBS_1.1");
EXPORT struct ibv_pd* stub_alloc_pd_1_1(struct ibv_context* context) {
  if (!context) {
    errno = EINVAL;
    return NULL;
  }
  struct ibv_pd* pd = calloc(1, sizeof(*pd));
  if (!pd) {
    errno = ENOMEM;
    return NULL;
  }
  pd->context = context;
  pthread_mutex_lock(&g_lock);
  pd->handle = g_next_key++;
  pthread_mutex_unlock(&g_lock);
  return pd;
}

int stub_dealloc_pd_1_1(struct ibv_pd* pd);
SYMVER(stub_dealloc_pd_1_1, "ibv_dealloc_pd@@IBVERBS_1.1");
EXPORT int stub_dealloc_pd_1_1(struct ibv_pd* pd) {
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

EXPORT int ibv_dontfork_range(void* base, size_t size) {
  if (!g_fork_enabled || size == 0) return 0;
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = (uintptr_t)base & ~(uintptr_t)(page - 1);
  uintptr_t end = ((uintptr_t)base + size + page - 1) & ~(uintptr_t)(page - 1);
  return madvise((void*)start, end - start, MADV_DONTFORK) == 0 ? 0 : errno;
}

EXPORT int ibv_dofork_range(void* base, size_t size) {
  if (!g_fork_enabled || size == 0) return 0;
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = (uintptr_t)base & ~(uintptr_t)(page - 1);
  uintptr_t end = ((uintptr_t)base + size + page - 1) & ~(uintptr_t)(page - 1);
  return madvise((void*)start, end - start, MADV_DOFORK) == 0 ? 0 : errno;
}

// ---- memory regions --------------------------------------------------------

EXPORT struct ibv_mr* ibv_reg_mr_iova2(struct ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                       unsigned int access) {
  (void)iova;
  (void)access;
  if (!pd || length == 0) {
    errno = EINVAL;
    return NULL;
  }
  struct StubMr* m = calloc(1, sizeof(*m));
  if (!m) {
    errno = ENOMEM;
    return NULL;
  }
  long page = sysconf(_SC_PAGESIZE);
  m->page_start = (uintptr_t)addr & ~(uintptr_t)(page - 1);
  m->page_end = ((uintptr_t)addr + length + page - 1) & ~(uintptr_t)(page - 1);

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
  pthread_mutex_unlock(&g_lock);
  return &m->mr;
}

struct ibv_mr* stub_reg_mr_1_1(struct ibv_pd* pd, void* addr, size_t length, int access);
SYMVER(stub_reg_mr_1_1, "ibv_reg_mr@@IBVERBS_1.1");
EXPORT struct ibv_mr* stub_reg_mr_1_1(struct ibv_pd* pd, void* addr, size_t length, int access) {
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
  if (!pd || length == 0 || fd < 0) {
    errno = EINVAL;
    return NULL;
  }
  struct StubMr* m = calloc(1, sizeof(*m));
  if (!m) {
    errno = ENOMEM;
    return NULL;
  }
  pthread_mutex_lock(&g_lock);
  g_registered_once = 1;
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = (void*)(uintptr_t)(iova + offset);
  m->mr.length = length;
  m->mr.handle = g_next_key;
  m->mr.lkey = g_next_key;
  m->mr.rkey = g_next_key;
  ++g_next_key;
  m->next = g_live_mrs;
  g_live_mrs = m;
  pthread_mutex_unlock(&g_lock);
  return &m->mr;
}

int stub_dereg_mr_1_1(struct ibv_mr* mr);
SYMVER(stub_dereg_mr_1_1, "ibv_dereg_mr@@IBVERBS_1.1");
EXPORT int stub_dereg_mr_1_1(struct ibv_mr* mr) {
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

struct ibv_device** stub_get_device_list_1_0(int* n);
SYMVER(stub_get_device_list_1_0, "ibv_get_device_list@IBVERBS_1.0");
EXPORT struct ibv_device** stub_get_device_list_1_0(int* n) {
  (void)n;
  StubCompatCalled("ibv_get_device_list");
  return NULL;
}

void stub_free_device_list_1_0(void** list);
SYMVER(stub_free_device_list_1_0, "ibv_free_device_list@IBVERBS_1.0");
EXPORT void stub_free_device_list_1_0(void** list) {
  (void)list;
  StubCompatCalled("ibv_free_device_list");
}

const char* stub_get_device_name_1_0(void* device);
SYMVER(stub_get_device_name_1_0, "ibv_get_device_name@IBVERBS_1.0");
EXPORT const char* stub_get_device_name_1_0(void* device) {
  (void)device;
  StubCompatCalled("ibv_get_device_name");
  return NULL;
}

void* stub_open_device_1_0(void* device);
SYMVER(stub_open_device_1_0, "ibv_open_device@IBVERBS_1.0");
EXPORT void* stub_open_device_1_0(void* device) {
  (void)device;
  StubCompatCalled("ibv_open_device");
  return NULL;
}

int stub_close_device_1_0(void* context);
SYMVER(stub_close_device_1_0, "ibv_close_device@IBVERBS_1.0");
EXPORT int stub_close_device_1_0(void* context) {
  (void)context;
  StubCompatCalled("ibv_close_device");
  return -1;
}

void* stub_alloc_pd_1_0(void* context);
SYMVER(stub_alloc_pd_1_0, "ibv_alloc_pd@IBVERBS_1.0");
EXPORT void* stub_alloc_pd_1_0(void* context) {
  (void)context;
  StubCompatCalled("ibv_alloc_pd");
  return NULL;
}

int stub_dealloc_pd_1_0(void* pd);
SYMVER(stub_dealloc_pd_1_0, "ibv_dealloc_pd@IBVERBS_1.0");
EXPORT int stub_dealloc_pd_1_0(void* pd) {
  (void)pd;
  StubCompatCalled("ibv_dealloc_pd");
  return -1;
}

void* stub_reg_mr_1_0(void* pd, void* addr, size_t length, int access);
SYMVER(stub_reg_mr_1_0, "ibv_reg_mr@IBVERBS_1.0");
EXPORT void* stub_reg_mr_1_0(void* pd, void* addr, size_t length, int access) {
  (void)pd;
  (void)addr;
  (void)length;
  (void)access;
  StubCompatCalled("ibv_reg_mr");
  return NULL;
}

int stub_dereg_mr_1_0(void* mr);
SYMVER(stub_dereg_mr_1_0, "ibv_dereg_mr@IBVERBS_1.0");
EXPORT int stub_dereg_mr_1_0(void* mr) {
  (void)mr;
  StubCompatCalled("ibv_dereg_mr");
  return -1;
}
