#include "cli/report_json.h"

#include <map>
#include <set>

#include "cli/format.h"
#include "cli/report_baseline.h"
#include "cli/report_phrases.h"
#include "cli/report_suppressions.h"

namespace forkguard::cli {

Json FixJson(const FixTally& f) {
  Json o = Json::object();
  o["forks"] = f.forks;
  auto part = [](int64_t ranges, int64_t bytes, unsigned mask) {
    Json x = Json::object();
    x["ranges"] = ranges;
    x["bytes"] = bytes;
    Json kinds = Json::array();
    for (const std::string& k : FixTally::KindNames(mask)) kinds.emplace_back(k);
    x["kinds"] = std::move(kinds);
    return x;
  };
  o["copied"] = part(f.copied_ranges, f.copied_bytes, f.copied_kinds);
  o["withheld"] = part(f.withheld_ranges, f.withheld_bytes, f.withheld_kinds);
  o["failed_ranges"] = f.failed_ranges;
  return o;
}

namespace {

Json StackJson(const Stack& s) {
  Json a = Json::array();
  for (const auto& f : s) {
    Json o = Json::object();
    if (f.python) {
      o["py_file"] = f.py_file;
      o["py_line"] = f.py_line;
      o["py_func"] = f.py_func;
    } else {
      if (f.ip) o["ip"] = Hex(f.ip);
      if (!f.obj.empty()) o["obj"] = f.obj;
      if (f.off) o["off"] = Hex(*f.off);
      if (!f.sym.empty()) o["sym"] = f.sym;
      if (!f.func.empty()) o["func"] = f.func;
      if (!f.src_file.empty()) {
        o["file"] = f.src_file;
        o["line"] = f.src_line;
      }
    }
    a.push_back(std::move(o));
  }
  return a;
}

Json CountMap(const std::map<std::string, int>& m) {
  Json o = Json::object();
  for (const auto& [k, n] : m) o[k] = n;
  return o;
}

Json RankArray(const std::set<int64_t>& ranks) {
  Json a = Json::array();
  for (int64_t x : ranks) a.emplace_back(x);
  return a;
}

// summary.jobs: one entry per job id in the logs (null: processes without one).
Json JobsJson(const JobReport& r) {
  Json a = Json::array();
  for (const JobSummary& j : r.jobs) {
    Json x = Json::object();
    x["job"] = j.job.empty() ? Json() : Json(j.job);
    x["processes"] = j.processes;
    Json hosts = Json::array();
    for (const auto& h : j.hosts) hosts.emplace_back(h);
    x["hosts"] = std::move(hosts);
    x["ranks"] = RankArray(j.ranks);
    x["ranks_text"] = FormatRanks(j.ranks);
    x["forks"] = j.forks;
    x["hazard_forks"] = j.hazard_forks;
    x["hazard_sites"] = j.hazard_sites;
    a.push_back(std::move(x));
  }
  return a;
}

Json GroupJson(const JobReport& r, const ForkGroup& g, int id) {
  Json o = Json::object();
  o["id"] = id;
  o["job"] = g.job.empty() ? Json() : Json(g.job);
  o["verdict"] = g.verdict;
  o["site"] = g.site;
  o["location"] = SiteLabel(g.stack);
  if (g.verdict == schema::kVerdictHazard) o["fix"] = FixFor(g);
  o["count"] = g.count;
  o["process_count"] = static_cast<int64_t>(g.processes.size());
  Json pids = Json::array();
  for (int p : g.processes) {
    Json x = Json::object();
    x["host"] = r.processes[p].host;
    x["pid"] = r.processes[p].pid;
    pids.push_back(std::move(x));
  }
  o["processes"] = std::move(pids);
  o["ranks"] = RankArray(g.ranks);
  Json hosts = Json::array();
  for (const auto& h : g.hosts) hosts.emplace_back(h);
  o["hosts"] = std::move(hosts);
  o["reasons"] = CountMap(g.reasons);
  o["actions"] = CountMap(g.actions);
  o["stack"] = StackJson(g.stack);
  if (g.verdict == schema::kVerdictHazard) {
    if (g.init_call.empty()) {
      o["init"] = Json();
    } else {
      Json init = Json::object();
      init["call"] = g.init_call;
      init["device"] = g.init_device.empty() ? Json() : Json(g.init_device);
      init["min_age_ms"] = g.min_age_ms >= 0 ? Json(g.min_age_ms) : Json();
      init["max_age_ms"] = g.max_age_ms >= 0 ? Json(g.max_age_ms) : Json();
      init["stack"] = StackJson(g.init_stack);
      o["init"] = std::move(init);
    }
    Json ranges = Json::object();
    ranges["count"] = g.max_ranges;
    ranges["bytes"] = g.max_range_bytes;
    ranges["dontfork"] = g.dontfork_ranges;
    o["ranges"] = std::move(ranges);
    o["kernel_cof"] = g.kernel_cof ? Json(*g.kernel_cof) : Json();
    o["max_threads"] = g.max_threads;
  }
  if (!g.fix_tally.empty()) o["made_safe"] = FixJson(g.fix_tally);
  Json ch = Json::object();
  ch["forked"] = g.children_forked;
  ch["segv"] = g.children_segv;
  ch["exec"] = g.children_exec;
  o["children"] = std::move(ch);
  return o;
}

// The value "forks" has in the tree when RenderJson writes that array itself.
constexpr char kForksMarker[] = "\x01forkguard: the forks array\x02";

Json ForkJson(const JobReport& r, const ForkEntry& f) {
  Json x = Json::object();
  x["host"] = r.processes[f.process].host;
  x["pid"] = r.processes[f.process].pid;
  x["ts_ns"] = f.ts_ns;
  x["verdict"] = f.verdict;
  x["action"] = f.action;
  x["child_pid"] = f.child_pid > 0 ? Json(f.child_pid) : Json();
  int id = f.group < 0 ? -1
           : f.hazard  ? f.group + 1
                       : static_cast<int>(r.hazard_groups.size()) + f.group + 1;
  x["site_id"] = id > 0 ? Json(id) : Json();
  return x;
}

Json SummaryJson(const JobReport& r) {
  Json s = Json::object();
  s["processes"] = static_cast<int64_t>(r.processes.size());
  Json hosts = Json::array();
  for (const auto& h : r.hosts) hosts.emplace_back(h);
  s["hosts"] = std::move(hosts);
  s["ranks"] = RankArray(r.ranks);
  AddForkCounts(r, s);
  if (!r.fix_tally.empty()) s["made_safe"] = FixJson(r.fix_tally);
  s["files_read"] = r.files_read;
  s["lines_used"] = r.lines_used;
  s["lines_skipped"] = r.lines_skipped;
  s["jobs"] = JobsJson(r);
  // Only when some process made more forks than are listed: says what `forks` holds.
  if (static_cast<int64_t>(r.fork_list.size()) < r.forks) {
    Json fs = Json::object();
    fs["listed"] = static_cast<int64_t>(r.fork_list.size());
    fs["first_per_process"] = static_cast<int64_t>(ProcessLog::kForkSampleHead);
    fs["last_per_process"] = static_cast<int64_t>(ProcessLog::kForkSampleTail);
    fs["fork_children"] = r.fork_children;
    s["forks_sampled"] = std::move(fs);
  }
  return s;
}

// One entry per RDMA init site.
Json InitsJson(const JobReport& r) {
  Json inits = Json::array();
  for (const auto& in : r.inits) {
    Json x = Json::object();
    x["job"] = in.job.empty() ? Json() : Json(in.job);
    x["call"] = in.call;
    x["device"] = in.device.empty() ? Json() : Json(in.device);
    x["count"] = in.count;
    x["process_count"] = static_cast<int64_t>(in.processes.size());
    x["ranks"] = RankArray(in.ranks);
    x["stack"] = StackJson(in.stack);
    inits.push_back(std::move(x));
  }
  return inits;
}

// The processes that ran without the shim: their forks are not in this report.
Json UnwatchedJson(const JobReport& r) {
  Json unwatched = Json::array();
  for (const UnwatchedProcess& u : r.unwatched) {
    Json x = Json::object();
    x["host"] = u.host;
    x["pid"] = u.pid;
    x["parent_pid"] = u.ppid >= 0 ? Json(u.ppid) : Json();
    x["program"] = u.prog;
    x["path"] = u.path;
    x["exec_by"] = u.exec_by.empty() ? Json() : Json(u.exec_by);
    Json why = Json::array();
    for (const std::string& w : u.why) why.emplace_back(w);
    x["why"] = std::move(why);
    x["held_rdma"] = u.held_rdma ? Json(*u.held_rdma) : Json();
    unwatched.push_back(std::move(x));
  }
  return unwatched;
}

Json DeathsJson(const JobReport& r) {
  Json deaths = Json::array();
  for (const auto& d : r.deaths) {
    Json x = Json::object();
    x["host"] = r.processes[d.process].host;
    x["pid"] = r.processes[d.process].pid;
    x["parent_pid"] = d.parent >= 0 ? Json(r.processes[d.parent].pid) : Json();
    x["signal"] = d.signal;
    x["addr"] = d.addr ? Json(Hex(*d.addr)) : Json();
    if (d.range_addr) {
      Json rg = Json::object();
      rg["addr"] = Hex(*d.range_addr);
      rg["len"] = d.range_len ? Json(static_cast<int64_t>(*d.range_len)) : Json();
      x["range"] = std::move(rg);
    } else {
      x["range"] = Json();
    }
    x["finding"] = d.group >= 0 ? Json(d.group + 1) : Json();
    x["call"] = d.call.empty() ? Json() : Json(d.call);
    x["reg_stack"] = StackJson(d.reg_stack);
    deaths.push_back(std::move(x));
  }
  return deaths;
}

Json ProcessJson(const JobReport& r, const ProcessNode& p) {
  Json x = Json::object();
  x["host"] = p.host;
  x["pid"] = p.pid;
  x["ppid"] = p.ppid;
  x["parent_pid"] = p.parent >= 0 ? Json(r.processes[p.parent].pid) : Json();
  x["prog"] = p.prog;
  x["rank"] = p.rank ? Json(*p.rank) : Json();
  x["local_rank"] = p.local_rank ? Json(*p.local_rank) : Json();
  x["job"] = p.job.empty() ? Json() : Json(p.job);
  x["start_ns"] = p.start_ns;
  x["forks"] = p.forks;
  x["hazard_forks"] = p.hazard_forks;
  if (p.fixed_forks)
    x["fixed_forks"] = p.fixed_forks;  // only then: older reports stay as they were
  x["rdma_initialized"] = p.rdma_initialized;
  x["killed_segv"] = p.died_segv;
  x["exec_after_fork"] = p.exec_after_fork;
  x["exit_status"] = p.exit_status ? Json(*p.exit_status) : Json();
  x["file"] = p.file;
  if (!p.execs.empty()) {  // one process, several programs (only then: older readers)
    Json ex = Json::array();
    for (const auto& e : p.execs) {
      Json y = Json::object();
      y["prog"] = e.prog;
      y["file"] = e.file;
      ex.push_back(std::move(y));
    }
    x["exec_from"] = std::move(ex);
  }
  if (p.forks_listed < p.forks) {  // only some of its forks are in `forks`
    Json fs = Json::object();
    fs["listed"] = p.forks_listed;
    fs["first_ns"] = p.first_fork_ns;
    fs["last_ns"] = p.last_fork_ns;
    fs["fork_children"] = p.fork_children;
    x["forks_sampled"] = std::move(fs);
  }
  return x;
}

Json NotesJson(const JobReport& r) {
  Json notes = Json::array();
  for (const auto& n : r.notes) {
    Json x = Json::object();
    x["where"] = n.where;
    x["text"] = n.text;
    notes.push_back(std::move(x));
  }
  return notes;
}

Json ReportToJsonImpl(const JobReport& r, bool forks_marker) {
  Json o = Json::object();
  o["schema"] = kReportSchema;
  o["summary"] = SummaryJson(r);

  Json findings = Json::array();
  int id = 0;
  for (const auto& g : r.hazard_groups) findings.push_back(GroupJson(r, g, ++id));
  o["findings"] = std::move(findings);
  Json clean = Json::array();
  for (const auto& g : r.clean_groups) clean.push_back(GroupJson(r, g, ++id));
  o["clean_sites"] = std::move(clean);
  if (!r.suppressed_groups.empty()) {
    Json sup = Json::array();
    for (const auto& g : r.suppressed_groups) sup.push_back(GroupJson(r, g, ++id));
    o["suppressed_sites"] = std::move(sup);
  }
  AddSuppressionsJson(r, &o);
  AddBaselineJson(r, &o);

  o["rdma_inits"] = InitsJson(r);
  o["unwatched"] = UnwatchedJson(r);

  // Every fork with its verdict (or, past ProcessLog's sample size, the first and last forks
  // of each process: summary.forks_sampled); `site_id` is the id of its finding or clean site.
  Json forks = Json::array();
  if (forks_marker)
    forks = Json(kForksMarker);
  else
    for (const auto& f : r.fork_list) forks.push_back(ForkJson(r, f));
  o["forks"] = std::move(forks);

  o["child_deaths"] = DeathsJson(r);

  Json procs = Json::array();
  for (const auto& p : r.processes) procs.push_back(ProcessJson(r, p));
  o["processes"] = std::move(procs);

  o["notes"] = NotesJson(r);
  Json sn = Json::array();
  for (const auto& n : r.shim_notes) sn.emplace_back(n);
  o["shim_notes"] = std::move(sn);
  return o;
}

}  // namespace

Json ReportToJson(const JobReport& r) { return ReportToJsonImpl(r, false); }

void AddForkCounts(const JobReport& r, Json& s) {
  s["forks"] = r.forks;
  s["hazard_forks"] = r.hazard_forks;
  s["clean_forks"] = r.forks - r.hazard_forks - r.suppressed_forks;
  s["hazard_sites"] = static_cast<int64_t>(r.hazard_groups.size());
  s["spawns"] = r.spawns;
  s["children_segv"] = static_cast<int64_t>(r.deaths.size());
  if (!r.fix_tally.empty()) s["fixed_forks"] = r.fix_tally.forks;
}

// The same text as WriteJson(ReportToJson(r)), but the forks array (the largest) is written
// item by item: memory holds one fork's tree at a time, not all of them.
std::string RenderJson(const JobReport& r) {
  std::string out = WriteJson(ReportToJsonImpl(r, true)) + "\n";
  std::string forks;
  if (r.fork_list.empty()) {
    forks = "[]";
  } else {
    forks = "[";
    for (size_t i = 0; i < r.fork_list.size(); ++i) {
      forks += i ? ",\n    " : "\n    ";
      for (char c : WriteJson(ForkJson(r, r.fork_list[i]))) {  // indented two levels in
        forks.push_back(c);
        if (c == '\n') forks += "    ";
      }
    }
    forks += "\n  ]";
  }
  // The top-level member: only it follows a line break and two spaces (data strings hold no
  // line break, nested members are indented further), whatever the strings before it hold.
  const std::string marker = "\n  \"forks\": " + JsonQuote(kForksMarker);
  size_t at = out.find(marker);
  if (at != std::string::npos) at += marker.size() - JsonQuote(kForksMarker).size();
  if (at != std::string::npos) out.replace(at, JsonQuote(kForksMarker).size(), forks);
  return out;
}

}  // namespace forkguard::cli
