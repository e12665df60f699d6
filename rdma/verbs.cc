#include "rdma/verbs.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

namespace forkguard::rdma {
namespace {

void SetNonBlocking(int fd, const char* what) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    ThrowCallError("fcntl(O_NONBLOCK)", errno, what);
}

}  // namespace

std::string CmEventName(rdma_cm_event_type type) { return rdma_event_str(type); }

// ---- EventChannel ----

EventChannel::EventChannel() {
  channel_ = rdma_create_event_channel();
  if (!channel_) ThrowCallError("rdma_create_event_channel", errno);
  SetNonBlocking(channel_->fd, "rdma event channel");
}

EventChannel::~EventChannel() {
  if (channel_ && creator_.InCreator()) rdma_destroy_event_channel(channel_);
}

rdma_event_channel* EventChannel::get() const {
  creator_.Check("rdma event channel");
  return channel_;
}

int EventChannel::fd() const { return get()->fd; }

std::optional<EventChannel::Event> EventChannel::Get(int timeout_ms) {
  creator_.Check("rdma event channel");
  for (;;) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel_, &ev) == 0) {
      Event out{ev->event, ev->status, ev->id, ev->listen_id, {}};
      const auto& conn = ev->param.conn;
      if (conn.private_data && conn.private_data_len) {
        auto* p = static_cast<const uint8_t*>(conn.private_data);
        out.private_data.assign(p, p + conn.private_data_len);
      }
      rdma_ack_cm_event(ev);
      return out;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) ThrowCallError("rdma_get_cm_event", errno);
    pollfd p{channel_->fd, POLLIN, 0};
    int n = poll(&p, 1, timeout_ms);
    if (n < 0 && errno != EINTR) ThrowCallError("poll(rdma event channel)", errno);
    if (n == 0) return std::nullopt;
  }
}

// ---- AddrInfo ----

AddrInfo::AddrInfo(const std::string& host, const std::string& port, bool passive) {
  rdma_addrinfo hints{};
  hints.ai_flags = passive ? RAI_PASSIVE : 0;
  hints.ai_port_space = RDMA_PS_TCP;
  hints.ai_family = AF_INET;
  if (rdma_getaddrinfo(host.c_str(), port.c_str(), &hints, &info_))
    ThrowCallError("rdma_getaddrinfo", errno ? errno : EINVAL, host + ":" + port);
  if ((passive && !info_->ai_src_addr) || (!passive && !info_->ai_dst_addr))
    throw TransportError("rdma_getaddrinfo(" + host + ":" + port + ") returned no address");
}

AddrInfo::~AddrInfo() {
  if (info_) rdma_freeaddrinfo(info_);
}

// ---- CmId ----

CmId::CmId(EventChannel& channel) {
  if (rdma_create_id(channel.get(), &id_, nullptr, RDMA_PS_TCP))
    ThrowCallError("rdma_create_id", errno);
}

CmId::CmId(rdma_cm_id* adopted) : id_(adopted) {}

CmId::~CmId() {
  if (id_ && creator_.InCreator()) rdma_destroy_id(id_);
}

rdma_cm_id* CmId::get() const {
  creator_.Check("rdma_cm_id");
  return id_;
}

// ---- Device ----

Device::Device(const CmId& id) : context_(id.get()->verbs) {
  if (!context_)
    throw TransportError(
        "the rdma_cm_id is not bound to an RDMA device (bind/resolve an address that belongs to "
        "an RDMA-capable interface, e.g. the IP of rxe0's netdev)");
}

ibv_context* Device::get() const {
  creator_.Check("RDMA device context");
  return context_;
}

std::string Device::name() const { return ibv_get_device_name(get()->device); }

// ---- ProtectionDomain ----

ProtectionDomain::ProtectionDomain(const Device& device) {
  pd_ = ibv_alloc_pd(device.get());
  if (!pd_) ThrowCallError("ibv_alloc_pd", errno, device.name());
}

ProtectionDomain::~ProtectionDomain() {
  if (pd_ && creator_.InCreator()) ibv_dealloc_pd(pd_);
}

ibv_pd* ProtectionDomain::get() const {
  creator_.Check("protection domain");
  return pd_;
}

// ---- CompletionChannel ----

CompletionChannel::CompletionChannel(const Device& device) {
  channel_ = ibv_create_comp_channel(device.get());
  if (!channel_) ThrowCallError("ibv_create_comp_channel", errno);
  SetNonBlocking(channel_->fd, "completion channel");
}

CompletionChannel::~CompletionChannel() {
  if (channel_ && creator_.InCreator()) ibv_destroy_comp_channel(channel_);
}

ibv_comp_channel* CompletionChannel::get() const {
  creator_.Check("completion channel");
  return channel_;
}

int CompletionChannel::fd() const { return get()->fd; }

// ---- CompletionQueue ----

CompletionQueue::CompletionQueue(const Device& device, CompletionChannel& channel, int entries)
    : channel_(channel) {
  cq_ = ibv_create_cq(device.get(), entries, nullptr, channel.get(), 0);
  if (!cq_) ThrowCallError("ibv_create_cq", errno, std::to_string(entries) + " entries");
}

CompletionQueue::~CompletionQueue() {
  if (!cq_ || !creator_.InCreator()) return;
  // ibv_destroy_cq blocks until every event delivered for it was acknowledged.
  if (unacked_events_) ibv_ack_cq_events(cq_, unacked_events_);
  ibv_destroy_cq(cq_);
}

ibv_cq* CompletionQueue::get() const {
  creator_.Check("completion queue");
  return cq_;
}

int CompletionQueue::Poll(ibv_wc* wc, int max) {
  int n = ibv_poll_cq(get(), max, wc);
  if (n < 0) ThrowCallError("ibv_poll_cq", n == -1 ? EIO : -n);
  return n;
}

void CompletionQueue::RequestNotify() {
  int rc = ibv_req_notify_cq(get(), 0);
  if (rc) ThrowCallError("ibv_req_notify_cq", rc);
}

void CompletionQueue::ConsumeEvent() {
  creator_.Check("completion queue");
  ibv_cq* ev_cq = nullptr;
  void* ctx = nullptr;
  if (ibv_get_cq_event(channel_.get(), &ev_cq, &ctx)) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    ThrowCallError("ibv_get_cq_event", errno);
  }
  // Acknowledging takes a mutex: do it in batches.
  if (++unacked_events_ >= 64) {
    ibv_ack_cq_events(cq_, unacked_events_);
    unacked_events_ = 0;
  }
}

// ---- QueuePair ----

QueuePair::QueuePair(CmId& id, ProtectionDomain& pd, CompletionQueue& cq, uint32_t max_send_wr,
                     uint32_t max_recv_wr)
    : id_(id.get()) {
  ibv_qp_init_attr attr{};
  attr.send_cq = cq.get();
  attr.recv_cq = cq.get();
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = max_send_wr;
  attr.cap.max_recv_wr = max_recv_wr;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.sq_sig_all = 0;
  if (rdma_create_qp(id_, pd.get(), &attr))
    ThrowCallError("rdma_create_qp", errno,
                   "RC, " + std::to_string(max_send_wr) + " send / " + std::to_string(max_recv_wr) +
                       " recv WRs");
  qp_ = id_->qp;
}

QueuePair::~QueuePair() {
  if (qp_ && creator_.InCreator()) rdma_destroy_qp(id_);
}

ibv_qp* QueuePair::get() const {
  creator_.Check("queue pair");
  return qp_;
}

void QueuePair::PostSend(ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(get(), wr, &bad);
  if (rc) ThrowCallError("ibv_post_send", rc);
}

void QueuePair::PostRecv(ibv_recv_wr* wr) {
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(get(), wr, &bad);
  if (rc) ThrowCallError("ibv_post_recv", rc);
}

// ---- PageBuffer ----

PageBuffer::PageBuffer(size_t bytes) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_ = (bytes + page - 1) / page * page;
  void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) ThrowCallError("mmap", errno, std::to_string(size_) + " bytes");
  data_ = static_cast<std::byte*>(p);
}

PageBuffer::~PageBuffer() {
  if (data_) munmap(data_, size_);
}

// ---- MemoryRegion ----

MemoryRegion::MemoryRegion(ProtectionDomain& pd, void* addr, size_t bytes, int access)
    : begin_(static_cast<const std::byte*>(addr)), size_(bytes) {
  mr_ = ibv_reg_mr(pd.get(), addr, bytes, access);
  if (!mr_)
    ThrowCallError("ibv_reg_mr", errno,
                   std::to_string(bytes) + " bytes (memlock limit? `ulimit -l`)");
}

MemoryRegion::~MemoryRegion() {
  if (mr_ && creator_.InCreator()) ibv_dereg_mr(mr_);
}

ibv_mr* MemoryRegion::get() const {
  creator_.Check("memory region");
  return mr_;
}

uint32_t MemoryRegion::lkey() const { return get()->lkey; }
uint32_t MemoryRegion::rkey() const { return get()->rkey; }

bool MemoryRegion::Contains(const void* p, size_t n) const {
  auto* b = static_cast<const std::byte*>(p);
  return b >= begin_ && b + n <= begin_ + size_;
}

}  // namespace forkguard::rdma
