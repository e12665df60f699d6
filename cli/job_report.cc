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

// The group key of fork site `s` of a process of job `job`: the verdict first (ForkEntry
// reads it back); the job last: jobs stay apart.
std::string GroupKey(const ForkSite& s, const ProcessLog& pl, const std::string& job) {
  return s.verdict + "|" + (s.site.empty() ? StackKey(pl.StackAt(s.stack)) : s.site) + "|" + job;
}

// What is known of the fork that made a child: its site's group key.
struct MadeBy {
  const std::string* group_key = nullptr;
};

}  // namespace

std::string ExplainReason(const std::string& reason) {
  if (reason == schema::kReasonChildSegv)
    return "memory registered for RDMA is MADV_DONTFORK: a child that touches it (or "
           "data sharing its pages) is killed by SIGSEGV";
  if (reason == schema::kReasonParentCorruption)
    return "registered pages are copied on the parent's next write while the HCA keeps "
           "using the old ones (not MADV_DONTFORK, and the kernel does not copy pinned pages "
           "of that memory kind at fork: measured by the pin probe, or reported by the "
           "kernel; each range's kind, effect and basis are in the fork event): silent "
           "corruption";
  if (reason == schema::kReasonInheritedRdma)
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

namespace {

// Processes in a stable order: host, start time, pid.
std::vector<const ProcessLog*> StableOrder(const LogSet& logs) {
  std::vector<const ProcessLog*> order;
  for (const auto& p : logs.processes) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const ProcessLog* a, const ProcessLog* b) {
    if (a->host != b->host) return a->host < b->host;
    if (a->first_ts_ns != b->first_ts_ns) return a->first_ts_ns < b->first_ts_ns;
    return a->pid < b->pid;
  });
  return order;
}

void AddProcesses(JobReport* report, const std::vector<const ProcessLog*>& order) {
  JobReport& r = *report;
  for (const ProcessLog* p : order) {
    ProcessNode n;
    n.host = p->host;
    n.pid = p->pid;
    n.ppid = p->ppid;
    n.prog = p->prog;
    n.execs = p->execs;
    n.rank = p->rank;
    n.local_rank = p->local_rank;
    n.job = p->job;
    n.file = p->file;
    n.start_ns = p->first_ts_ns;
    n.registrations = p->summary.registrations;
    n.registrations_at_least = n.registrations > 0 && !p->summary.counts_final;
    r.hosts.insert(n.host);
    if (n.rank) r.ranks.insert(*n.rank);
    r.processes.push_back(std::move(n));
  }
}

// Parent links: same host, pid == ppid, the latest such process that started
// before the child (pids are reused on long jobs).
void LinkParents(JobReport* report) {
  JobReport& r = *report;
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
}

// What the walk over the processes gathers, by key, before the report is ordered.
struct Gathered {
  std::map<std::string, ForkGroup> groups;
  std::map<std::string, InitSite> inits;
  // Per process: the group key of each of its fork sites.
  std::vector<std::vector<std::string>> site_keys;
  std::vector<ChildDeath> deaths;
  std::set<std::string> shim_notes;
};

// A process's fork site (tallied per site by the reader) into the job's group for it.
void AddForkSite(JobReport* report, int i, const ProcessLog& pl, const ForkSite& fs,
                 Gathered* gathered) {
  JobReport& r = *report;
  ProcessNode& n = r.processes[i];
  std::string key = GroupKey(fs, pl, n.job);
  ForkGroup& g = gathered->groups[key];
  if (g.count == 0) {
    g.key = key;
    g.job = n.job;
    g.site = fs.site;
    g.verdict = fs.verdict;
    g.stack = pl.StackAt(fs.stack);
  }
  g.count += static_cast<int>(fs.count);
  g.processes.insert(i);
  g.hosts.insert(n.host);
  if (n.rank) g.ranks.insert(*n.rank);
  n.hazard_forks += static_cast<int>(fs.hazard);
  r.hazard_forks += fs.hazard;
  if (fs.verdict == kVerdictSuppressed) r.suppressed_forks += fs.count;
  for (const auto& [x, c] : fs.reasons) g.reasons[x] += static_cast<int>(c);
  for (const auto& [x, c] : fs.actions) g.actions[x] += static_cast<int>(c);
  for (const auto& [x, c] : fs.via) g.via[x] += static_cast<int>(c);
  if (g.fix_rule.empty() && !fs.fix.empty()) {
    g.fix_rule = fs.fix;
    g.fix_library = fs.fix_library;
  }
  for (const auto& x : fs.errnos)
    if (std::find(g.errnos.begin(), g.errnos.end(), x) == g.errnos.end()) g.errnos.push_back(x);
  g.fix_tally.Take(fs.fix_tally);
  r.fix_tally.Take(fs.fix_tally);
  n.fixed_forks = SatAdd(n.fixed_forks, fs.fix_tally.forks);
  if (fs.has_init) {
    if (fs.min_age_ms >= 0) {
      g.min_age_ms = g.min_age_ms < 0 ? fs.min_age_ms : std::min(g.min_age_ms, fs.min_age_ms);
      g.max_age_ms = std::max(g.max_age_ms, fs.max_age_ms);
    }
    if (g.init_call.empty()) {
      g.init_call = fs.init_call;
      g.init_device = fs.init_device;
      g.init_stack = pl.StackAt(fs.init_stack);
    }
  }
  g.Take(fs.max_ranges, fs.max_range_bytes, fs.dontfork_ranges, fs.max_threads, fs.kernel_cof);
  int64_t stopped = 0;
  for (const char* a : {schema::kActionFailed, schema::kActionAborted, schema::kActionRefused})
    if (auto it = fs.actions.find(a); it != fs.actions.end()) stopped += it->second;
  g.children_forked += static_cast<int>(fs.count - stopped);
  gathered->site_keys[i].push_back(std::move(key));
}

// An RDMA init of process i into the job's site for it.
void AddInit(const RdmaInit& init, int i, const ProcessNode& n, const ProcessLog& pl,
             Gathered* gathered) {
  const Stack& st = pl.StackAt(init.stack);
  InitSite& s = gathered->inits[n.job + "|" + init.call + "|" + init.device + "|" + StackKey(st)];
  if (s.count == 0) {
    s.job = n.job;
    s.call = init.call;
    s.device = init.device;
    s.stack = st;
  }
  ++s.count;
  s.processes.insert(i);
  if (n.rank) s.ranks.insert(*n.rank);
}

// A process's other events: its start and exit, RDMA init sites, spawns, its exec or death
// as a forked child, the shim's notes.
void AddEvents(JobReport* report, int i, const ProcessLog& pl, Gathered* gathered) {
  JobReport& r = *report;
  ProcessNode& n = r.processes[i];
  for (const Event& e : pl.events) {
    if (const auto* start = e.As<ProcessStart>()) {
      n.exe = start->exe;
      n.mode = start->mode;
      n.argv = start->argv;
    } else if (const auto* exit = e.As<ProcessExit>()) {
      n.exited = true;
      if (exit->status) n.exit_status = exit->status;
    } else if (const auto* init = e.As<RdmaInit>()) {
      n.rdma_initialized = true;
      AddInit(*init, i, n, pl, gathered);
    } else if (e.As<Spawn>()) {
      ++r.spawns;
    } else if (e.As<ChildExec>()) {
      n.exec_after_fork = true;
    } else if (const auto* segv = e.As<ChildSegv>()) {
      n.died_segv = true;
      gathered->deaths.push_back({.process = i,
                                  .parent = n.parent,
                                  .signal = segv->signal,
                                  .addr = segv->addr,
                                  .range_addr = segv->range_addr,
                                  .range_len = segv->range_len,
                                  .call = segv->call,
                                  .reg_stack = pl.StackAt(segv->reg_stack)});
    } else if (const auto* note = e.As<NoteRecord>()) {
      if (!note->text.empty() && gathered->shim_notes.size() < 50)
        gathered->shim_notes.insert(n.prog + ": " + note->text);
    }
  }
}

Gathered GatherProcesses(JobReport* report, const std::vector<const ProcessLog*>& order) {
  JobReport& r = *report;
  Gathered gathered;
  gathered.site_keys.resize(r.processes.size());
  for (int i = 0; i < static_cast<int>(order.size()); ++i) {
    ProcessNode& n = r.processes[i];
    const ProcessLog& pl = *order[i];
    n.forks = static_cast<int>(pl.forks);
    n.first_fork_ns = pl.first_fork_ns;
    n.last_fork_ns = pl.last_fork_ns;
    n.fork_children = pl.fork_children;
    n.forks_listed = static_cast<int>(pl.fork_sample.size());
    r.forks += pl.forks;
    r.fork_children += pl.fork_children;
    for (const ForkSite& fs : pl.fork_sites) AddForkSite(&r, i, pl, fs, &gathered);
    AddEvents(&r, i, pl, &gathered);
  }
  return gathered;
}

// Where each group went in the report: hazard_groups or clean_groups and its index there
// (suppressed_groups apart).
struct GroupIndex {
  std::map<std::string, std::pair<bool, int>> index;  // key -> (hazard?, index)
  std::map<std::string, int> suppressed_index;

  ForkGroup* Find(JobReport& r, const std::string& key) const {
    if (auto s = suppressed_index.find(key); s != suppressed_index.end())
      return &r.suppressed_groups[s->second];
    auto it = index.find(key);
    if (it == index.end()) return nullptr;
    auto& v = it->second.first ? r.hazard_groups : r.clean_groups;
    return &v[it->second.second];
  }
};

// Groups in report order: most forks first.
GroupIndex PlaceGroups(JobReport* report, std::map<std::string, ForkGroup> groups) {
  JobReport& r = *report;
  std::vector<ForkGroup> all;
  for (auto& [k, g] : groups) all.push_back(std::move(g));
  std::stable_sort(all.begin(), all.end(), [](const ForkGroup& a, const ForkGroup& b) {
    if (a.count != b.count) return a.count > b.count;
    return a.key < b.key;
  });
  GroupIndex placed;
  for (auto& g : all) {
    if (g.verdict == kVerdictSuppressed) {
      placed.suppressed_index[g.key] = static_cast<int>(r.suppressed_groups.size());
      r.suppressed_groups.push_back(std::move(g));
      continue;
    }
    bool hazard = g.verdict == schema::kVerdictHazard;
    auto& v = hazard ? r.hazard_groups : r.clean_groups;
    placed.index[g.key] = {hazard, static_cast<int>(v.size())};
    v.push_back(std::move(g));
  }
  return placed;
}

// Which fork made each child: the fork_child line naming its pid (kept for every child
// with a log), else the parent's latest listed fork without a child before the child's
// first event. Counts the children that died or exec'd into their group.
std::vector<MadeBy> FindMadeBy(JobReport* report, const std::vector<const ProcessLog*>& order,
                               const std::vector<std::vector<std::string>>& site_keys,
                               const GroupIndex& placed) {
  JobReport& r = *report;
  std::vector<std::map<int64_t, int>> by_child(r.processes.size());  // child pid -> site
  for (size_t i = 0; i < order.size(); ++i)
    for (const ChildLink& l : order[i]->child_links) by_child[i].emplace(l.child_pid, l.site);
  std::vector<MadeBy> made_by(r.processes.size());
  for (int c = 0; c < static_cast<int>(r.processes.size()); ++c) {
    const ProcessNode& child = r.processes[c];
    if (child.parent < 0) continue;
    const ProcessLog& parent = *order[child.parent];
    int site = -1;
    if (auto it = by_child[child.parent].find(child.pid); it != by_child[child.parent].end()) {
      site = it->second;
    } else {
      for (const ForkSample& f : parent.fork_sample)
        if (f.child_pid < 0 && (!child.start_ns || f.ts_ns <= child.start_ns)) site = f.site;
    }
    if (site < 0 || site >= static_cast<int>(site_keys[child.parent].size())) continue;
    made_by[c].group_key = &site_keys[child.parent][site];
    if (ForkGroup* g = placed.Find(r, *made_by[c].group_key)) {
      if (child.died_segv) ++g->children_segv;
      if (child.exec_after_fork) ++g->children_exec;
    }
  }
  return made_by;
}

// Every listed fork (ProcessLog's sample) with its verdict and group.
void ListForks(JobReport* report, const std::vector<const ProcessLog*>& order,
               const std::vector<std::vector<std::string>>& site_keys, const GroupIndex& placed) {
  JobReport& r = *report;
  for (size_t i = 0; i < order.size(); ++i) {
    for (const ForkSample& s : order[i]->fork_sample) {
      ForkEntry f;
      f.process = static_cast<int>(i);
      f.ts_ns = s.ts_ns;
      const std::string& key = site_keys[i][static_cast<size_t>(s.site)];
      f.verdict = key.substr(0, key.find('|'));
      f.action = s.action;
      f.child_pid = s.child_pid;
      f.reasons = s.reasons;
      f.tid = s.tid;
      f.line = s.line;
      if (auto it = placed.index.find(key); it != placed.index.end()) {
        f.hazard = it->second.first;
        f.group = it->second.second;
      }
      r.fork_list.push_back(std::move(f));
    }
  }
}

// summary.jobs: one entry per job id (processes without one under "").
void SummarizeJobs(JobReport* report) {
  JobReport& r = *report;
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
}

void SymbolizeStacks(JobReport* report, Symbolizer* symbolizer) {
  JobReport& r = *report;
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

}  // namespace

JobReport BuildJobReport(const LogSet& logs, Symbolizer* symbolizer) {
  JobReport r;
  r.notes = logs.notes;
  r.files_read = logs.files_read;
  r.lines_used = logs.lines_used;
  r.lines_skipped = logs.lines_skipped;

  std::vector<const ProcessLog*> order = StableOrder(logs);
  AddProcesses(&r, order);
  LinkParents(&r);
  Gathered gathered = GatherProcesses(&r, order);

  GroupIndex placed = PlaceGroups(&r, std::move(gathered.groups));
  std::vector<MadeBy> made_by = FindMadeBy(&r, order, gathered.site_keys, placed);
  ListForks(&r, order, gathered.site_keys, placed);
  for (auto& d : gathered.deaths) {
    if (const std::string* key = made_by[d.process].group_key) {
      auto it = placed.index.find(*key);
      if (it != placed.index.end() && it->second.first) d.group = it->second.second;
    }
  }
  r.deaths = std::move(gathered.deaths);

  for (auto& [k, s] : gathered.inits) r.inits.push_back(std::move(s));
  std::stable_sort(r.inits.begin(), r.inits.end(),
                   [](const InitSite& a, const InitSite& b) { return a.count > b.count; });
  r.shim_notes.assign(gathered.shim_notes.begin(), gathered.shim_notes.end());

  SummarizeJobs(&r);
  if (symbolizer) SymbolizeStacks(&r, symbolizer);
  return r;
}

}  // namespace forkguard::cli
