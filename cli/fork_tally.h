// Forks are tallied, not kept: each fork line folds into its process's site (verdict, site
// hash or stack, suppression) with exact counts, and into a bounded sample of forks (the
// first and the newest); each fork_child line names the child of the newest fork without
// one. Memory grows with sites, not with forks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cli/process_log.h"

namespace forkguard::cli {

// (host, pid) of every process with a log of its own.
using WithLogs = std::set<std::pair<std::string, int64_t>>;

// One process's forks while its file is read.
struct ForkTally {
  // A fork still without a fork_child line.
  struct Pending {
    int site;
    int64_t ts_ns;
    int64_t ordinal;
  };
  // The site of each (verdict, site hash or stack, suppression), the forks still without a
  // fork_child line (newest last, at most kMaxPending), the newest samples (a ring).
  std::unordered_map<std::string, int> site_ids;
  std::vector<Pending> pending;
  std::vector<ForkSample> tail;
  size_t tail_next = 0;
  // Storage reused from fork line to fork line.
  std::string site_key;
};

// Folds fork line `e` (its common fields), whose record is `f`, of process `p` into its site
// and its sample.
void TallyFork(const Event& e, const Fork& f, ForkTally* forks, ProcessLog* p);

// A fork_child line: the child of the newest fork of this process without one, kept in
// p->child_links when it has a log of its own (`with_logs`; null: unknown, every child).
void TallyForkChild(int64_t child_pid, const WithLogs* with_logs, ForkTally* forks, ProcessLog* p);

// The end of a file: the process's newest forks join its sample, in log order.
void FinishForks(ForkTally* forks, ProcessLog* p);

}  // namespace forkguard::cli
