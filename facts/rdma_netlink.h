// The kernel's RDMA netlink (nldev): a socket and a request, for the system's facts
// (ReportedCopyOnFork) and the resource dumps (api/rdma_resources). Libc only, malloc-free.
#pragma once

#include <stdint.h>

namespace forkguard::facts {

// An RDMA netlink socket (close-on-exec) whose receives time out after `timeout_s` seconds;
// -1 with errno set when the kernel has none (ib_core not loaded).
int OpenRdmaNetlink(int timeout_s);

// Sends the nldev request `cmd` to the kernel with sequence number `seq` (`flags` besides
// NLM_F_REQUEST: NLM_F_DUMP for a dump), with a device index attribute when dev >= 0.
// Returns 0, or errno when the kernel did not take it.
int SendRdmaNetlinkRequest(int fd, int cmd, uint16_t flags, uint32_t seq, int dev = -1);

}  // namespace forkguard::facts
