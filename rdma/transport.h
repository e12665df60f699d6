// A one-way RDMA stream of batches (byte buffers) from a Sender to a Receiver
// over one RC queue pair, set up with librdmacm.
//
// Wire protocol (why WRITE WITH IMMEDIATE into receiver slots, not SEND):
//   The receiver registers a ring of `slots` fixed-size slots (each up to
//   `slot_bytes`, default 4 MiB) plus one 64-byte header per slot, and
//   advertises address/rkey in the connect request. Batch number `seq` goes to
//   slot seq % slots as two work requests posted together: an RDMA WRITE of
//   the payload (straight from the sender's registered memory -- the loader's
//   shared-memory batch slot, no copy) and an RDMA WRITE WITH IMMEDIATE of the
//   64-byte header (seq, size, CRC32C, user tag) whose immediate is the low 32
//   bits of seq. RC orders writes, so the receive completion of the immediate
//   means the whole payload is in place. Unlike SEND, placement does not
//   depend on which receive buffer the HCA picks, the receiver posts only
//   zero-length receives, and large batches need no receive-side copy.
//
// Flow control: the sender starts with `slots` credits and spends one per
// batch; the receiver returns one (a zero-length SEND WITH IMMEDIATE carrying
// the cumulative number of released slots) when the consumer releases a slot.
// The sender never writes into a slot the receiver still holds.
//
// Ordering: seq is checked against the expected value on every batch (RC
// delivers in order; a mismatch is reported, never reordered silently).
//
// Failure: connection events (DISCONNECTED, DEVICE_REMOVAL, ...) are watched
// together with completions; completions in error name the batch; the QP's
// ACK timeout/retry count bound how long a dead peer or link goes unnoticed
// while data is in flight, and an idle side sends an 8-byte heartbeat WRITE
// every `heartbeat_ms` so it notices too. Waiting longer than
// `idle_timeout_ms` without progress is an error. The receiver always knows
// how many batches it received completely (and verified).
//
// Not thread-safe: one thread per Sender/Receiver. Every object refuses use
// from a forked child (ForkedChildError).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rdma/error.h"
#include "rdma/verbs.h"

namespace forkguard::rdma {

struct TransportOptions {
  // Receiver: number of slots (= sender credits) and the largest batch.
  uint32_t slots = 8;
  size_t slot_bytes = 4u << 20;
  // Sender: CRC32C every batch; the receiver verifies when present.
  bool checksum = true;
  // QP local ACK timeout, 4.096 us * 2^ack_timeout (17: ~0.54 s), and the
  // transport retry count: a peer that stops ACKing is detected within
  // roughly ack_timeout * (retry_count + 1).
  uint8_t ack_timeout = 17;
  uint8_t retry_count = 7;
  int connect_timeout_ms = 10000;  // address/route resolution and connection setup
  int heartbeat_ms = 1000;         // idle side probes the link this often
  int idle_timeout_ms = 60000;     // no progress at all for this long is an error
  // Receiver: local address to connect from (e.g. the rxeb side of a pair);
  // empty = let the routing table choose.
  std::string bind_ip;
};

// "10.11.12.1:7471" -> {"10.11.12.1", "7471"}; throws std::invalid_argument.
std::pair<std::string, std::string> SplitHostPort(const std::string& addr);

// What the two ends share: cm id, device chain, waiting on CQ + CM events.
class Endpoint {
 public:
  virtual ~Endpoint();
  const std::string& device_name() const { return device_name_; }
  pid_t creator_pid() const { return creator_.pid(); }

 protected:
  explicit Endpoint(const TransportOptions& options);
  // Resource chain. Declared in creation order; destroyed in reverse.
  TransportOptions options_;
  CreatorPid creator_;
  EventChannel events_;
  std::unique_ptr<CmId> listen_id_;
  std::unique_ptr<CmId> id_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<ProtectionDomain> pd_;
  std::unique_ptr<CompletionChannel> cq_channel_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<QueuePair> qp_;
  std::unique_ptr<PageBuffer> scratch_;  // target of the peer's heartbeats
  std::unique_ptr<MemoryRegion> scratch_mr_;
  std::string device_name_;

  void OpenDevice(const CmId& id);  // device_, pd_, scratch
  void CreateQueuePair(uint32_t send_wr, uint32_t recv_wr);
  void SetAckTimeout();
  // Waits for one connection event of `want` (others: error, except ignorable).
  EventChannel::Event WaitCmEvent(rdma_cm_event_type want, const char* doing, int timeout_ms);

  // Blocks until at least one completion that counts as progress was handled
  // (heartbeats do not), a connection event breaks the link (drains the CQ,
  // then throws via OnBroken), or idle_timeout_ms passes.
  void WaitProgress(const char* waiting_for);
  // Handles every completion in the CQ now; returns how many were progress.
  int DrainCompletions();
  virtual bool HandleCompletion(const ibv_wc& wc) = 0;  // true = progress
  // Called (after draining) when the connection broke; throws.
  [[noreturn]] virtual void OnBroken(const std::string& why) = 0;
  void HandleCmEvents();
  void SendHeartbeat();
  void Disconnect();

  uint64_t peer_scratch_addr_ = 0;
  uint32_t peer_scratch_rkey_ = 0;
  uint32_t send_wr_capacity_ = 0;
  uint32_t send_wr_inflight_ = 0;
  bool heartbeat_inflight_ = false;
  bool connected_ = false;
  bool closing_ = false;  // we disconnect on purpose: DISCONNECTED is expected
  static constexpr uint64_t kHeartbeatWrId = ~0ull;
  static constexpr uint64_t kCreditWrId = ~0ull - 1;
};

// The sending end: listens, registers the memory batches are sent from,
// accepts one receiver, streams.
class Sender : public Endpoint {
 public:
  // Binds and listens on "IP:PORT" (the IP of an RDMA device's netdev) and
  // allocates the device's PD. Nothing is accepted yet.
  Sender(const std::string& listen_addr, const TransportOptions& options);
  ~Sender() override;

  // Registers [addr, addr+bytes) (page-aligned) as a source of batches.
  void RegisterMemory(void* addr, size_t bytes);
  // Waits for one receiver (connect_timeout_ms unless given) and connects.
  void Accept(int timeout_ms = -1);

  // Sends `bytes` at `data` (inside registered memory) as the next batch.
  // Blocks only for a credit. `on_sent` runs (from a later Send/Flush/Finish
  // call) once the receiver's HCA acknowledged the batch: the source memory
  // may be reused from then on. Returns the batch's seq (0, 1, 2, ...).
  uint64_t Send(const void* data, size_t bytes, uint64_t tag = 0,
                std::function<void()> on_sent = {});
  // Waits until every batch sent so far is acknowledged (on_sent ran).
  void Flush();
  // Ends the stream: an end marker, then waits until the receiver released
  // every batch (so it has verified them all), then disconnects.
  void Finish();

  uint64_t batches_sent() const { return next_seq_; }
  uint64_t batches_acknowledged() const { return acked_; }
  uint64_t batches_released_by_receiver() const { return released_by_peer_; }
  uint32_t max_batch_bytes() const { return static_cast<uint32_t>(ring_slot_bytes_); }

 private:
  bool HandleCompletion(const ibv_wc& wc) override;
  [[noreturn]] void OnBroken(const std::string& why) override;
  const MemoryRegion& FindRegion(const void* data, size_t bytes) const;
  uint64_t Post(const void* data, size_t bytes, uint64_t tag, uint32_t flags,
                std::function<void()> on_sent);

  std::vector<std::unique_ptr<MemoryRegion>> regions_;
  std::unique_ptr<PageBuffer> headers_;  // staging for outgoing headers
  std::unique_ptr<MemoryRegion> headers_mr_;
  std::vector<ibv_recv_wr> credit_recvs_;
  uint32_t ring_slots_ = 0;
  size_t ring_slot_bytes_ = 0;
  uint64_t ring_addr_ = 0;
  uint64_t ring_header_bytes_ = 0;
  uint32_t ring_rkey_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t acked_ = 0;
  uint64_t released_by_peer_ = 0;
  uint32_t last_credit_imm_ = 0;
  struct Pending {
    uint64_t seq;
    uint32_t work_requests;  // 2 (payload + header) or 1 (header only)
    std::function<void()> on_sent;
  };
  std::deque<Pending> pending_;
};

// One received batch: valid until the next Next() call (which releases it).
struct ReceivedBatch {
  uint64_t seq = 0;
  uint64_t tag = 0;
  const std::byte* data = nullptr;
  size_t bytes = 0;
  bool checksum_verified = false;  // a CRC32C was sent and matched
};

class Receiver : public Endpoint {
 public:
  // Resolves "IP:PORT", registers the slot ring, connects (a refused or
  // unreachable address is a TransportError saying so).
  Receiver(const std::string& connect_addr, const TransportOptions& options);
  ~Receiver() override;

  // Releases the previous batch (returning its credit) and returns the next
  // one in order, or nullopt at the end of the stream. Throws TransportError
  // on failure; batches_complete() then says exactly what arrived.
  std::optional<ReceivedBatch> Next();
  // After the end of stream: returns the last credit and disconnects.
  void Close();

  // Batches fully received (and checksum-verified when sent with one), i.e.
  // batches 0 .. batches_complete()-1; all were or will be returned by Next().
  uint64_t batches_complete() const { return complete_; }
  uint64_t bytes_received() const { return bytes_; }

 private:
  bool HandleCompletion(const ibv_wc& wc) override;
  [[noreturn]] void OnBroken(const std::string& why) override;
  void ReleaseHeld();
  std::string ReceivedSummary() const;

  std::unique_ptr<PageBuffer> ring_;
  std::unique_ptr<MemoryRegion> ring_mr_;
  size_t header_bytes_ = 0;
  std::deque<uint32_t> arrived_;  // immediates of arrived batches, in order
  uint64_t expected_seq_ = 0;     // next seq Next() will return
  uint64_t arrivals_ = 0;         // WRITE WITH IMM completions so far
  uint64_t complete_ = 0;
  uint64_t bytes_ = 0;
  uint64_t released_ = 0;
  bool holding_ = false;
  bool ended_ = false;
  std::string broken_;
};

}  // namespace forkguard::rdma
