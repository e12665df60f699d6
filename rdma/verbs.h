// RAII wrappers for the verbs and rdmacm resources the transport uses: one
// class per resource, each owning exactly one handle and releasing it in its
// destructor (the model is Gloo's gloo/transport/ibverbs). The ownership chain
// is Device -> ProtectionDomain -> CompletionQueue / QueuePair -> MemoryRegion;
// members must be declared in that order so that they are destroyed in reverse.
//
// Every object remembers the pid that created it: use from a forked child
// throws ForkedChildError, and a child's destructor releases nothing (the
// kernel objects belong to the parent; releasing them from the child would
// fail or tear down the parent's resources).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rdma/error.h"

namespace forkguard::rdma {

// An rdmacm event channel: the fd that delivers connection events
// (ESTABLISHED, DISCONNECTED, DEVICE_REMOVAL, ...). Non-blocking, so waits
// can have deadlines.
class EventChannel {
 public:
  EventChannel();
  ~EventChannel();
  EventChannel(const EventChannel&) = delete;
  EventChannel& operator=(const EventChannel&) = delete;

  struct Event {
    rdma_cm_event_type type;
    int status;
    rdma_cm_id* id;         // for CONNECT_REQUEST: the new id (caller adopts it)
    rdma_cm_id* listen_id;  // for CONNECT_REQUEST: the listening id
    std::vector<uint8_t> private_data;
  };
  // Next event, acknowledged already; nullopt if none arrived within timeout_ms.
  std::optional<Event> Get(int timeout_ms);
  int fd() const;
  rdma_event_channel* get() const;

 private:
  CreatorPid creator_;
  rdma_event_channel* channel_ = nullptr;
};

// The result of rdma_getaddrinfo() for "host" + "port" (rdma_freeaddrinfo'd).
// passive = an address to bind/listen on, else one to connect to.
class AddrInfo {
 public:
  AddrInfo(const std::string& host, const std::string& port, bool passive);
  ~AddrInfo();
  AddrInfo(const AddrInfo&) = delete;
  AddrInfo& operator=(const AddrInfo&) = delete;
  sockaddr* src() const { return info_->ai_src_addr; }
  sockaddr* dst() const { return info_->ai_dst_addr; }

 private:
  rdma_addrinfo* info_ = nullptr;
};

// An rdma_cm_id (the rdmacm's connection endpoint).
class CmId {
 public:
  CmId(EventChannel& channel);         // rdma_create_id(RDMA_PS_TCP)
  explicit CmId(rdma_cm_id* adopted);  // from a CONNECT_REQUEST event
  ~CmId();
  CmId(const CmId&) = delete;
  CmId& operator=(const CmId&) = delete;
  rdma_cm_id* get() const;

 private:
  CreatorPid creator_;
  rdma_cm_id* id_ = nullptr;
};

// The device the cm id was bound or resolved to. librdmacm opens every device
// once per process and owns that ibv_context; rdma_create_qp() insists that
// the PD come from that very context, so Device refers to it rather than
// calling ibv_open_device() itself (a second context would be unusable here).
class Device {
 public:
  explicit Device(const CmId& id);  // throws if the id is not bound to a device
  ibv_context* get() const;
  std::string name() const;

 private:
  CreatorPid creator_;
  ibv_context* context_ = nullptr;
};

class ProtectionDomain {
 public:
  explicit ProtectionDomain(const Device& device);
  ~ProtectionDomain();
  ProtectionDomain(const ProtectionDomain&) = delete;
  ProtectionDomain& operator=(const ProtectionDomain&) = delete;
  ibv_pd* get() const;

 private:
  CreatorPid creator_;
  ibv_pd* pd_ = nullptr;
};

// Lets a thread sleep until the CQ has a completion (non-blocking fd + poll()).
class CompletionChannel {
 public:
  explicit CompletionChannel(const Device& device);
  ~CompletionChannel();
  CompletionChannel(const CompletionChannel&) = delete;
  CompletionChannel& operator=(const CompletionChannel&) = delete;
  ibv_comp_channel* get() const;
  int fd() const;

 private:
  CreatorPid creator_;
  ibv_comp_channel* channel_ = nullptr;
};

class CompletionQueue {
 public:
  CompletionQueue(const Device& device, CompletionChannel& channel, int entries);
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;
  ibv_cq* get() const;

  // Non-blocking: up to `max` completions into `wc`.
  int Poll(ibv_wc* wc, int max);
  // Arms the CQ so the next completion raises an event on the channel.
  void RequestNotify();
  // After the channel fd became readable: consume the event (acked in batches).
  void ConsumeEvent();

 private:
  CreatorPid creator_;
  CompletionChannel& channel_;
  ibv_cq* cq_ = nullptr;
  unsigned unacked_events_ = 0;
};

// An RC QP created on a cm id with rdma_create_qp(); rdmacm moves it through
// INIT/RTR/RTS during connect/accept.
class QueuePair {
 public:
  QueuePair(CmId& id, ProtectionDomain& pd, CompletionQueue& cq, uint32_t max_send_wr,
            uint32_t max_recv_wr);
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;
  ibv_qp* get() const;

  void PostSend(ibv_send_wr* wr);
  void PostRecv(ibv_recv_wr* wr);

 private:
  CreatorPid creator_;
  rdma_cm_id* id_ = nullptr;
  ibv_qp* qp_ = nullptr;
};

// A page-aligned anonymous mapping: registered memory should not share pages
// with unrelated heap data (with fork support on, registered pages are
// MADV_DONTFORK and a forked child dies touching anything on them).
class PageBuffer {
 public:
  explicit PageBuffer(size_t bytes);
  ~PageBuffer();
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  CreatorPid creator_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

class MemoryRegion {
 public:
  MemoryRegion(ProtectionDomain& pd, void* addr, size_t bytes, int access);
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  ibv_mr* get() const;
  uint32_t lkey() const;
  uint32_t rkey() const;
  const std::byte* begin() const { return begin_; }
  const std::byte* end() const { return begin_ + size_; }
  bool Contains(const void* p, size_t n) const;

 private:
  CreatorPid creator_;
  ibv_mr* mr_ = nullptr;
  const std::byte* begin_ = nullptr;
  size_t size_ = 0;
};

// Human name of a CM event type, e.g. "RDMA_CM_EVENT_DISCONNECTED".
std::string CmEventName(rdma_cm_event_type type);

}  // namespace forkguard::rdma
