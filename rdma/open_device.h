// A device and a protection domain opened with plain libibverbs calls: the start of the
// programs that measure or stress the shim's handling of RDMA state (bench/shim_bench,
// tests/safety/stress_prog). No exceptions and nothing freed: the programs exit on failure.
#pragma once

#include <infiniband/verbs.h>

namespace forkguard::rdma {

struct OpenedDevice {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
};

// Opens the device `name` (the first one when name is null) and allocates a protection
// domain on it. On failure pd is null and *failed names what failed.
OpenedDevice OpenDeviceAndPd(const char* name, const char** failed);

}  // namespace forkguard::rdma
