// Samplers: which dataset indices an epoch visits, in which order.
//
// A sampler is a pure function of (options, dataset size, epoch): the loader,
// a resumed loader in another process and the tests all compute the same
// order, so resuming needs only (epoch, batches delivered).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace forkguard::loader {

enum class SamplerKind {
  kSequential,   // 0, 1, ..., n-1 every epoch
  kShuffle,      // a permutation seeded by (seed, epoch): new each epoch, reproducible
  kDistributed,  // this rank's equal-length share (see below), optionally shuffled
};

struct SamplerOptions {
  SamplerKind kind = SamplerKind::kSequential;
  uint64_t seed = 0;
  // kDistributed only.
  uint32_t rank = 0;
  uint32_t world = 1;
  bool shuffle = true;  // permute (seed, epoch) before sharding, like torch's DistributedSampler
};

// The indices of `epoch`, in delivery order.
//
// kDistributed padding rule (the one torch.utils.data.DistributedSampler uses):
// the full order (shuffled or not) of n indices is padded to
// world * ceil(n / world) by appending its own first indices again (cycling
// if world > n), and rank r takes positions r, r + world, r + 2*world, ...
// Every rank gets ceil(n / world) indices; the union over ranks covers every
// index; total padding (< world) duplicates the first indices of the order.
// An empty dataset gives every rank an empty epoch.
std::vector<uint64_t> EpochOrder(const SamplerOptions& opts, uint64_t dataset_size, uint64_t epoch);

// Number of indices per epoch without building the order.
uint64_t EpochLength(const SamplerOptions& opts, uint64_t dataset_size);

// "sequential" | "shuffle" | "distributed"; throws std::invalid_argument.
SamplerKind ParseSamplerKind(const std::string& s);
const char* SamplerKindName(SamplerKind k);

}  // namespace forkguard::loader
