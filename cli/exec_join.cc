// Joining the logs of one pid across exec: the later program's log folded into the first.
#include "cli/exec_join.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace forkguard::cli {
namespace {

using schema::EventType;

// Folds process `b` (a later program of the same pid) into `a`.
void JoinInto(ProcessLog&& b, ProcessLog* a) {
  const int stack_base = static_cast<int>(a->stacks.size());
  const int site_base = static_cast<int>(a->fork_sites.size());
  int line_base = 0;
  for (const Event& e : a->events) line_base = std::max(line_base, e.line);
  for (const ForkSample& f : a->fork_sample) line_base = std::max(line_base, f.line);
  auto stack = [&](int id) { return id < 0 ? id : id + stack_base; };
  for (Stack& s : b.stacks) a->stacks.push_back(std::move(s));
  for (Event& e : b.events) {
    // The stacks the kept records name (a fork's are in its site, below).
    if (auto* init = e.As<RdmaInit>()) init->stack = stack(init->stack);
    if (auto* segv = e.As<ChildSegv>()) segv->reg_stack = stack(segv->reg_stack);
    e.line += line_base;
    a->events.push_back(std::move(e));
  }
  for (ForkSite& s : b.fork_sites) {
    s.stack = stack(s.stack);
    s.init_stack = stack(s.init_stack);
    a->fork_sites.push_back(std::move(s));
  }
  for (ForkSample& f : b.fork_sample) {
    f.site += site_base;
    f.line += line_base;
    f.ordinal += a->forks;
    a->fork_sample.push_back(std::move(f));
  }
  for (ChildLink& l : b.child_links) {
    l.site += site_base;
    a->child_links.push_back(l);
  }
  for (size_t k = 0; k < b.fork_bins.forks.size(); ++k)
    if (b.fork_bins.forks[k] > 0)
      a->fork_bins.Add(b.fork_bins.t0_ns + static_cast<int64_t>(k) * b.fork_bins.width_ns,
                       b.fork_bins.forks[k], b.fork_bins.hazard[k]);
  if (a->first_fork_ns == 0 || (b.first_fork_ns > 0 && b.first_fork_ns < a->first_fork_ns))
    a->first_fork_ns = b.first_fork_ns;
  a->last_fork_ns = std::max(a->last_fork_ns, b.last_fork_ns);
  a->forks += b.forks;
  a->fork_children += b.fork_children;
  ProcessSummary& s = a->summary;
  for (const auto& [type, n] : b.summary.counts) s.CountType(type, n);
  s.lines += b.summary.lines;
  for (RegistrationSample& r : b.summary.first_registrations)
    if (s.first_registrations.size() < ProcessSummary::kMaxRegistrationSamples)
      s.first_registrations.push_back(std::move(r));
  s.last_ts_ns = std::max(s.last_ts_ns, b.summary.last_ts_ns);
  if (s.rdma_init_ts_ns == 0) s.rdma_init_ts_ns = b.summary.rdma_init_ts_ns;
  s.registrations = SatAdd(s.registrations, b.summary.registrations);
  s.registered_bytes = SatAdd(s.registered_bytes, b.summary.registered_bytes);
  a->execs.push_back({a->prog, a->file});
  for (ProcessLog::Exec& x : b.execs) a->execs.push_back(std::move(x));
  if (!b.prog.empty()) a->prog = std::move(b.prog);
  a->file = std::move(b.file);
  if (a->ppid <= 0) a->ppid = b.ppid;
  if (!a->rank) a->rank = b.rank;
  if (!a->local_rank) a->local_rank = b.local_rank;
  if (b.first_ts_ns > 0 && (a->first_ts_ns == 0 || b.first_ts_ns < a->first_ts_ns))
    a->first_ts_ns = b.first_ts_ns;
}

// When process `p` last exec'd, if it did and did not exit after it; nullopt otherwise.
std::optional<int64_t> ExecTs(const ProcessLog& p) {
  std::optional<int64_t> at;
  for (const Event& e : p.events) {
    if (e.kind == EventType::kExec)
      at = e.ts_ns;
    else if (e.kind == EventType::kProcessExit)
      at.reset();
  }
  return at;
}

}  // namespace

void JoinExecs(LogSet* logs) {
  std::map<std::tuple<std::string, std::string, int64_t>, std::vector<size_t>> by_pid;
  bool any = false;
  for (size_t i = 0; i < logs->processes.size(); ++i) {
    const ProcessLog& p = logs->processes[i];
    auto& v = by_pid[{p.host, p.job, p.pid}];
    v.push_back(i);
    any = any || v.size() > 1;
  }
  if (!any) return;
  std::vector<bool> gone(logs->processes.size(), false);
  for (auto& [key, v] : by_pid) {
    if (v.size() < 2) continue;
    std::stable_sort(v.begin(), v.end(), [&](size_t x, size_t y) {
      return logs->processes[x].first_ts_ns < logs->processes[y].first_ts_ns;
    });
    size_t into = v[0];
    for (size_t k = 1; k < v.size(); ++k) {
      ProcessLog& a = logs->processes[into];
      ProcessLog& b = logs->processes[v[k]];
      std::optional<int64_t> exec = ExecTs(a);
      if (exec && (b.first_ts_ns == 0 || b.first_ts_ns >= *exec)) {
        JoinInto(std::move(b), &a);
        gone[v[k]] = true;
      } else {
        into = v[k];
      }
    }
  }
  std::vector<ProcessLog> kept;
  kept.reserve(logs->processes.size());
  for (size_t i = 0; i < logs->processes.size(); ++i)
    if (!gone[i]) kept.push_back(std::move(logs->processes[i]));
  logs->processes = std::move(kept);
}

}  // namespace forkguard::cli
