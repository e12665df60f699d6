#include "cli/report_html.h"

#include <cinttypes>
#include <cstdio>
#include <map>

#include "cli/format.h"
#include "cli/json.h"
#include "cli/report_render.h"
#include "cli/stack_view.h"

namespace forkguard::cli {
namespace {

// The page, with /*FORKGUARD_DATA*/ where the data goes (generated from
// cli/report_html_page.html by the report_html_page genrule).
constexpr char kPage[] =
#include "cli/report_html_page.inc"
    ;

JsonValue Str(const std::string& s) { return JsonValue::String(s); }
JsonValue Int(int64_t i) { return JsonValue::Int(i); }

JsonValue Lines(const std::vector<std::string>& lines) {
  JsonValue a = JsonValue::Array();
  for (const auto& l : lines) a.Push(Str(l));
  return a;
}

std::string Where(size_t processes, const std::set<int64_t>& ranks,
                  const std::set<std::string>& hosts) {
  std::string s = "in " + Plural(static_cast<int64_t>(processes), "process", "processes");
  if (!ranks.empty()) s += ", " + FormatRanks(ranks);
  if (hosts.size() == 1)
    s += ", host " + *hosts.begin();
  else if (!hosts.empty())
    s += ", " + std::to_string(hosts.size()) + " hosts";
  return s;
}

int64_t RelUs(const Timeline& t, int64_t ns) { return ns > 0 ? (ns - t.t0_ns) / 1000 : 0; }

}  // namespace

std::string RenderHtml(const JobReport& r, const Timeline& t) {
  JsonValue d = JsonValue::Object();
  // The same numbers as the JSON report's summary (the browser test compares them).
  JsonValue s = JsonValue::Object();
  s.Set("processes", Int(static_cast<int64_t>(r.processes.size())));
  s.Set("hosts", Int(static_cast<int64_t>(r.hosts.size())));
  s.Set("ranks", Int(static_cast<int64_t>(r.ranks.size())));
  s.Set("forks", Int(r.forks));
  s.Set("hazard_forks", Int(r.hazard_forks));
  s.Set("clean_forks", Int(r.forks - r.hazard_forks - r.suppressed_forks));
  s.Set("hazard_sites", Int(static_cast<int64_t>(r.hazard_groups.size())));
  s.Set("spawns", Int(r.spawns));
  s.Set("children_segv", Int(static_cast<int64_t>(r.deaths.size())));
  s.Set("notes", Int(static_cast<int64_t>(r.notes.size())));
  d.Set("summary", std::move(s));
  d.Set("summary_line", Str(SummaryLine(r)));
  d.Set("span_us", Int((t.t1_ns - t.t0_ns) / 1000));

  std::map<std::string, int> host_index;
  JsonValue hosts = JsonValue::Array();
  for (const auto& h : r.hosts) {
    host_index.emplace(h, static_cast<int>(host_index.size()));
    hosts.Push(Str(h));
  }
  d.Set("hosts", std::move(hosts));

  // One compact row per process and its marks (see the page's script for the layout).
  // M is written process by process into `marks` (the largest part: never one tree).
  JsonValue procs = JsonValue::Array();
  std::string marks = "[";
  // B: for a process whose forks are not all listed, every fork counted in time bins:
  // "index": [t0_us, width_us, [forks per bin], [hazardous per bin]] (only the listed forks
  // are marks; absent for small jobs, whose every fork is a mark).
  std::string bins;  // written as text, like M
  for (size_t i = 0; i < r.processes.size(); ++i) {
    const ProcessNode& p = r.processes[i];
    const ProcessTimeline& pt = t.processes[i];
    JsonValue row = JsonValue::Array();
    row.Push(Int(host_index[p.host]));
    row.Push(Int(p.pid));
    row.Push(Int(p.ppid));
    row.Push(Int(p.parent));
    row.Push(Str(p.prog));
    row.Push(p.rank ? Int(*p.rank) : JsonValue());
    row.Push(Int(RelUs(t, pt.begin_ns)));
    row.Push(Int(RelUs(t, pt.end_ns)));
    row.Push(Str(pt.ending));
    row.Push(Int(p.forks));
    row.Push(Int(p.hazard_forks));
    row.Push(Int(pt.registrations));
    row.Push(Int(pt.registered_bytes));
    row.Push(JsonValue::Bool(p.rdma_initialized));
    procs.Push(std::move(row));

    JsonValue ms = JsonValue::Array();
    for (const TimelineMark& m : pt.marks) {
      JsonValue x = JsonValue::Array();
      int64_t us = RelUs(t, m.ts_ns);
      switch (m.kind) {
        case TimelineMark::Kind::kRdmaInit:
          x.Push(Str("i"));
          x.Push(Int(us));
          x.Push(Str(m.call));
          x.Push(Str(m.device));
          break;
        case TimelineMark::Kind::kRegister:
          x.Push(Str("r"));
          x.Push(Int(us));
          x.Push(Int(m.bytes));
          break;
        case TimelineMark::Kind::kFork: {
          bool hazard = m.verdict == "hazard";
          bool stopped = m.action == "failed" || m.action == "aborted";
          x.Push(Str(!hazard ? "c" : stopped ? "x" : "h"));
          x.Push(Int(us));
          x.Push(Int(m.child));
          x.Push(Int(m.site_id));
          std::string reasons;
          for (const auto& rs : m.reasons) reasons += (reasons.empty() ? "" : ", ") + rs;
          x.Push(Str(reasons));
          break;
        }
        case TimelineMark::Kind::kSpawn:
          x.Push(Str("s"));
          x.Push(Int(us));
          x.Push(Str(m.call));
          break;
        case TimelineMark::Kind::kExec:
          x.Push(Str("e"));
          x.Push(Int(us));
          x.Push(Str(m.call));
          break;
        case TimelineMark::Kind::kSegv:
          x.Push(Str("v"));
          x.Push(Int(us));
          break;
        case TimelineMark::Kind::kExit:
        case TimelineMark::Kind::kDeregister:
          continue;  // the lifetime line ends there
      }
      ms.Push(std::move(x));
    }
    if (i) marks += ',';
    marks += WriteJson(ms, -1);
    if (pt.forks_listed < pt.forks && !pt.bin_forks.empty()) {
      bins += (bins.empty() ? "{\"" : ",\"") + std::to_string(i) + "\":[" +
              std::to_string(RelUs(t, pt.bins_t0_ns)) + "," +
              std::to_string(std::max<int64_t>(1, pt.bin_width_ns / 1000));
      for (const auto* v : {&pt.bin_forks, &pt.bin_hazard}) {
        bins += ",[";
        for (size_t k = 0; k < v->size(); ++k) bins += (k ? "," : "") + std::to_string((*v)[k]);
        bins += "]";
      }
      bins += "]";
    }
  }
  d.Set("P", std::move(procs));
  const char kMarksMarker[] = "\x01forkguard: the marks\x02";
  marks += ']';
  d.Set("M", Str(kMarksMarker));
  const char kBinsMarker[] = "\x01forkguard: the bins\x02";
  if (!bins.empty()) {
    bins += "}";
    d.Set("B", Str(kBinsMarker));
    d.Set("forks_listed", Int(static_cast<int64_t>(r.fork_list.size())));
  }

  JsonValue findings = JsonValue::Array();
  int id = 0;
  for (const auto& g : r.hazard_groups) {
    JsonValue f = JsonValue::Object();
    f.Set("id", Int(++id));
    f.Set("heading", Str(SiteHeading(g.stack)));
    f.Set("count", Int(g.count));
    f.Set("where", Str(Where(g.processes.size(), g.ranks, g.hosts)));
    JsonValue reasons = JsonValue::Array();
    for (const auto& [reason, n] : g.reasons) {
      JsonValue x = JsonValue::Array();
      x.Push(Str(reason));
      x.Push(Int(n));
      x.Push(Str(ExplainReason(reason)));
      reasons.Push(std::move(x));
    }
    f.Set("reasons", std::move(reasons));
    f.Set("fork", Lines(StackLines(g.stack, false)));
    f.Set("fork_native", Lines(StackLines(g.stack, true)));
    if (!g.init_call.empty()) {
      f.Set("init", Str(InitPhrase(g)));
      f.Set("init_stack", Lines(StackLines(g.init_stack, false)));
      f.Set("init_native", Lines(StackLines(g.init_stack, true)));
    }
    if (g.max_ranges > 0 || g.max_threads > 0 || g.kernel_cof)
      f.Set("at_fork", Str(RangesPhrase(g)));
    f.Set("actions", Str(ActionsPhrase(g)));
    f.Set("children", Str(ChildrenPhrase(g)));
    f.Set("fix", Str(FixFor(g)));
    findings.Push(std::move(f));
  }
  d.Set("findings", std::move(findings));

  JsonValue clean = JsonValue::Array();
  for (const auto& g : r.clean_groups) {
    JsonValue c = JsonValue::Object();
    c.Set("id", Int(++id));
    c.Set("heading", Str(SiteHeading(g.stack)));
    c.Set("count", Int(g.count));
    c.Set("where", Str(Where(g.processes.size(), g.ranks, g.hosts)));
    clean.Push(std::move(c));
  }
  d.Set("clean", std::move(clean));

  JsonValue inits = JsonValue::Array();
  for (const auto& in : r.inits) {
    JsonValue x = JsonValue::Object();
    std::string where = PythonInitSite(in.stack);
    x.Set("heading",
          Str((where.empty() ? "" : where + ": ") + in.call +
              (in.device.empty() ? "" : " on " + in.device) + " ×" + std::to_string(in.count)));
    x.Set("where", Str(Where(in.processes.size(), in.ranks, {})));
    x.Set("stack", Lines(StackLines(in.stack, false)));
    x.Set("native", Lines(StackLines(in.stack, true)));
    inits.Push(std::move(x));
  }
  d.Set("inits", std::move(inits));

  JsonValue deaths = JsonValue::Array();
  for (const auto& dd : r.deaths) {
    const ProcessNode& p = r.processes[dd.process];
    std::string l = p.host + " pid " + std::to_string(p.pid);
    if (p.rank) l += " (rank " + std::to_string(*p.rank) + ")";
    l += ": " + (dd.signal == 11 ? std::string("SIGSEGV") : "signal " + std::to_string(dd.signal));
    if (dd.addr) l += " at " + Hex(*dd.addr);
    if (dd.range_addr) l += " in the range registered at " + Hex(*dd.range_addr);
    if (!dd.call.empty()) l += " by " + dd.call;
    if (dd.group >= 0) l += " [finding #" + std::to_string(dd.group + 1) + "]";
    deaths.Push(Str(l));
  }
  d.Set("deaths", std::move(deaths));

  JsonValue notes = JsonValue::Array();
  for (const auto& n : r.notes) {
    JsonValue x = JsonValue::Array();
    x.Push(Str(n.where));
    x.Push(Str(n.text));
    notes.Push(std::move(x));
  }
  d.Set("notes", std::move(notes));
  d.Set("shim_notes", Lines(r.shim_notes));

  // [heading, why lines, RDMA state] per process that ran without the shim.
  JsonValue unwatched = JsonValue::Array();
  for (const UnwatchedProcess& u : r.unwatched) {
    JsonValue x = JsonValue::Array();
    x.Push(Str("pid " + std::to_string(u.pid) + " " + u.prog + " (" + u.path + ") on " + u.host +
               ", parent " + std::to_string(u.ppid) +
               (u.exec_by.empty() ? "" : ", exec'd by " + u.exec_by)));
    JsonValue why = JsonValue::Array();
    for (const std::string& w : u.why) why.Push(Str(UnwatchedWhy(w)));
    x.Push(std::move(why));
    x.Push(Str("RDMA state when it exec'd: " + UnwatchedRdmaState(u)));
    unwatched.Push(std::move(x));
  }
  d.Set("unwatched", std::move(unwatched));

  // Inside <script> the text must never contain "</script" or "<!--": '<' only
  // occurs inside JSON strings, where \u003c means the same.
  std::string json = WriteJson(d, -1), data;
  const std::string marker = JsonQuote(kMarksMarker);
  if (size_t at = json.find(marker); at != std::string::npos)
    json.replace(at, marker.size(), marks);
  marks = std::string();
  const std::string bins_marker = JsonQuote(kBinsMarker);
  if (size_t at = json.find(bins_marker); !bins.empty() && at != std::string::npos)
    json.replace(at, bins_marker.size(), bins);
  bins = std::string();
  data.reserve(json.size() + json.size() / 16);
  for (char c : json) {
    if (c == '<')
      data += "\\u003c";
    else
      data.push_back(c);
  }
  std::string page = kPage;
  const std::string data_marker = "/*FORKGUARD_DATA*/";
  size_t at = page.find(data_marker);
  if (at != std::string::npos) page.replace(at, data_marker.size(), data);
  return page;
}

}  // namespace forkguard::cli
