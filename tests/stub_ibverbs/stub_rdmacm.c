// A stub librdmacm.so.1 (symbols at RDMACM_1.0, as rdma-core's) for host tests
// of the forkguard shim. Just enough for "create a channel and an id, resolve
// an address, wait for ADDR_RESOLVED": like the real library, address
// resolution opens the device and allocates a PD through libibverbs' exported
// functions (PLT calls an interposer sees). rdma_create_ep, as in rdma-core,
// calls rdma_create_event_channel / rdma_create_id / rdma_resolve_addr through
// the PLT: one user call, several wrappers. The event channel is /dev/null.
#define _GNU_SOURCE
#include <arpa/inet.h>
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

struct StubId {
  struct rdma_cm_id id;  // first member: the user's pointer
  int owns_channel;      // rdma_create_ep's synchronous channel
};

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
  struct StubId* s = calloc(1, sizeof(*s));
  if (!s) {
    errno = ENOMEM;
    return -1;
  }
  if (!channel) {
    // Like librdmacm's synchronous ids: a private channel, through the PLT.
    channel = rdma_create_event_channel();
    if (!channel) {
      free(s);
      return -1;
    }
    s->owns_channel = 1;
  }
  s->id.channel = channel;
  s->id.context = context;
  s->id.ps = ps;
  *id = &s->id;
  return 0;
}

EXPORT int rdma_destroy_id(struct rdma_cm_id* id) {
  if (!id) {
    errno = EINVAL;
    return -1;
  }
  struct StubId* s = (struct StubId*)id;
  if (id->pd) ibv_dealloc_pd(id->pd);
  if (id->verbs) ibv_close_device(id->verbs);
  if (s->owns_channel) rdma_destroy_event_channel(id->channel);
  free(s);
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

EXPORT int rdma_getaddrinfo(const char* node, const char* service,
                            const struct rdma_addrinfo* hints, struct rdma_addrinfo** res) {
  if (!node || !res) {
    errno = EINVAL;
    return -1;
  }
  struct rdma_addrinfo* ai = calloc(1, sizeof(*ai));
  struct sockaddr_in* dst = calloc(1, sizeof(*dst));
  if (!ai || !dst) {
    free(ai);
    free(dst);
    errno = ENOMEM;
    return -1;
  }
  dst->sin_family = AF_INET;
  dst->sin_port = htons(service ? (uint16_t)atoi(service) : 0);
  if (inet_pton(AF_INET, node, &dst->sin_addr) != 1) {
    free(ai);
    free(dst);
    errno = EADDRNOTAVAIL;
    return -1;
  }
  ai->ai_family = AF_INET;
  ai->ai_port_space = hints ? hints->ai_port_space : RDMA_PS_TCP;
  ai->ai_qp_type = hints ? hints->ai_qp_type : 0;
  ai->ai_flags = hints ? hints->ai_flags : 0;
  ai->ai_dst_addr = (struct sockaddr*)dst;
  ai->ai_dst_len = sizeof(*dst);
  *res = ai;
  return 0;
}

EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo* res) {
  if (!res) return;
  free(res->ai_dst_addr);
  free(res);
}

// Active side only: resolve the address synchronously (no QP: pd and
// qp_init_attr must be NULL here).
EXPORT int rdma_create_ep(struct rdma_cm_id** id, struct rdma_addrinfo* res, struct ibv_pd* pd,
                          struct ibv_qp_init_attr* qp_init_attr) {
  if (!id || !res || pd || qp_init_attr || (res->ai_flags & RAI_PASSIVE)) {
    errno = EINVAL;
    return -1;
  }
  struct rdma_cm_id* cm = NULL;
  if (rdma_create_id(NULL, &cm, NULL, (enum rdma_port_space)res->ai_port_space) != 0) return -1;
  if (rdma_resolve_addr(cm, res->ai_src_addr, res->ai_dst_addr, 2000) != 0) {
    int saved = errno;
    rdma_destroy_id(cm);
    errno = saved;
    return -1;
  }
  struct rdma_cm_event* ev = NULL;
  if (rdma_get_cm_event(cm->channel, &ev) != 0) {
    int saved = errno;
    rdma_destroy_id(cm);
    errno = saved;
    return -1;
  }
  rdma_ack_cm_event(ev);
  *id = cm;
  return 0;
}

EXPORT void rdma_destroy_ep(struct rdma_cm_id* id) { rdma_destroy_id(id); }
