// The methods of what a read log holds (cli/process_log.h): the sums and bins that fold many
// lines into fixed memory.
#include "cli/process_log.h"

#include <algorithm>

namespace forkguard::cli {

void ProcessSummary::CountType(std::string_view type, int64_t n) {
  auto it = counts.find(type);
  if (it != counts.end())
    it->second += n;
  else if (counts.size() < kMaxCountedTypes)
    counts.emplace(type, n);
  else
    counts["other"] += n;
}

void FixTally::Take(const FixTally& o) {
  forks = SatAdd(forks, o.forks);
  copied_ranges = SatAdd(copied_ranges, o.copied_ranges);
  copied_bytes = SatAdd(copied_bytes, o.copied_bytes);
  withheld_ranges = SatAdd(withheld_ranges, o.withheld_ranges);
  withheld_bytes = SatAdd(withheld_bytes, o.withheld_bytes);
  copied_kinds |= o.copied_kinds;
  withheld_kinds |= o.withheld_kinds;
  failed_ranges = SatAdd(failed_ranges, o.failed_ranges);
}

std::vector<std::string> FixTally::KindNames(unsigned mask) {
  std::vector<std::string> out;
  for (size_t k = 0; k < std::size(kKinds); ++k)
    if (mask & (1u << k)) out.emplace_back(kKinds[k]);
  return out;
}

void ForkRangesAtWorst::Take(int ranges, int64_t range_bytes, int dontfork, int64_t threads,
                             std::optional<bool> cof) {
  if (range_bytes > max_range_bytes || (range_bytes == max_range_bytes && ranges > max_ranges)) {
    max_ranges = ranges;
    max_range_bytes = range_bytes;
    dontfork_ranges = dontfork;
  }
  max_threads = std::max(max_threads, threads);
  if (cof) kernel_cof = cof;
}

void ForkHistogram::Add(int64_t ts_ns, int64_t n, int64_t n_hazard) {
  if (forks.empty()) {
    t0_ns = ts_ns;
    forks.assign(kBins, 0);
    hazard.assign(kBins, 0);
  }
  if (ts_ns < t0_ns) ts_ns = t0_ns;  // out of order: counted in the first bin
  // The offset from the first fork, unsigned: exact for any two int64 values with
  // ts_ns >= t0_ns, so the bin index is in range whatever a log says.
  const uint64_t offset = static_cast<uint64_t>(ts_ns) - static_cast<uint64_t>(t0_ns);
  while (offset / static_cast<uint64_t>(width_ns) >= kBins) {
    for (size_t i = 0; i < kBins / 2; ++i) {
      forks[i] = SatAdd(forks[2 * i], forks[2 * i + 1]);
      hazard[i] = SatAdd(hazard[2 * i], hazard[2 * i + 1]);
    }
    std::fill(forks.begin() + kBins / 2, forks.end(), 0);
    std::fill(hazard.begin() + kBins / 2, hazard.end(), 0);
    width_ns *= 2;  // at most 2^58 here: 64 bins of it span every uint64 offset
  }
  size_t b = static_cast<size_t>(offset / static_cast<uint64_t>(width_ns));
  forks[b] = SatAdd(forks[b], n);
  hazard[b] = SatAdd(hazard[b], n_hazard);
}

const Stack& ProcessLog::StackAt(int id) const {
  static const Stack kEmpty;
  if (id < 0 || static_cast<size_t>(id) >= stacks.size()) return kEmpty;
  return stacks[static_cast<size_t>(id)];
}

}  // namespace forkguard::cli
