#include "cli/job_report.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "cli/format.h"
#include "cli/symbolizer.h"

namespace forkguard::cli {
namespace {

// Identity of a stack for grouping when the shim gave no `site` hash.
std::string StackKey(const Stack& s) {
  std::string k;
  for (const auto& f : s) {
    if (f.python)
      k += f.py_file + ":" + std::to_string(f.py_line);
    else if (!f.obj.empty() && f.off)
      k += f.obj + "+" + Hex(*f.off);
    else if (!f.sym.empty())
      k += f.sym + "+" + f.symoff;
    else
      k += Hex(f.ip);
    k += ';';
  }
  return k;
}

struct ForkRecord {
  int64_t ts_ns = 0;
  std::string group_key;
  std::string action;
  int64_t child_pid = -1;
};

}  // namespace

std::string ExplainReason(const std::string& reason) {
  if (reason == "child-segv")
    return "memory registered for RDMA is MADV_DONTFORK: a child that touches it (or "
           "data sharing its pages) is killed by SIGSEGV";
  if (reason == "parent-corruption")
    return "registered pages are copied on the parent's next write while the HCA keeps "
           "using the old ones (not MADV_DONTFORK, and the kernel does not copy pinned pages "
           "of that memory kind at fork: measured by the pin probe, or reported by the "
           "kernel; each range's kind, effect and basis are in the fork event): silent "
           "corruption";
  if (reason == "inherited-rdma")
    return "the child inherits RDMA contexts/queues/channels it can never use";
  return reason;
}

std::string FormatRanks(const std::set<int64_t>& ranks, int max_runs) {
  if (ranks.empty()) return "";
  std::string list;
  size_t named = 0;
  int runs = 0;
  auto it = ranks.begin();
  while (it != ranks.end() && runs < std::max(1, max_runs)) {
    int64_t lo = *it, hi = lo;
    auto next = std::next(it);
    while (next != ranks.end() && *next == hi + 1) {
      hi = *next;
      ++next;
    }
    if (runs++ > 0) list += ", ";
    list += std::to_string(lo);
    if (hi > lo) list += (hi == lo + 1 ? ", " : "-") + std::to_string(hi);
    named += static_cast<size_t>(hi - lo + 1);
    it = next;
  }
  std::string out = (named == 1 ? "rank " : "ranks ") + list;
  if (named < ranks.size()) out += " and " + std::to_string(ranks.size() - named) + " more";
  return out;
}

std::vector<std::string> JobIds(const LogSet& logs) {
  std::set<std::string> ids;
  for (const auto& p : logs.processes) ids.insert(p.job);
  return {ids.begin(), ids.end()};
}

LogSet SelectJob(const LogSet& logs, const std::string& job, bool with_notes) {
  LogSet out;
  if (with_notes) {
    out.notes = logs.notes;
    out.files_read = logs.files_read;
    out.lines_skipped = logs.lines_skipped;
  }
  for (const auto& p : logs.processes) {
    if (p.job != job) continue;
    out.processes.push_back(p);
    out.lines_used += p.summary.lines;
  }
  return out;
}

std::vector<LogSet> SplitByJob(LogSet logs) {
  std::map<std::string, LogSet> parts;
  for (auto& p : logs.processes) {
    LogSet& part = parts[p.job];
    part.lines_used += p.summary.lines;
    part.processes.push_back(std::move(p));
  }
  std::vector<LogSet> out;
  for (auto& [job, part] : parts) out.push_back(std::move(part));
  if (out.empty()) out.emplace_back();
  out[0].notes = std::move(logs.notes);
  out[0].files_read = logs.files_read;
  out[0].lines_skipped = logs.lines_skipped;
  return out;
}

JobReport BuildJobReport(const LogSet& logs, Symbolizer* symbolizer) {
  JobReport r;
  r.notes = logs.notes;
  r.files_read = logs.files_read;
  r.lines_used = logs.lines_used;
  r.lines_skipped = logs.lines_skipped;

  // Processes in a stable order: host, start time, pid.
  std::vector<const ProcessLog*> order;
  for (const auto& p : logs.processes) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const ProcessLog* a, const ProcessLog* b) {
    if (a->host != b->host) return a->host < b->host;
    if (a->first_ts_ns != b->first_ts_ns) return a->first_ts_ns < b->first_ts_ns;
    return a->pid < b->pid;
  });

  for (const ProcessLog* p : order) {
    ProcessNode n;
    n.host = p->host;
    n.pid = p->pid;
    n.ppid = p->ppid;
    n.prog = p->prog;
    n.rank = p->rank;
    n.local_rank = p->local_rank;
    n.job = p->job;
    n.file = p->file;
    n.start_ns = p->first_ts_ns;
    r.hosts.insert(n.host);
    if (n.rank) r.ranks.insert(*n.rank);
    r.processes.push_back(std::move(n));
  }

  // Parent links: same host, pid == ppid, the latest such process that started
  // before the child (pids are reused on long jobs).
  std::map<std::pair<std::string, int64_t>, std::vector<int>> by_pid;
  for (int i = 0; i < static_cast<int>(r.processes.size()); ++i)
    by_pid[{r.processes[i].host, r.processes[i].pid}].push_back(i);
  for (int i = 0; i < static_cast<int>(r.processes.size()); ++i) {
    ProcessNode& c = r.processes[i];
    auto it = by_pid.find({c.host, c.ppid});
    if (it == by_pid.end()) continue;
    int best = -1;
    for (int cand : it->second) {
      if (cand == i) continue;
      if (c.start_ns && r.processes[cand].start_ns > c.start_ns) continue;
      if (best < 0 || r.processes[cand].start_ns > r.processes[best].start_ns) best = cand;
    }
    if (best >= 0) {
      c.parent = best;
      r.processes[best].children.push_back(i);
    }
  }

  std::map<std::string, ForkGroup> groups;
  std::map<std::string, InitSite> inits;
  std::vector<std::vector<ForkRecord>> fork_records(r.processes.size());
  std::vector<ChildDeath> deaths;
  std::set<std::string> shim_notes;

  for (int i = 0; i < static_cast<int>(order.size()); ++i) {
    ProcessNode& n = r.processes[i];
    const ProcessLog& pl = *order[i];
    for (const Event& e : pl.events) {
      if (e.type == "process_start") {
        n.exe = e.exe;
        n.mode = e.mode;
        n.argv = e.argv;
      } else if (e.type == "process_exit") {
        n.exited = true;
        if (e.status) n.exit_status = e.status;
      } else if (e.type == "rdma_init") {
        n.rdma_initialized = true;
        const Stack& st = pl.StackAt(e.stack);
        InitSite& s = inits[n.job + "|" + e.call + "|" + e.device + "|" + StackKey(st)];
        if (s.count == 0) {
          s.job = n.job;
          s.call = e.call;
          s.device = e.device;
          s.stack = st;
        }
        ++s.count;
        s.processes.insert(i);
        if (n.rank) s.ranks.insert(*n.rank);
      } else if (e.type == "fork") {
        ++n.forks;
        ++r.forks;
        const std::string& verdict = e.verdict;
        const Stack& st = pl.StackAt(e.stack);
        // The verdict first (ForkEntry reads it back); the job last: jobs stay apart.
        std::string key = verdict + "|" + (e.site.empty() ? StackKey(st) : e.site) + "|" + n.job;
        ForkGroup& g = groups[key];
        if (g.count == 0) {
          g.key = key;
          g.job = n.job;
          g.site = e.site;
          g.verdict = verdict;
          g.stack = st;
        }
        ++g.count;
        g.processes.insert(i);
        g.hosts.insert(n.host);
        if (n.rank) g.ranks.insert(*n.rank);
        if (verdict == "hazard") {
          ++n.hazard_forks;
          ++r.hazard_forks;
        } else if (verdict == "suppressed") {
          ++r.suppressed_forks;
        }
        for (const auto& x : e.reasons) ++g.reasons[x];
        ++g.actions[e.action];
        if (!e.via.empty()) ++g.via[e.via];
        if (g.fix_rule.empty() && !e.fix.empty()) {
          g.fix_rule = e.fix;
          g.fix_library = e.fix_library;
        }
        if (e.action == "failed" && !e.errno_text.empty() &&
            std::find(g.errnos.begin(), g.errnos.end(), e.errno_text) == g.errnos.end())
          g.errnos.push_back(e.errno_text);
        if (e.has_init) {
          if (e.init_age_ms >= 0) {
            g.min_age_ms = g.min_age_ms < 0 ? e.init_age_ms : std::min(g.min_age_ms, e.init_age_ms);
            g.max_age_ms = std::max(g.max_age_ms, e.init_age_ms);
          }
          if (g.init_call.empty()) {
            g.init_call = e.init_call;
            g.init_device = e.init_device;
            g.init_stack = pl.StackAt(e.init_stack);
          }
        }
        if (e.ranges > g.max_ranges || e.range_bytes > g.max_range_bytes) {
          g.max_ranges = e.ranges;
          g.max_range_bytes = e.range_bytes;
          g.dontfork_ranges = e.dontfork_ranges;
        }
        g.max_threads = std::max(g.max_threads, e.threads);
        if (e.kernel_cof) g.kernel_cof = e.kernel_cof;
        fork_records[i].push_back({e.ts_ns, key, e.action, -1});
      } else if (e.type == "fork_child") {
        // Belongs to the latest fork decision of this process without a child yet.
        for (auto it = fork_records[i].rbegin(); it != fork_records[i].rend(); ++it) {
          if (it->child_pid < 0) {
            it->child_pid = e.child_pid;
            break;
          }
        }
      } else if (e.type == "spawn") {
        ++r.spawns;
      } else if (e.type == "child_exec") {
        n.exec_after_fork = true;
      } else if (e.type == "child_segv") {
        n.died_segv = true;
        ChildDeath d;
        d.process = i;
        d.parent = n.parent;
        d.signal = e.signal;
        d.addr = e.addr;
        d.range_addr = e.range_addr;
        d.range_len = e.range_len;
        d.call = e.call;
        d.reg_stack = pl.StackAt(e.stack);
        deaths.push_back(std::move(d));
      } else if (e.type == "note") {
        if (!e.text.empty() && shim_notes.size() < 50) shim_notes.insert(n.prog + ": " + e.text);
      }
    }
  }

  // Groups in report order: most forks first.
  std::vector<ForkGroup> all;
  for (auto& [k, g] : groups) all.push_back(std::move(g));
  std::stable_sort(all.begin(), all.end(), [](const ForkGroup& a, const ForkGroup& b) {
    if (a.count != b.count) return a.count > b.count;
    return a.key < b.key;
  });
  std::map<std::string, std::pair<bool, int>> index;  // key -> (hazard?, index)
  std::map<std::string, int> suppressed_index;
  for (auto& g : all) {
    if (g.verdict == "suppressed") {
      suppressed_index[g.key] = static_cast<int>(r.suppressed_groups.size());
      r.suppressed_groups.push_back(std::move(g));
      continue;
    }
    bool hazard = g.verdict == "hazard";
    auto& v = hazard ? r.hazard_groups : r.clean_groups;
    index[g.key] = {hazard, static_cast<int>(v.size())};
    v.push_back(std::move(g));
  }
  auto group_of = [&](const std::string& key) -> ForkGroup* {
    if (auto s = suppressed_index.find(key); s != suppressed_index.end())
      return &r.suppressed_groups[s->second];
    auto it = index.find(key);
    if (it == index.end()) return nullptr;
    auto& v = it->second.first ? r.hazard_groups : r.clean_groups;
    return &v[it->second.second];
  };
  for (size_t i = 0; i < fork_records.size(); ++i)
    for (const auto& rec : fork_records[i])
      if (rec.action != "failed" && rec.action != "aborted")
        if (ForkGroup* g = group_of(rec.group_key)) ++g->children_forked;

  // Which fork made each child: the fork_child record naming its pid, else
  // the parent's latest fork decision before the child's first event.
  std::vector<std::map<int64_t, size_t>> by_child(r.processes.size());  // child pid -> record
  for (size_t i = 0; i < fork_records.size(); ++i)
    for (size_t k = 0; k < fork_records[i].size(); ++k)
      if (fork_records[i][k].child_pid > 0) by_child[i].emplace(fork_records[i][k].child_pid, k);
  std::vector<const ForkRecord*> made_by(r.processes.size(), nullptr);
  for (int c = 0; c < static_cast<int>(r.processes.size()); ++c) {
    const ProcessNode& child = r.processes[c];
    if (child.parent < 0) continue;
    const ForkRecord* best = nullptr;
    const auto& recs = fork_records[child.parent];
    if (auto it = by_child[child.parent].find(child.pid); it != by_child[child.parent].end()) {
      best = &recs[it->second];
    } else {
      for (const auto& rec : recs)
        if (rec.child_pid < 0 && (!child.start_ns || rec.ts_ns <= child.start_ns)) best = &rec;
    }
    made_by[c] = best;
    if (!best) continue;
    if (ForkGroup* g = group_of(best->group_key)) {
      if (child.died_segv) ++g->children_segv;
      if (child.exec_after_fork) ++g->children_exec;
    }
  }
  for (size_t i = 0; i < fork_records.size(); ++i) {
    for (const auto& rec : fork_records[i]) {
      ForkEntry f;
      f.process = static_cast<int>(i);
      f.ts_ns = rec.ts_ns;
      f.verdict = rec.group_key.substr(0, rec.group_key.find('|'));
      f.action = rec.action;
      f.child_pid = rec.child_pid;
      if (auto it = index.find(rec.group_key); it != index.end()) {
        f.hazard = it->second.first;
        f.group = it->second.second;
      }
      r.fork_list.push_back(std::move(f));
    }
  }
  for (auto& d : deaths) {
    if (const ForkRecord* rec = made_by[d.process]) {
      auto it = index.find(rec->group_key);
      if (it != index.end() && it->second.first) d.group = it->second.second;
    }
  }
  r.deaths = std::move(deaths);

  for (auto& [k, s] : inits) r.inits.push_back(std::move(s));
  std::stable_sort(r.inits.begin(), r.inits.end(),
                   [](const InitSite& a, const InitSite& b) { return a.count > b.count; });
  r.shim_notes.assign(shim_notes.begin(), shim_notes.end());

  std::map<std::string, JobSummary> jobs;
  for (const auto& p : r.processes) {
    JobSummary& j = jobs[p.job];
    j.job = p.job;
    ++j.processes;
    j.hosts.insert(p.host);
    if (p.rank) j.ranks.insert(*p.rank);
    j.forks += p.forks;
    j.hazard_forks += p.hazard_forks;
  }
  for (const auto& g : r.hazard_groups) ++jobs[g.job].hazard_sites;
  for (auto& [id, j] : jobs) r.jobs.push_back(std::move(j));

  if (symbolizer) {
    for (auto& g : r.hazard_groups) {
      symbolizer->Symbolize(&g.stack);
      symbolizer->Symbolize(&g.init_stack);
    }
    for (auto& g : r.clean_groups) symbolizer->Symbolize(&g.stack);
    for (auto& g : r.suppressed_groups) {
      symbolizer->Symbolize(&g.stack);
      symbolizer->Symbolize(&g.init_stack);
    }
    for (auto& s : r.inits) symbolizer->Symbolize(&s.stack);
    for (auto& d : r.deaths) symbolizer->Symbolize(&d.reg_stack);
    for (Note& n : symbolizer->TakeNotes()) r.notes.push_back(std::move(n));
  }
  return r;
}

}  // namespace forkguard::cli
