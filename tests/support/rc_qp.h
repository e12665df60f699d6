// An RC queue pair taken through INIT, RTR and RTS to a peer on port 1 of the same device
// (RoCE: the peer's GID, MTU 1024): the connection of the real-device tests' loopback pairs.
#pragma once

#include <infiniband/verbs.h>
#include <stdint.h>

namespace forkguard::test_support {

// Connects `qp` to the QP `remote_qpn` at `gid` (sgid_index `gid_index`), allowing the peer
// `access` (IBV_ACCESS_* flags). Returns nullptr, or the step that failed ("QP to RTR") with
// errno set by ibv_modify_qp.
const char* ConnectRcQp(ibv_qp* qp, uint32_t remote_qpn, const ibv_gid& gid, int gid_index,
                        int access);

}  // namespace forkguard::test_support
