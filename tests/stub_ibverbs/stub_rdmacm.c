// A stub librdmacm.so.1 (symbols at RDMACM_1.0, as rdma-core's) for host tests
// of the forkguard shim. Just enough for "create a channel and an id, resolve
// an address, wait for ADDR_RESOLVED": like the real library, address
// resolution opens the device and allocates a PD through libibverbs' exported
// functions (PLT calls an interposer sees). The event channel is /dev/null.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum { kMaxPending = 8 };

struct StubChannel {
  struct rdma_event_channel channel;  // first member: the user's pointer
  pthread_mutex_t lock;
  struct rdma_cm_event pending[kMaxPending];
  int head;
  int count;
};

static struct StubChannel* ChannelOf(struct rdma_event_channel* c) {
  return (struct StubChannel*)c;
}

EXPORT struct rdma_event_channel* rdma_create_event_channel(void) {
  struct StubChannel* c = calloc(1, sizeof(*c));
  if (!c) {
    errno = ENOMEM;
    return NULL;
  }
  c->channel.fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (c->channel.fd < 0) {
    int saved = errno;
    free(c);
    errno = saved;
    return NULL;
  }
  pthread_mutex_init(&c->lock, NULL);
  return &c->channel;
}

EXPORT void rdma_destroy_event_channel(struct rdma_event_channel* channel) {
  if (!channel) return;
  struct StubChannel* c = ChannelOf(channel);
  close(c->channel.fd);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

EXPORT int rdma_create_id(struct rdma_event_channel* channel, struct rdma_cm_id** id, void* context,
                          enum rdma_port_space ps) {
  if (!id) {
    errno = EINVAL;
    return -1;
  }
  struct rdma_cm_id* cm = calloc(1, sizeof(*cm));
  if (!cm) {
    errno = ENOMEM;
    return -1;
  }
  cm->channel = channel;
  cm->context = context;
  cm->ps = ps;
  *id = cm;
  return 0;
}

EXPORT int rdma_destroy_id(struct rdma_cm_id* id) {
  if (!id) {
    errno = EINVAL;
    return -1;
  }
  if (id->pd) ibv_dealloc_pd(id->pd);
  if (id->verbs) ibv_close_device(id->verbs);
  free(id);
  return 0;
}

static int Post(struct rdma_cm_id* id, enum rdma_cm_event_type type) {
  struct StubChannel* c = ChannelOf(id->channel);
  pthread_mutex_lock(&c->lock);
  if (c->count == kMaxPending) {
    pthread_mutex_unlock(&c->lock);
    errno = ENOMEM;
    return -1;
  }
  struct rdma_cm_event* e = &c->pending[(c->head + c->count) % kMaxPending];
  memset(e, 0, sizeof(*e));
  e->id = id;
  e->event = type;
  ++c->count;
  pthread_mutex_unlock(&c->lock);
  return 0;
}

// The real librdmacm binds the id to the device that owns the address and
// allocates a PD on it (ucma_get_device); any address resolves here.
EXPORT int rdma_resolve_addr(struct rdma_cm_id* id, struct sockaddr* src_addr,
                             struct sockaddr* dst_addr, int timeout_ms) {
  (void)src_addr;
  (void)timeout_ms;
  if (!id || !dst_addr || !id->channel) {
    errno = EINVAL;
    return -1;
  }
  if (!id->verbs) {
    int n = 0;
    struct ibv_device** list = ibv_get_device_list(&n);
    if (!list) return -1;
    if (n == 0) {
      ibv_free_device_list(list);
      errno = ENODEV;
      return -1;
    }
    id->verbs = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (!id->verbs) return -1;
    id->pd = ibv_alloc_pd(id->verbs);
    if (!id->pd) return -1;
    id->port_num = 1;
  }
  return Post(id, RDMA_CM_EVENT_ADDR_RESOLVED);
}

EXPORT int rdma_get_cm_event(struct rdma_event_channel* channel, struct rdma_cm_event** event) {
  if (!channel || !event) {
    errno = EINVAL;
    return -1;
  }
  struct StubChannel* c = ChannelOf(channel);
  pthread_mutex_lock(&c->lock);
  if (c->count == 0) {
    // A blocking wait would hang a test forever: the stub never has
    // asynchronous events, so report what a non-blocking channel would.
    pthread_mutex_unlock(&c->lock);
    errno = EAGAIN;
    return -1;
  }
  struct rdma_cm_event* e = malloc(sizeof(*e));
  if (!e) {
    pthread_mutex_unlock(&c->lock);
    errno = ENOMEM;
    return -1;
  }
  *e = c->pending[c->head];
  c->head = (c->head + 1) % kMaxPending;
  --c->count;
  pthread_mutex_unlock(&c->lock);
  *event = e;
  return 0;
}

EXPORT int rdma_ack_cm_event(struct rdma_cm_event* event) {
  if (!event) {
    errno = EINVAL;
    return -1;
  }
  free(event);
  return 0;
}

EXPORT const char* rdma_event_str(enum rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR:
      return "RDMA_CM_EVENT_ADDR_ERROR";
    default:
      return "UNKNOWN EVENT";
  }
}
