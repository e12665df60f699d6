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
// domain on it. On failure calls die(the call that failed, errno set) and, should die return,
// returns what it has (pd null).
OpenedDevice OpenDeviceAndPd(const char* name, void (*die)(const char* what));

}  // namespace forkguard::rdma
