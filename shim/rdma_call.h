// The watched calls that create RDMA resources, and their names as the messages and the
// event log spell them.
#pragma once

#include <cstdint>

namespace forkguard {

enum class RdmaCall : uint8_t {
  kOpenDevice,
  kAllocPd,
  kRegMr,
  kRegMrIova,
  kRegMrIova2,
  kRegDmabufMr,
  kCreateEventChannel,
  kCreateId,
  kCreateEp,
  kBackstop,  // found by the descriptor scan, no call seen
};

constexpr const char* RdmaCallName(RdmaCall call) {
  switch (call) {
    case RdmaCall::kOpenDevice:
      return "ibv_open_device";
    case RdmaCall::kAllocPd:
      return "ibv_alloc_pd";
    case RdmaCall::kRegMr:
      return "ibv_reg_mr";
    case RdmaCall::kRegMrIova:
      return "ibv_reg_mr_iova";
    case RdmaCall::kRegMrIova2:
      return "ibv_reg_mr_iova2";
    case RdmaCall::kRegDmabufMr:
      return "ibv_reg_dmabuf_mr";
    case RdmaCall::kCreateEventChannel:
      return "rdma_create_event_channel";
    case RdmaCall::kCreateId:
      return "rdma_create_id";
    case RdmaCall::kCreateEp:
      return "rdma_create_ep";
    case RdmaCall::kBackstop:
      return "open(/dev/infiniband)";
  }
  return "?";
}

}  // namespace forkguard
