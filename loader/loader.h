// forkguard's reference data loader: persistent worker processes forked in
// Start() -- before any RDMA or other fork-unsafe initialization -- build
// batches directly in shared memory; the consumer gets them in sampler order as
// zero-copy views and releases each slot when done with it (e.g. when the RDMA
// send that reads it has completed).
//
// The natural order for a trainer or transport:
//
//   Loader loader(options);
//   loader.Start();                          // 1. fork workers (nothing RDMA yet)
//   SlotRegion r = loader.slot_region();     // 2. ibv_reg_mr(pd, r.base, r.size, ...)
//   for (;;) {                               // 3. stream
//     LoaderItem item = loader.Next();
//     if (item.kind == LoaderItem::kEpochEnd) { ...; continue; }
//     send(item.batch.data, item.batch.bytes);  // bytes at r.base + item.batch.offset
//     loader.Release(item.batch);            // after the send completed
//   }
//
// Exactly once: an epoch is every index of EpochOrder(sampler, n, epoch)
// exactly once, in that order, grouped in batches of `batch_size` (the last one
// shorter unless drop_last). Epochs follow each other in one stream separated
// by an in-band kEpochEnd marker, and workers prefetch across the boundary.
// BeginEpoch() abandons the rest of the current epoch (batches already in
// flight for it are never delivered; their slots are reclaimed), except that
// asking for exactly the position the stream is already at is a no-op, so the
// primed iterator is never thrown away (resetting twice, or "creating the
// iterator" with Start() and then calling BeginEpoch(0), loses nothing).
// Progress (state()) counts batches DELIVERED by Next(), never batches
// dispatched to workers, so a state saved mid-epoch and passed to Resume() in a
// new process yields exactly the remaining batches of that epoch.
//
// Failure: a worker that dies (signal, exit, exception in the transform) or
// makes no progress for `timeout_ms` makes Next() throw LoaderError naming the
// worker, its pid, the signal or message, and the sample it was processing;
// the loader then kills and reaps every worker. A corrupted record is an error
// naming file and offset. The destructor always shuts down cleanly: no zombie,
// no shared-memory name (memory is memfd_create'd, never in /dev/shm).
//
// Threads: a Loader is used from one thread at a time. Start() forks, so call
// it before starting threads that hold locks the workers might need.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/sampler.h"
#include "loader/tfrecord.h"

namespace forkguard::loader {

// Per-sample work, run in a worker process (or in the caller with 0 workers):
// turn one record into exactly `out.size()` (= LoaderOptions::sample_bytes)
// bytes of the batch, written in place in shared memory. Throw to fail (the
// message is reported with the sample; RecordError keeps file and offset).
// Runs in a forked child: it must not rely on threads of the parent.
using Transform = std::function<void(const RecordView& record, std::span<std::byte> out)>;

// Built-in transform: VerifyRecordCrc(record), then "decode" the record into a
// fixed-size uint8 tensor: copy min(size, out.size()) bytes, zero the rest.
Transform VerifyAndDecodeTransform();
// Same without the CRC check.
Transform DecodeTransform();

enum class ForkCheck { kOff, kWarn, kError };
// "off", "warn", "error"; false for anything else.
bool ParseForkCheck(const std::string& text, ForkCheck* out);
// The name ParseForkCheck reads back.
const char* ForkCheckName(ForkCheck mode);

// Start() refused to fork its workers (ForkCheck::kError): what() names the verdict and
// where RDMA was first initialized.
struct ForkCheckError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct LoaderOptions {
  std::vector<std::string> files;  // TFRecord shards, in dataset order
  SamplerOptions sampler;
  uint32_t batch_size = 32;
  bool drop_last = false;
  size_t sample_bytes = 4096;        // output bytes per sample (fixed-size tensor)
  Transform transform;               // empty = VerifyAndDecodeTransform()
  uint32_t num_workers = 2;          // 0 = build batches in the caller, no fork
  uint32_t prefetch_per_worker = 2;  // batches in flight per worker
  // Batch slots in the shared region. 0 = max(1, num_workers) *
  // prefetch_per_worker + 2 (two for batches the consumer still holds).
  uint32_t num_slots = 0;
  uint32_t timeout_ms = 30000;  // a worker making no progress this long is hung
  // Before Start() forks the workers it asks forkguard_fork_check() (api/forkguard.h)
  // whether a fork now is a hazard (RDMA already initialized in this process). kWarn: one
  // line on stderr naming where RDMA was first initialized, then fork. kError: Start()
  // throws ForkCheckError with that and forks nothing. kOff: not asked.
  ForkCheck fork_check = ForkCheck::kWarn;
};

// The shared-memory region that holds every batch slot. It exists from
// construction to destruction of the Loader, at a fixed address, and is
// shared (MAP_SHARED of a memfd) with the workers: register it for RDMA once,
// after Start(). Slot i's bytes are [base + i * slot_stride, + slot_capacity).
struct SlotRegion {
  std::byte* base = nullptr;  // page-aligned
  size_t size = 0;            // multiple of the page size = num_slots * slot_stride
  size_t slot_stride = 0;     // page-aligned distance between slots
  size_t slot_capacity = 0;   // batch_size * sample_bytes (max bytes of one batch)
  uint32_t num_slots = 0;
  int memfd = -1;  // the memfd behind it (owned by the Loader)
};

// A delivered batch: a view into the slot region, valid until Release().
struct Batch {
  const std::byte* data = nullptr;  // = region.base + offset
  size_t bytes = 0;                 // samples * sample_bytes
  size_t offset = 0;                // from SlotRegion::base
  uint32_t slot = 0;
  uint64_t epoch = 0;
  uint64_t index = 0;                 // batch number within the epoch
  std::span<const uint64_t> samples;  // dataset indices, in order (also shared memory)
  size_t sample_bytes = 0;            // bytes per sample in `data`
  uint64_t delivery = 0;              // unique per Next() result; Release() checks it (stale views)
};

struct LoaderItem {
  enum Kind { kBatch, kEpochEnd } kind = kBatch;
  Batch batch;         // kBatch only
  uint64_t epoch = 0;  // for both: the epoch this item belongs to / that ended
};

// Where the consumer is: the next batch Next() will return is batch `batch` of
// epoch `epoch` (batch == batches_per_epoch means "at the epoch-end marker").
// `fingerprint` ties it to a dataset size, sampler and batching so a state
// is never resumed against a different configuration.
struct LoaderState {
  uint64_t epoch = 0;
  uint64_t batch = 0;
  uint64_t fingerprint = 0;
  std::string ToString() const;                    // "refloader-state/1 epoch=E batch=B fp=HEX"
  static LoaderState Parse(const std::string& s);  // throws std::invalid_argument
};

// A worker failure or a misuse. `worker` is -1 for the caller's own process.
class LoaderError : public std::runtime_error {
 public:
  struct Info {
    int worker = -1;
    pid_t pid = 0;
    int signal = 0;        // terminating signal, 0 if none
    int exit_status = -1;  // exit status if it exited, else -1
    bool hung = false;     // no progress for timeout_ms
    int64_t sample = -1;   // dataset index being processed, -1 if unknown
    std::string message;   // transform's message, if any
  };
  LoaderError(const std::string& what, Info info)
      : std::runtime_error(what), info_(std::move(info)) {}
  const Info& info() const { return info_; }

 private:
  Info info_;
};

class Loader {
 public:
  // Opens and indexes the shards (RecordError on a bad header) and creates
  // the slot region. Forks nothing.
  explicit Loader(LoaderOptions options);
  ~Loader();  // Shutdown()
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Forks the workers (persistent until Shutdown) and starts prefetching the
  // current position (epoch 0 batch 0, or what Resume/BeginEpoch set).
  // Call it before initializing RDMA. Calling it twice is an error.
  void Start();

  const SlotRegion& slot_region() const;
  const Dataset& dataset() const;
  const LoaderOptions& options() const;
  uint64_t batches_per_epoch() const;
  uint64_t samples_per_epoch() const;
  std::vector<pid_t> worker_pids() const;

  // Next batch in sampler order or the marker ending the current epoch; after
  // the marker the stream continues with the next epoch. Blocks; throws
  // LoaderError on failure, or if every slot is held by the consumer.
  LoaderItem Next();

  // Gives the slot back for reuse. Every delivered batch must be released
  // exactly once (releasing twice or an unknown batch throws LoaderError).
  void Release(const Batch& batch);

  // Positions the stream at batch `batch` of `epoch` (see the header comment).
  void BeginEpoch(uint64_t epoch, uint64_t batch = 0);
  // BeginEpoch(state.epoch, state.batch) after checking the fingerprint.
  void Resume(const LoaderState& state);
  LoaderState state() const;

  // Stops and reaps the workers (EOF, then SIGKILL after a grace period).
  // Idempotent. Outstanding Batch views stay readable until destruction.
  void Shutdown();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace forkguard::loader
