// Internal: what the loader's parent and its worker processes share -- the
// wire messages on each worker's socket, the layout of the control region, and
// the worker's main loop. Not part of the public API (see loader.h).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "loader/loader.h"

namespace forkguard::loader::internal {

// Before the workers are forked: forkguard_fork_check() and the ForkCheck mode's answer
// (loader/fork_check.cc). Throws ForkCheckError in kError mode when a fork is a hazard.
void CheckBeforeForkingWorkers(ForkCheck mode, uint32_t workers);

// Parent -> worker: build batch `seq` in `slot` (the sample list is already in
// the slot's header in the control region).
struct TaskMsg {
  uint64_t seq;
  uint32_t slot;
  uint32_t reserved;
};

// Worker -> parent: batch `seq` is in its slot (ok), or the transform failed.
struct ResultMsg {
  uint64_t seq;
  uint32_t slot;
  int32_t ok;
  int64_t sample;     // failing dataset index (ok == 0)
  char message[496];  // NUL-terminated what() of the failure
};

// Per-slot header in the control region; samples[] follows (batch_size entries).
struct SlotHeader {
  uint64_t epoch;
  uint64_t batch;
  uint64_t count;
  uint64_t samples[];
};

// Per-worker status in the control region, written by the worker and read by
// the parent to name the sample in an error and to tell slow from hung.
struct alignas(64) WorkerStatus {
  std::atomic<int64_t> sample;     // dataset index being transformed, -1 if idle
  std::atomic<uint64_t> progress;  // samples finished so far
};
static_assert(std::atomic<int64_t>::is_always_lock_free);

struct WorkerSetup {
  int id;
  int sock;              // SOCK_SEQPACKET end shared with the parent
  const int* close_fds;  // parent-side descriptors inherited by fork, to close
  size_t n_close_fds;
  const Dataset* dataset;
  const Transform* transform;
  std::byte* data_base;
  size_t slot_stride;
  const std::byte* control_base;
  size_t header_stride;
  WorkerStatus* status;
  size_t sample_bytes;
  pid_t parent;
};

// ---- Runs in the forked child only. ----
// Serves tasks until the parent closes the socket (or dies), then _exit(0).
// A transform failure is sent back as a ResultMsg, then the worker _exit(1)s.
[[noreturn]] void WorkerMain(const WorkerSetup& setup);

// Shared by WorkerMain and the in-process (0 worker) path: transform every
// sample of the slot into its payload. Throws what the transform throws.
void BuildBatch(const Dataset& dataset, const Transform& transform, const SlotHeader& header,
                std::byte* out, size_t sample_bytes, WorkerStatus* status);

}  // namespace forkguard::loader::internal
