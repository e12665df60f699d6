// `forkguard doctor`'s checks that are pure functions of the facts it gathered: what the
// fork matrix measured for this machine, and what fix mode would do here. doctor_command.cc
// gathers the facts and prints; //cli:doctor_test calls these with facts of its own.
#pragma once

#include <string>
#include <vector>

#include "facts/fork_rule.h"

namespace forkguard::cli::doctor {

enum class Verdict { kOk, kWarn, kFail };

struct Check {
  std::string name;
  Verdict verdict;
  std::string detail;
  std::string advice;  // what to do; empty when ok
};

// The machine facts (facts/machine_facts.h, facts/pin_probe.h) and what the rule
// (facts/fork_rule.h) makes of them, per memory kind: doctor computes nothing of its own.
struct DoctorFacts {
  facts::MachineFacts m;
  std::string release;  // uname -r
  std::string cof_why;
  std::string rdma_core_path;
  std::string fork_env;  // "RDMAV_FORK_SAFE=1" when set
  std::string mode;      // FORKGUARD_MODE as set; "" when unset
  bool probed_now = false;
  unsigned from = 0;  // facts::kFromUserCache | kFromSystemCache: the caches read
  std::string cache_path;
  std::string system_cache_path;
};

// "anonymous, thp and hugetlb".
std::string KindList(const std::vector<facts::MemoryKind>& kinds);

// facts::BasisText of `v`.
std::string BasisOf(const facts::RangeVerdict& v);

// Where docs/fork-matrix.md shows this case measured: its column (this kernel's series and
// rdma-core) and the rows with this fork support. Where the matrix has no such column (a
// kernel series or an rdma-core it did not run, or an unknown rdma-core version) it says so
// and names what was measured, claiming nothing from the nearest.
std::string MatrixCell(const DoctorFacts& f);

// "fix mode": whether FORKGUARD_MODE=fix would help on this machine, per memory kind
// (anonymous, THP, hugetlb), from the rule and the facts the verdict uses, with the matrix
// cells that show it where the matrix has this machine's column.
Check CheckFixMode(const DoctorFacts& f);

}  // namespace forkguard::cli::doctor
