#include "cli/job_timeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

namespace forkguard::cli {

int SiteId(const JobReport& r, const ForkEntry& f) {
  if (f.group < 0) return -1;
  return f.hazard ? f.group + 1 : static_cast<int>(r.hazard_groups.size()) + f.group + 1;
}

namespace {

// Widens the process's span to `ts` (0: unknown).
void See(ProcessTimeline* pt, int64_t ts) {
  if (ts > 0) {
    if (pt->begin_ns == 0 || ts < pt->begin_ns) pt->begin_ns = ts;
    pt->end_ns = std::max(pt->end_ns, ts);
  }
}

// A mark of `kind` at `ts_ns` on thread `tid`, the rest of it empty.
TimelineMark Mark(TimelineMark::Kind kind, int64_t ts_ns, int64_t tid) {
  TimelineMark m;
  m.kind = kind;
  m.ts_ns = ts_ns;
  m.tid = tid;
  return m;
}

// Registrations are counted by the reader, not kept: its first few are drawn.
void AddRegistrations(const ProcessLog& log, ProcessTimeline* pt) {
  pt->registrations = log.summary.registrations;
  pt->registered_bytes = log.summary.registered_bytes;
  for (const RegistrationSample& reg : log.summary.first_registrations) {
    if (static_cast<int>(pt->marks.size()) >= Timeline::kMaxRegisterMarks) break;
    TimelineMark m = Mark(TimelineMark::Kind::kRegister, reg.ts_ns, reg.tid);
    m.call = reg.call;
    m.bytes = reg.len;
    m.dontfork = reg.dontfork;
    pt->marks.push_back(std::move(m));
  }
}

// Every fork counted in time bins (the reader's), without the empty bins at the end.
void TakeForkBins(const ProcessLog& log, ProcessTimeline* pt) {
  if (log.fork_bins.forks.empty()) return;
  pt->bins_t0_ns = log.fork_bins.t0_ns;
  pt->bin_width_ns = log.fork_bins.width_ns;
  pt->bin_forks = log.fork_bins.forks;
  pt->bin_hazard = log.fork_bins.hazard;
  while (!pt->bin_forks.empty() && pt->bin_forks.back() == 0) {
    pt->bin_forks.pop_back();
    pt->bin_hazard.pop_back();
  }
}

TimelineMark ForkMark(const JobReport& r, const ProcessNode& node, const ForkEntry& f) {
  TimelineMark m = Mark(TimelineMark::Kind::kFork, f.ts_ns, f.tid);
  m.verdict = f.verdict;
  m.action = f.action;
  m.reasons = f.reasons;
  m.child_pid = f.child_pid;
  m.site_id = SiteId(r, f);
  if (m.child_pid > 0)
    for (int c : node.children)
      if (r.processes[c].pid == m.child_pid) m.child = c;
  return m;
}

// The mark of an event the timeline draws; false for the others.
bool EventMark(const Event& e, TimelineMark* out) {
  using Kind = TimelineMark::Kind;
  TimelineMark& m = *out;
  m = Mark(Kind::kExit, e.ts_ns, e.tid);
  if (const auto* init = e.As<RdmaInit>()) {
    m.kind = Kind::kRdmaInit;
    m.call = init->call;
    m.device = init->device;
  } else if (const auto* spawn = e.As<Spawn>()) {
    m.kind = Kind::kSpawn;
    m.call = spawn->call;
    m.child_pid = spawn->child_pid;
  } else if (const auto* exec = e.As<ChildExec>()) {
    m.kind = Kind::kExec;
    m.call = exec->path;
  } else if (const auto* segv = e.As<ChildSegv>()) {
    m.kind = Kind::kSegv;
    m.call = segv->call;
    m.signal = segv->signal;
  } else if (!e.As<ProcessExit>()) {
    return false;
  }
  return true;
}

std::string Ending(const ProcessNode& node) {
  if (node.died_segv) return "killed by SIGSEGV";
  if (node.exec_after_fork) return "exec'd";
  if (node.exit_status) return "exit " + std::to_string(*node.exit_status);
  if (node.exited) return "exit";
  return "no exit record";
}

// Process i's line: its span, registrations, fork counts and bins, and its marks in time
// order (`forks`: its listed forks, in log order).
void BuildProcessTimeline(const ProcessLog& log, const JobReport& r, int i,
                          const std::vector<const ForkEntry*>& forks, ProcessTimeline* pt) {
  const ProcessNode& node = r.processes[i];
  pt->begin_ns = node.start_ns;
  pt->end_ns = node.start_ns;
  pt->marks.reserve(
      std::min<size_t>(log.summary.first_registrations.size(), Timeline::kMaxRegisterMarks) +
      log.events.size() + forks.size());
  AddRegistrations(log, pt);
  if (log.summary.last_ts_ns > 0) pt->end_ns = std::max(pt->end_ns, log.summary.last_ts_ns);
  pt->forks = node.forks;
  pt->forks_listed = static_cast<int>(forks.size());
  TakeForkBins(log, pt);
  if (log.first_fork_ns > 0) See(pt, log.first_fork_ns);
  if (log.last_fork_ns > 0) See(pt, log.last_fork_ns);
  // The listed forks, in log order among the other events.
  size_t fork_k = 0;
  auto fork_mark = [&](const ForkEntry& f) {
    See(pt, f.ts_ns);
    pt->marks.push_back(ForkMark(r, node, f));
  };
  for (const Event& e : log.events) {
    while (fork_k < forks.size() && forks[fork_k]->line < e.line) fork_mark(*forks[fork_k++]);
    See(pt, e.ts_ns);
    TimelineMark m;
    if (EventMark(e, &m)) pt->marks.push_back(std::move(m));
  }
  while (fork_k < forks.size()) fork_mark(*forks[fork_k++]);
  std::stable_sort(pt->marks.begin(), pt->marks.end(),
                   [](const TimelineMark& a, const TimelineMark& b) { return a.ts_ns < b.ts_ns; });
  pt->ending = Ending(node);
}

}  // namespace

Timeline BuildTimeline(const LogSet& logs, const JobReport& r) {
  Timeline t;
  t.processes.resize(r.processes.size());
  std::map<std::pair<std::string, int64_t>, int> index;  // (file, pid) -> process
  for (int i = 0; i < static_cast<int>(r.processes.size()); ++i)
    index[{r.processes[i].file, r.processes[i].pid}] = i;
  // Fork decisions of each process in log order, as the JobReport numbered them.
  std::vector<std::vector<const ForkEntry*>> forks(r.processes.size());
  for (const auto& f : r.fork_list)
    if (f.process >= 0 && f.process < static_cast<int>(forks.size()))
      forks[f.process].push_back(&f);

  int64_t t0 = std::numeric_limits<int64_t>::max(), t1 = 0;
  for (const ProcessLog& log : logs.processes) {
    auto it = index.find({log.file, log.pid});
    if (it == index.end()) continue;
    int i = it->second;
    ProcessTimeline& pt = t.processes[i];
    BuildProcessTimeline(log, r, i, forks[i], &pt);
    if (pt.begin_ns > 0) t0 = std::min(t0, pt.begin_ns);
    t1 = std::max(t1, pt.end_ns);
  }
  t.t0_ns = t0 == std::numeric_limits<int64_t>::max() ? 0 : t0;
  t.t1_ns = std::max(t1, t.t0_ns);
  return t;
}

}  // namespace forkguard::cli
