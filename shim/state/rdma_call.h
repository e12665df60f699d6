// The watched calls that create RDMA resources, and their names as the messages and the
// event log spell them.
#pragma once

#include <cstdint>
#include <iterator>

#include "names/name_table.h"

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

// The names, by call.
inline constexpr char kRdmaCallNames[][26] = {
    "ibv_open_device",           "ibv_alloc_pd",     "ibv_reg_mr",
    "ibv_reg_mr_iova",           "ibv_reg_mr_iova2", "ibv_reg_dmabuf_mr",
    "rdma_create_event_channel", "rdma_create_id",   "rdma_create_ep",
    "open(/dev/infiniband)"};
static_assert(std::size(kRdmaCallNames) == CountThrough(RdmaCall::kBackstop));

constexpr const char* RdmaCallName(RdmaCall call) { return NameOf(kRdmaCallNames, call, "?"); }

}  // namespace forkguard
