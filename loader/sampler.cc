#include "loader/sampler.h"

#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace forkguard::loader {
namespace {

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Fisher-Yates with a generator seeded by (seed, epoch): a new permutation per
// epoch, the same one in every process.
void Shuffle(std::vector<uint64_t>& v, uint64_t seed, uint64_t epoch) {
  uint64_t s = seed;
  uint64_t mixed = SplitMix(s) ^ (epoch * 0xd1b54a32d192ed03ull);
  uint64_t rng = SplitMix(mixed);
  for (size_t i = v.size(); i > 1; i--) {
    // Lemire's multiply-shift maps 64 random bits to [0, i) without division.
    size_t j = static_cast<size_t>((static_cast<unsigned __int128>(SplitMix(rng)) * i) >> 64);
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace

uint64_t EpochLength(const SamplerOptions& o, uint64_t n) {
  if (o.kind != SamplerKind::kDistributed) return n;
  if (o.world == 0 || o.rank >= o.world)
    throw std::invalid_argument("distributed sampler: need rank < world, got rank " +
                                std::to_string(o.rank) + " world " + std::to_string(o.world));
  return (n + o.world - 1) / o.world;
}

std::vector<uint64_t> EpochOrder(const SamplerOptions& o, uint64_t n, uint64_t epoch) {
  std::vector<uint64_t> all(n);
  std::iota(all.begin(), all.end(), uint64_t{0});
  switch (o.kind) {
    case SamplerKind::kSequential:
      return all;
    case SamplerKind::kShuffle:
      Shuffle(all, o.seed, epoch);
      return all;
    case SamplerKind::kDistributed: {
      uint64_t per_rank = EpochLength(o, n);
      if (o.shuffle) Shuffle(all, o.seed, epoch);
      std::vector<uint64_t> mine;
      mine.reserve(per_rank);
      for (uint64_t k = 0; k < per_rank; k++) {
        uint64_t pos = o.rank + k * o.world;  // position in the padded order
        mine.push_back(all[pos % n]);         // padding cycles from the front
      }
      return mine;
    }
  }
  return all;
}

namespace {

// Each kind's name (the first of its rows: what SamplerKindName writes), then the other
// spellings ParseSamplerKind reads.
constexpr std::pair<SamplerKind, const char*> kSamplerNames[] = {
    {SamplerKind::kSequential, "sequential"},   {SamplerKind::kShuffle, "shuffle"},
    {SamplerKind::kDistributed, "distributed"}, {SamplerKind::kSequential, "seq"},
    {SamplerKind::kShuffle, "random"},          {SamplerKind::kDistributed, "dist"}};

}  // namespace

SamplerKind ParseSamplerKind(const std::string& s) {
  for (const auto& [kind, name] : kSamplerNames)
    if (s == name) return kind;
  throw std::invalid_argument("unknown sampler '" + s + "' (sequential, shuffle, distributed)");
}

const char* SamplerKindName(SamplerKind k) {
  for (const auto& [kind, name] : kSamplerNames)
    if (kind == k) return name;
  return "?";
}

}  // namespace forkguard::loader
