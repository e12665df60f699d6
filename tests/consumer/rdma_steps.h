// What the consumer's tests do, in either order: open an RDMA device and register
// memory (libibverbs), and fork a helper process that exits at once.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>

namespace consumer {

struct RdmaResources {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  ibv_mr* mr = nullptr;
  void* buffer = nullptr;
  size_t length = 1 << 16;
};

// Opens the first device, allocates a PD and registers a 64 KiB buffer (gtest
// assertions on failure).
void OpenAndRegister(RdmaResources* r);
void Release(RdmaResources* r);

// fork(); the child exits 0; the parent waits for it (gtest assertions on failure).
void ForkHelper();

}  // namespace consumer
