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
    const ProcessNode& node = r.processes[i];
    ProcessTimeline& pt = t.processes[i];
    pt.begin_ns = node.start_ns;
    pt.end_ns = node.start_ns;
    size_t fork_k = 0;
    for (const Event& e : log.events) {
      if (e.ts_ns > 0) {
        if (pt.begin_ns == 0 || e.ts_ns < pt.begin_ns) pt.begin_ns = e.ts_ns;
        pt.end_ns = std::max(pt.end_ns, e.ts_ns);
      }
      const JsonValue& b = e.body;
      TimelineMark m;
      m.ts_ns = e.ts_ns;
      m.tid = e.tid;
      m.call = b.GetString("call");
      if (e.type == "rdma_init") {
        m.kind = TimelineMark::Kind::kRdmaInit;
        m.device = b.GetString("device");
      } else if (e.type == "mr_register") {
        ++pt.registrations;
        m.bytes = std::max<int64_t>(0, b.GetInt("len", 0));
        pt.registered_bytes += m.bytes;
        m.dontfork = b.GetBool("dontfork", false);
        if (pt.registrations > Timeline::kMaxRegisterMarks) continue;
        m.kind = TimelineMark::Kind::kRegister;
      } else if (e.type == "mr_deregister") {
        continue;  // not drawn: registrations and forks are what matter
      } else if (e.type == "fork") {
        m.kind = TimelineMark::Kind::kFork;
        if (fork_k < forks[i].size()) {
          const ForkEntry& f = *forks[i][fork_k++];
          m.verdict = f.verdict;
          m.action = f.action;
          m.child_pid = f.child_pid;
          m.site_id = SiteId(r, f);
        } else {
          m.verdict = b.GetString("verdict", "unknown");
          m.action = b.GetString("action", "unknown");
        }
        if (const JsonValue* rs = b.Find("reasons"); rs && rs->is_array())
          for (const auto& x : rs->array())
            if (x.is_string()) m.reasons.push_back(x.string_value());
        if (m.child_pid > 0)
          for (int c : node.children)
            if (r.processes[c].pid == m.child_pid) m.child = c;
      } else if (e.type == "spawn") {
        m.kind = TimelineMark::Kind::kSpawn;
        m.child_pid = b.GetInt("child_pid", -1);
      } else if (e.type == "child_exec") {
        m.kind = TimelineMark::Kind::kExec;
        m.call = b.GetString("path");
      } else if (e.type == "child_segv") {
        m.kind = TimelineMark::Kind::kSegv;
        m.signal = static_cast<int>(b.GetInt("signal", 11));
      } else if (e.type == "process_exit") {
        m.kind = TimelineMark::Kind::kExit;
      } else {
        continue;
      }
      pt.marks.push_back(std::move(m));
    }
    std::stable_sort(
        pt.marks.begin(), pt.marks.end(),
        [](const TimelineMark& a, const TimelineMark& b) { return a.ts_ns < b.ts_ns; });
    if (node.died_segv)
      pt.ending = "killed by SIGSEGV";
    else if (node.exec_after_fork)
      pt.ending = "exec'd";
    else if (node.exit_status)
      pt.ending = "exit " + std::to_string(*node.exit_status);
    else if (node.exited)
      pt.ending = "exit";
    else
      pt.ending = "no exit record";
    if (pt.begin_ns > 0) t0 = std::min(t0, pt.begin_ns);
    t1 = std::max(t1, pt.end_ns);
  }
  t.t0_ns = t0 == std::numeric_limits<int64_t>::max() ? 0 : t0;
  t.t1_ns = std::max(t1, t.t0_ns);
  return t;
}

}  // namespace forkguard::cli
