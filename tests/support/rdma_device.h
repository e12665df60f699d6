// Real-device tests call RequireRdmaDevice() first. Without an ACTIVE RDMA
// device the test FAILS with a loud message: a missing device is never a skip.
#pragma once

#include <string>

namespace forkguard::test_support {

struct RdmaDevice {
  std::string name;  // e.g. "rxe0"
  std::string ip;    // an IPv4 address bound to it, for librdmacm, e.g. "10.11.12.1"
  int gid_index;     // RoCEv2 IPv4-mapped GID index
};

// The device to use: $RXE_DEV/$RXE_IP/$RXE_GID_INDEX when set (Soft-RoCE guest),
// else the first device with an ACTIVE port. Fails the current gtest (fatal)
// when none is present; call via ASSERT_NO_FATAL_FAILURE or at the test start.
RdmaDevice RequireRdmaDevice();

// The two-device pair (rxea <-> rxeb over veth) if the guest set it up.
bool RdmaPair(RdmaDevice* a, RdmaDevice* b);

}  // namespace forkguard::test_support
