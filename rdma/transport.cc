#include "rdma/transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <string.h>

#include <chrono>
#include <stdexcept>

#include "loader/crc32c.h"

namespace forkguard::rdma {
namespace {

constexpr uint32_t kConnectMagic = 0x46475431;  // "FGT1"
constexpr uint32_t kHeaderMagic = 0x46474248;   // "FGBH"
constexpr uint32_t kFlagEnd = 1;                // end of stream, no payload
constexpr uint32_t kFlagCrc = 2;                // crc is CRC32C of the payload
constexpr size_t kHeaderBytes = 64;

// Receiver -> sender in rdma_connect()'s private data (<= 56 bytes on IB/RoCE).
struct ConnectRequestData {
  uint32_t magic;
  uint32_t slots;
  uint64_t slot_bytes;
  uint64_t ring_addr;  // headers at ring_addr, slot data at ring_addr + header_bytes
  uint64_t scratch_addr;
  uint32_t ring_rkey;
  uint32_t scratch_rkey;
  uint32_t header_bytes;
  uint32_t reserved;
};
static_assert(sizeof(ConnectRequestData) <= 56);

// Sender -> receiver in rdma_accept()'s private data.
struct AcceptData {
  uint32_t magic;
  uint32_t scratch_rkey;
  uint64_t scratch_addr;
};

struct BatchHeader {
  uint32_t magic;
  uint32_t flags;
  uint64_t seq;
  uint64_t bytes;
  uint64_t tag;
  uint32_t crc;
  uint8_t reserved[28];
};
static_assert(sizeof(BatchHeader) == kHeaderBytes);

using Clock = std::chrono::steady_clock;

int64_t MsUntil(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
}

std::string WcError(const ibv_wc& wc) {
  std::string s = ibv_wc_status_str(wc.status);
  switch (wc.status) {
    case IBV_WC_RETRY_EXC_ERR:
      s += " (no ACK from the peer after every retry: peer gone or link down)";
      break;
    case IBV_WC_RNR_RETRY_EXC_ERR:
      s += " (peer posted no receive buffer in time)";
      break;
    case IBV_WC_WR_FLUSH_ERR:
      s += " (queue pair already in error: the connection broke earlier)";
      break;
    case IBV_WC_REM_ACCESS_ERR:
      s += " (the peer refused the RDMA write: its registered memory is gone -- the peer closed, "
           "died or lost its device -- or the slot address/rkey is invalid)";
      break;
    default:
      break;
  }
  return s + " [status " + std::to_string(wc.status) + ", vendor_err " +
         std::to_string(wc.vendor_err) + "]";
}

}  // namespace

std::pair<std::string, std::string> SplitHostPort(const std::string& addr) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == addr.size())
    throw std::invalid_argument("address '" + addr + "' is not IP:PORT");
  return {addr.substr(0, colon), addr.substr(colon + 1)};
}

// ============================== Endpoint ==============================

Endpoint::Endpoint(const TransportOptions& options) : options_(options) {}

Endpoint::~Endpoint() {
  if (creator_.InCreator() && connected_) {
    closing_ = true;
    rdma_disconnect(id_->get());  // best effort; errors do not matter here
  }
}

void Endpoint::OpenDevice(const CmId& id) {
  device_ = std::make_unique<Device>(id);
  device_name_ = device_->name();
  pd_ = std::make_unique<ProtectionDomain>(*device_);
  scratch_ = std::make_unique<PageBuffer>(64);
  scratch_mr_ = std::make_unique<MemoryRegion>(*pd_, scratch_->data(), scratch_->size(),
                                               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
}

void Endpoint::CreateQueuePair(uint32_t send_wr, uint32_t recv_wr) {
  if (id_->get()->verbs != device_->get())
    throw TransportError("connection arrived on device " +
                         std::string(ibv_get_device_name(id_->get()->verbs->device)) +
                         " but memory was registered on " + device_name_);
  cq_channel_ = std::make_unique<CompletionChannel>(*device_);
  cq_ = std::make_unique<CompletionQueue>(*device_, *cq_channel_,
                                          static_cast<int>(send_wr + recv_wr + 8));
  qp_ = std::make_unique<QueuePair>(*id_, *pd_, *cq_, send_wr, recv_wr);
  send_wr_capacity_ = send_wr;
}

void Endpoint::SetAckTimeout() {
  uint8_t t = options_.ack_timeout;
  if (rdma_set_option(id_->get(), RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof t))
    ThrowCallError("rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT)", errno);
}

EventChannel::Event Endpoint::WaitCmEvent(rdma_cm_event_type want, const char* doing,
                                          int timeout_ms) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int64_t left = MsUntil(deadline);
    auto ev = left > 0 ? events_.Get(static_cast<int>(left)) : std::nullopt;
    if (!ev)
      throw TransportError(std::string(doing) + ": no " + CmEventName(want) + " within " +
                           std::to_string(timeout_ms) + " ms");
    if (ev->type == want && ev->status == 0) return *ev;
    if (ev->type == RDMA_CM_EVENT_REJECTED)
      throw TransportError(std::string(doing) + ": connection refused (" + CmEventName(ev->type) +
                           ", status " + std::to_string(ev->status) +
                           "): nobody is listening on that address and port, or it refused us");
    throw TransportError(std::string(doing) + ": got " + CmEventName(ev->type) + " (status " +
                         std::to_string(ev->status) +
                         (ev->status < 0 ? ": " + std::string(strerror(-ev->status)) : "") +
                         ") instead of " + CmEventName(want));
  }
}

int Endpoint::DrainCompletions() {
  int progress = 0;
  ibv_wc wc[16];
  for (;;) {
    int n = cq_->Poll(wc, 16);
    for (int i = 0; i < n; ++i) {
      if (wc[i].wr_id == kHeartbeatWrId) {
        heartbeat_inflight_ = false;
        --send_wr_inflight_;
        if (wc[i].status != IBV_WC_SUCCESS) {
          connected_ = false;
          OnBroken("the link heartbeat (an 8-byte RDMA WRITE to the peer) failed: " +
                   WcError(wc[i]));
        }
        continue;
      }
      if (HandleCompletion(wc[i])) ++progress;
    }
    if (n < 16) return progress;
  }
}

void Endpoint::HandleCmEvents() {
  while (auto ev = events_.Get(0)) {
    switch (ev->type) {
      case RDMA_CM_EVENT_DISCONNECTED:
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
      case RDMA_CM_EVENT_ADDR_CHANGE:
      case RDMA_CM_EVENT_TIMEWAIT_EXIT:
        if (closing_) {  // we are closing too: the peer's disconnect is expected
          connected_ = false;
          break;
        }
        connected_ = false;
        DrainCompletions();  // whatever completed before the break still counts
        OnBroken("connection event " + CmEventName(ev->type) +
                 (ev->type == RDMA_CM_EVENT_DEVICE_REMOVAL ? " (the RDMA device/link was removed)"
                                                           : " (the peer closed or died)"));
        break;  // not reached: OnBroken throws
      case RDMA_CM_EVENT_CONNECT_REQUEST:
        // A second receiver: this stream has one. Refuse it.
        rdma_reject(ev->id, nullptr, 0);
        rdma_destroy_id(ev->id);
        break;
      default:
        break;
    }
  }
}

void Endpoint::SendHeartbeat() {
  if (heartbeat_inflight_ || send_wr_inflight_ >= send_wr_capacity_ || !peer_scratch_rkey_) return;
  ibv_sge sge{reinterpret_cast<uintptr_t>(scratch_->data() + 8), 8, scratch_mr_->lkey()};
  ibv_send_wr wr{};
  wr.wr_id = kHeartbeatWrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = peer_scratch_addr_;
  wr.wr.rdma.rkey = peer_scratch_rkey_;
  qp_->PostSend(&wr);
  heartbeat_inflight_ = true;
  ++send_wr_inflight_;
}

void Endpoint::WaitProgress(const char* waiting_for) {
  creator_.Check("RDMA transport endpoint");
  auto idle_deadline = Clock::now() + std::chrono::milliseconds(options_.idle_timeout_ms);
  auto next_heartbeat = Clock::now() + std::chrono::milliseconds(options_.heartbeat_ms);
  for (;;) {
    if (DrainCompletions() > 0) return;
    HandleCmEvents();
    if (!connected_) return;  // closed as expected (HandleCmEvents throws otherwise)
    cq_->RequestNotify();
    if (DrainCompletions() > 0) return;  // arrived between the poll and the arm
    int64_t wait = std::min(MsUntil(idle_deadline), MsUntil(next_heartbeat));
    if (wait > 0) {
      pollfd p[2] = {{cq_channel_->fd(), POLLIN, 0}, {events_.fd(), POLLIN, 0}};
      int n = poll(p, 2, static_cast<int>(wait));
      if (n < 0 && errno != EINTR) ThrowCallError("poll(completion + event channels)", errno);
      if (n > 0 && (p[0].revents & POLLIN)) cq_->ConsumeEvent();
      if (n > 0 && (p[1].revents & POLLIN)) HandleCmEvents();
      if (!connected_) return;
    }
    if (MsUntil(next_heartbeat) <= 0) {
      SendHeartbeat();
      next_heartbeat = Clock::now() + std::chrono::milliseconds(options_.heartbeat_ms);
    }
    if (MsUntil(idle_deadline) <= 0) {
      DrainCompletions();
      OnBroken("no progress for " + std::to_string(options_.idle_timeout_ms) +
               " ms while waiting for " + waiting_for + " (the link stayed up)");
    }
  }
}

void Endpoint::Disconnect() {
  if (!connected_) return;
  closing_ = true;
  connected_ = false;
  if (rdma_disconnect(id_->get())) ThrowCallError("rdma_disconnect", errno);
}

// ============================== Sender ==============================

Sender::Sender(const std::string& listen_addr, const TransportOptions& options)
    : Endpoint(options) {
  auto [host, port] = SplitHostPort(listen_addr);
  AddrInfo addr(host, port, /*passive=*/true);
  listen_id_ = std::make_unique<CmId>(events_);
  if (rdma_bind_addr(listen_id_->get(), addr.src()))
    ThrowCallError("rdma_bind_addr", errno, listen_addr);
  if (rdma_listen(listen_id_->get(), 1)) ThrowCallError("rdma_listen", errno, listen_addr);
  OpenDevice(*listen_id_);
}

Sender::~Sender() = default;

void Sender::RegisterMemory(void* addr, size_t bytes) {
  creator_.Check("RDMA sender");
  regions_.push_back(std::make_unique<MemoryRegion>(*pd_, addr, bytes, 0));
}

const MemoryRegion& Sender::FindRegion(const void* data, size_t bytes) const {
  for (const auto& r : regions_)
    if (r->Contains(data, bytes)) return *r;
  throw TransportError("Send: batch at " + std::to_string(reinterpret_cast<uintptr_t>(data)) +
                       " (" + std::to_string(bytes) +
                       " bytes) is not inside memory registered with RegisterMemory()");
}

void Sender::Accept(int timeout_ms) {
  creator_.Check("RDMA sender");
  if (timeout_ms < 0) timeout_ms = options_.connect_timeout_ms;
  auto req = WaitCmEvent(RDMA_CM_EVENT_CONNECT_REQUEST, "waiting for a receiver", timeout_ms);
  id_ = std::make_unique<CmId>(req.id);
  ConnectRequestData cr{};
  if (req.private_data.size() < sizeof cr) {
    rdma_reject(req.id, nullptr, 0);
    throw TransportError("connect request without the transport's slot description");
  }
  memcpy(&cr, req.private_data.data(), sizeof cr);
  if (cr.magic != kConnectMagic || cr.slots == 0 || cr.header_bytes < kHeaderBytes) {
    rdma_reject(req.id, nullptr, 0);
    throw TransportError("connect request from an incompatible receiver (bad magic or ring)");
  }
  ring_slots_ = cr.slots;
  ring_slot_bytes_ = cr.slot_bytes;
  ring_addr_ = cr.ring_addr;
  ring_rkey_ = cr.ring_rkey;
  ring_header_bytes_ = cr.header_bytes;
  peer_scratch_addr_ = cr.scratch_addr;
  peer_scratch_rkey_ = cr.scratch_rkey;

  headers_ = std::make_unique<PageBuffer>(kHeaderBytes * ring_slots_);
  headers_mr_ = std::make_unique<MemoryRegion>(*pd_, headers_->data(), headers_->size(), 0);
  // 2 WRs per batch in flight, plus heartbeat and the end marker.
  CreateQueuePair(2 * ring_slots_ + 4, ring_slots_ + 4);
  credit_recvs_.resize(ring_slots_ + 4);
  for (auto& r : credit_recvs_) {
    r = {};
    r.wr_id = kCreditWrId;
    qp_->PostRecv(&r);  // zero-length: credits travel in the immediate
  }
  SetAckTimeout();

  AcceptData ad{kConnectMagic, scratch_mr_->rkey(), reinterpret_cast<uintptr_t>(scratch_->data())};
  rdma_conn_param param{};
  param.private_data = &ad;
  param.private_data_len = sizeof ad;
  param.retry_count = options_.retry_count;
  param.rnr_retry_count = 7;  // never needed (receives are posted before credits)
  if (rdma_accept(id_->get(), &param)) ThrowCallError("rdma_accept", errno);
  WaitCmEvent(RDMA_CM_EVENT_ESTABLISHED, "accepting the receiver", options_.connect_timeout_ms);
  connected_ = true;
  listen_id_.reset();  // one receiver per stream
}

uint64_t Sender::Post(const void* data, size_t bytes, uint64_t tag, uint32_t flags,
                      std::function<void()> on_sent) {
  creator_.Check("RDMA sender");
  if (!connected_) throw TransportError("Send: not connected (Accept() first, or it broke)");
  if (bytes > ring_slot_bytes_)
    throw TransportError("Send: batch of " + std::to_string(bytes) +
                         " bytes exceeds the receiver's slot size " +
                         std::to_string(ring_slot_bytes_));
  const MemoryRegion* region = bytes ? &FindRegion(data, bytes) : nullptr;
  while (next_seq_ - released_by_peer_ >= ring_slots_ || send_wr_inflight_ + 2 > send_wr_capacity_)
    WaitProgress("a credit from the receiver");

  uint64_t seq = next_seq_;
  uint32_t slot = static_cast<uint32_t>(seq % ring_slots_);
  auto* h = reinterpret_cast<BatchHeader*>(headers_->data() + slot * kHeaderBytes);
  *h = {};
  h->magic = kHeaderMagic;
  h->flags = flags;
  h->seq = seq;
  h->bytes = bytes;
  h->tag = tag;
  if (options_.checksum && !(flags & kFlagEnd)) {
    h->flags |= kFlagCrc;
    h->crc = loader::Crc32c(data, bytes);
  }
  ibv_sge payload{reinterpret_cast<uintptr_t>(data), static_cast<uint32_t>(bytes),
                  region ? region->lkey() : 0};
  ibv_sge header{reinterpret_cast<uintptr_t>(h), kHeaderBytes, headers_mr_->lkey()};
  ibv_send_wr wr[2] = {};
  wr[0].wr_id = seq;
  wr[0].sg_list = &payload;
  wr[0].num_sge = 1;
  wr[0].opcode = IBV_WR_RDMA_WRITE;  // unsignaled: covered by the header's completion
  wr[0].wr.rdma.remote_addr = ring_addr_ + ring_header_bytes_ + slot * ring_slot_bytes_;
  wr[0].wr.rdma.rkey = ring_rkey_;
  wr[0].next = &wr[1];
  wr[1].wr_id = seq;
  wr[1].sg_list = &header;
  wr[1].num_sge = 1;
  wr[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr[1].send_flags = IBV_SEND_SIGNALED;
  wr[1].imm_data = htonl(static_cast<uint32_t>(seq));
  wr[1].wr.rdma.remote_addr = ring_addr_ + slot * kHeaderBytes;
  wr[1].wr.rdma.rkey = ring_rkey_;
  qp_->PostSend(bytes ? &wr[0] : &wr[1]);
  send_wr_inflight_ += bytes ? 2 : 1;
  ++next_seq_;
  pending_.push_back({seq, bytes ? 2u : 1u, std::move(on_sent)});
  DrainCompletions();  // run on_sent of earlier batches without waiting
  return seq;
}

uint64_t Sender::Send(const void* data, size_t bytes, uint64_t tag, std::function<void()> on_sent) {
  return Post(data, bytes, tag, 0, std::move(on_sent));
}

bool Sender::HandleCompletion(const ibv_wc& wc) {
  if (wc.wr_id == kCreditWrId) {
    if (wc.status != IBV_WC_SUCCESS) {
      connected_ = false;
      OnBroken("credit receive failed: " + WcError(wc));
    }
    // Cumulative count of released slots, modulo 2^32.
    uint32_t imm = ntohl(wc.imm_data);
    released_by_peer_ += static_cast<uint32_t>(imm - last_credit_imm_);
    last_credit_imm_ = imm;
    ibv_recv_wr r{};
    r.wr_id = kCreditWrId;
    qp_->PostRecv(&r);
    return true;
  }
  if (wc.status != IBV_WC_SUCCESS) {
    connected_ = false;
    OnBroken("RDMA WRITE of batch " + std::to_string(wc.wr_id) + " failed: " + WcError(wc));
  }
  // Completion of a header write: batch wc.wr_id (and its payload) arrived.
  if (pending_.empty() || pending_.front().seq != wc.wr_id)
    throw TransportError("internal: completion for batch " + std::to_string(wc.wr_id) +
                         " out of order");
  send_wr_inflight_ -= pending_.front().work_requests;  // the payload WR completed with it
  auto done = std::move(pending_.front().on_sent);
  pending_.pop_front();
  ++acked_;
  if (done) done();
  return true;
}

void Sender::OnBroken(const std::string& why) {
  std::string msg = "RDMA sender (" + device_name_ + "): " + why + "; " + std::to_string(acked_) +
                    " of " + std::to_string(next_seq_) +
                    " batches were acknowledged by the receiver's HCA, " +
                    std::to_string(released_by_peer_) + " released (consumed) by the receiver";
  throw TransportError(msg);
}

void Sender::Flush() {
  while (!pending_.empty()) WaitProgress("acknowledgements of sent batches");
}

void Sender::Finish() {
  uint64_t end_seq = Post(nullptr, 0, 0, kFlagEnd, {});
  while (released_by_peer_ < end_seq + 1 || !pending_.empty())
    WaitProgress("the receiver to release every batch");
  Disconnect();
}

// ============================== Receiver ==============================

Receiver::Receiver(const std::string& connect_addr, const TransportOptions& options)
    : Endpoint(options) {
  if (options_.slots == 0 || options_.slot_bytes == 0)
    throw std::invalid_argument("Receiver: slots and slot_bytes must be > 0");
  auto [host, port] = SplitHostPort(connect_addr);
  AddrInfo dst(host, port, /*passive=*/false);
  std::unique_ptr<AddrInfo> src;
  if (!options_.bind_ip.empty()) src = std::make_unique<AddrInfo>(options_.bind_ip, "0", true);
  id_ = std::make_unique<CmId>(events_);
  if (rdma_resolve_addr(id_->get(), src ? src->src() : nullptr, dst.dst(),
                        options_.connect_timeout_ms))
    ThrowCallError("rdma_resolve_addr", errno, connect_addr);
  WaitCmEvent(RDMA_CM_EVENT_ADDR_RESOLVED, ("resolving " + connect_addr).c_str(),
              options_.connect_timeout_ms + 1000);
  OpenDevice(*id_);

  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  header_bytes_ = (kHeaderBytes * options_.slots + page - 1) / page * page;
  ring_ = std::make_unique<PageBuffer>(header_bytes_ + options_.slots * options_.slot_bytes);
  ring_mr_ = std::make_unique<MemoryRegion>(*pd_, ring_->data(), ring_->size(),
                                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  SetAckTimeout();
  if (rdma_resolve_route(id_->get(), options_.connect_timeout_ms))
    ThrowCallError("rdma_resolve_route", errno, connect_addr);
  WaitCmEvent(RDMA_CM_EVENT_ROUTE_RESOLVED, ("resolving the route to " + connect_addr).c_str(),
              options_.connect_timeout_ms + 1000);
  CreateQueuePair(options_.slots + 4, options_.slots + 4);
  for (uint32_t i = 0; i < options_.slots; ++i) {
    ibv_recv_wr r{};
    r.wr_id = i;
    qp_->PostRecv(&r);  // zero-length: WRITE WITH IMM consumes one, places no data
  }

  ConnectRequestData cr{};
  cr.magic = kConnectMagic;
  cr.slots = options_.slots;
  cr.slot_bytes = options_.slot_bytes;
  cr.ring_addr = reinterpret_cast<uintptr_t>(ring_->data());
  cr.ring_rkey = ring_mr_->rkey();
  cr.scratch_addr = reinterpret_cast<uintptr_t>(scratch_->data());
  cr.scratch_rkey = scratch_mr_->rkey();
  cr.header_bytes = static_cast<uint32_t>(header_bytes_);
  rdma_conn_param param{};
  param.private_data = &cr;
  param.private_data_len = sizeof cr;
  param.retry_count = options_.retry_count;
  param.rnr_retry_count = 7;
  if (rdma_connect(id_->get(), &param)) ThrowCallError("rdma_connect", errno, connect_addr);
  auto est = WaitCmEvent(RDMA_CM_EVENT_ESTABLISHED, ("connecting to " + connect_addr).c_str(),
                         options_.connect_timeout_ms);
  AcceptData ad{};
  if (est.private_data.size() < sizeof ad)
    throw TransportError("connected to " + connect_addr + " but it is not a transport sender");
  memcpy(&ad, est.private_data.data(), sizeof ad);
  if (ad.magic != kConnectMagic)
    throw TransportError("connected to " + connect_addr + " but it is not a transport sender");
  peer_scratch_addr_ = ad.scratch_addr;
  peer_scratch_rkey_ = ad.scratch_rkey;
  connected_ = true;
}

Receiver::~Receiver() = default;

bool Receiver::HandleCompletion(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) {
    connected_ = false;
    broken_ = (wc.wr_id == kCreditWrId ? "returning a credit failed: " : "receive failed: ") +
              WcError(wc);
    return true;
  }
  if (wc.wr_id == kCreditWrId) {  // our credit SEND completed
    --send_wr_inflight_;
    return false;
  }
  if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM)
    throw TransportError("internal: unexpected receive opcode " + std::to_string(wc.opcode));
  // RC placed the payload and the header before this completion: the batch is
  // complete in memory now (its checks run in Next()).
  uint64_t seq = arrivals_++;
  const auto* h =
      reinterpret_cast<const BatchHeader*>(ring_->data() + (seq % options_.slots) * kHeaderBytes);
  arrived_.push_back(ntohl(wc.imm_data));
  if (!(h->flags & kFlagEnd)) ++complete_;
  ibv_recv_wr r{};
  r.wr_id = wc.wr_id;
  qp_->PostRecv(&r);  // before the slot's credit can go back: never RNR
  return true;
}

std::string Receiver::ReceivedSummary() const {
  if (complete_ == 0) return "no batch was received";
  return "batches 0.." + std::to_string(complete_ - 1) + " (" + std::to_string(complete_) +
         ") were fully received; the last complete batch is " + std::to_string(complete_ - 1);
}

void Receiver::OnBroken(const std::string& why) {
  if (broken_.empty()) broken_ = why;
  throw TransportError("RDMA receiver (" + device_name_ + "): " + broken_ + "; " +
                       ReceivedSummary());
}

void Receiver::ReleaseHeld() {
  if (!holding_) return;
  holding_ = false;
  ++released_;
  if (!connected_) return;
  while (send_wr_inflight_ >= send_wr_capacity_) WaitProgress("send queue space");
  ibv_send_wr wr{};
  wr.wr_id = kCreditWrId;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(static_cast<uint32_t>(released_));
  qp_->PostSend(&wr);
  ++send_wr_inflight_;
}

std::optional<ReceivedBatch> Receiver::Next() {
  creator_.Check("RDMA receiver");
  if (ended_) return std::nullopt;
  ReleaseHeld();
  while (arrived_.empty()) {
    if (!broken_.empty() || !connected_) OnBroken(broken_.empty() ? "not connected" : broken_);
    WaitProgress("the next batch from the sender");
  }
  uint32_t imm = arrived_.front();
  arrived_.pop_front();
  uint64_t seq = expected_seq_;
  uint32_t slot = static_cast<uint32_t>(seq % options_.slots);
  const auto* h = reinterpret_cast<const BatchHeader*>(ring_->data() + slot * kHeaderBytes);
  if (imm != static_cast<uint32_t>(seq) || h->magic != kHeaderMagic || h->seq != seq)
    throw TransportError("RDMA receiver: out-of-order or corrupt batch header in slot " +
                         std::to_string(slot) + ": expected seq " + std::to_string(seq) +
                         ", immediate " + std::to_string(imm) + ", header seq " +
                         std::to_string(h->seq));
  if (h->bytes > options_.slot_bytes)
    throw TransportError("RDMA receiver: batch " + std::to_string(seq) + " claims " +
                         std::to_string(h->bytes) + " bytes, more than a slot");
  ++expected_seq_;
  holding_ = true;
  if (h->flags & kFlagEnd) {
    ended_ = true;
    return std::nullopt;
  }
  ReceivedBatch b;
  b.seq = seq;
  b.tag = h->tag;
  b.data = ring_->data() + header_bytes_ + slot * options_.slot_bytes;
  b.bytes = h->bytes;
  if (h->flags & kFlagCrc) {
    uint32_t crc = loader::Crc32c(b.data, b.bytes);
    if (crc != h->crc)
      throw TransportError("RDMA receiver: batch " + std::to_string(seq) +
                           " failed its CRC32C check (sent " + std::to_string(h->crc) + ", got " +
                           std::to_string(crc) + ")");
    b.checksum_verified = true;
  }
  bytes_ += b.bytes;
  return b;
}

void Receiver::Close() {
  creator_.Check("RDMA receiver");
  if (!ended_) throw TransportError("RDMA receiver: Close() before the end of the stream");
  closing_ = true;  // the sender disconnects as soon as it has this last credit
  ReleaseHeld();    // the end marker's slot: the sender's Finish() waits for it
  while (connected_ && send_wr_inflight_ > 0) WaitProgress("the last credit to be sent");
  Disconnect();
}

}  // namespace forkguard::rdma
