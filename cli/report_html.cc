#include "cli/report_html.h"

#include <cinttypes>
#include <cstdio>
#include <map>

#include "cli/format.h"
#include "cli/json.h"
#include "cli/report_json.h"
#include "cli/report_phrases.h"
#include "cli/stack_view.h"

namespace forkguard::cli {
namespace {

// The page, with /*FORKGUARD_DATA*/ where the data goes (generated from
// cli/report_html_page.html by the report_html_page genrule).
constexpr char kPage[] =
#include "cli/report_html_page.inc"
    ;

Json Lines(const std::vector<std::string>& lines) {
  Json a = Json::array();
  for (const auto& l : lines) a.emplace_back(l);
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

// The page's summary numbers, its summary line, the time span and the hosts (host_index:
// each host's place in `hosts`, which the process rows name).
Json HeadData(const JobReport& r, const Timeline& t, std::map<std::string, int>* host_index) {
  Json d = Json::object();
  // The same numbers as the JSON report's summary (the browser test compares them).
  Json s = Json::object();
  s["processes"] = static_cast<int64_t>(r.processes.size());
  s["hosts"] = static_cast<int64_t>(r.hosts.size());
  s["ranks"] = static_cast<int64_t>(r.ranks.size());
  AddForkCounts(r, s);
  s["notes"] = static_cast<int64_t>(r.notes.size());
  d["summary"] = std::move(s);
  d["summary_line"] = SummaryLine(r);
  d["span_us"] = (t.t1_ns - t.t0_ns) / 1000;

  Json hosts = Json::array();
  for (const auto& h : r.hosts) {
    host_index->emplace(h, static_cast<int>(host_index->size()));
    hosts.emplace_back(h);
  }
  d["hosts"] = std::move(hosts);
  return d;
}

Json ProcessRow(const ProcessNode& p, const ProcessTimeline& pt, const Timeline& t, int host) {
  Json row = Json::array();
  row.emplace_back(host);
  row.emplace_back(p.pid);
  row.emplace_back(p.ppid);
  row.emplace_back(p.parent);
  row.emplace_back(p.prog);
  row.push_back(p.rank ? Json(*p.rank) : Json());
  row.emplace_back(RelUs(t, pt.begin_ns));
  row.emplace_back(RelUs(t, pt.end_ns));
  row.emplace_back(pt.ending);
  row.emplace_back(p.forks);
  row.emplace_back(p.hazard_forks);
  row.emplace_back(pt.registrations);
  row.emplace_back(pt.registered_bytes);
  row.emplace_back(p.rdma_initialized);
  return row;
}

// One mark of a process's row; false for the marks the page does not draw (exit and
// deregistration: the lifetime line ends there).
bool MarkData(const TimelineMark& m, const Timeline& t, Json* out) {
  Json& x = *out;
  int64_t us = RelUs(t, m.ts_ns);
  switch (m.kind) {
    case TimelineMark::Kind::kRdmaInit:
      x.emplace_back("i");
      x.emplace_back(us);
      x.emplace_back(m.call);
      x.emplace_back(m.device);
      break;
    case TimelineMark::Kind::kRegister:
      x.emplace_back("r");
      x.emplace_back(us);
      x.emplace_back(m.bytes);
      break;
    case TimelineMark::Kind::kFork: {
      bool hazard = m.verdict == schema::kVerdictHazard;
      bool stopped = m.action == schema::kActionFailed || m.action == schema::kActionAborted ||
                     m.action == schema::kActionRefused;
      // A hazardous fork fix mode made safe: neither stopped nor left to do harm.
      bool fixed = m.action == schema::kActionFixed;
      x.emplace_back(!hazard ? "c" : stopped ? "x" : fixed ? "f" : "h");
      x.emplace_back(us);
      x.emplace_back(m.child);
      x.emplace_back(m.site_id);
      std::string reasons;
      for (const auto& rs : m.reasons) reasons += (reasons.empty() ? "" : ", ") + rs;
      x.emplace_back(reasons);
      break;
    }
    case TimelineMark::Kind::kSpawn:
      x.emplace_back("s");
      x.emplace_back(us);
      x.emplace_back(m.call);
      break;
    case TimelineMark::Kind::kExec:
      x.emplace_back("e");
      x.emplace_back(us);
      x.emplace_back(m.call);
      break;
    case TimelineMark::Kind::kSegv:
      x.emplace_back("v");
      x.emplace_back(us);
      break;
    case TimelineMark::Kind::kExit:
    case TimelineMark::Kind::kDeregister:
      return false;
  }
  return true;
}

// The rows of the processes (P) and their marks (M) and fork bins (B); M and B as text.
struct ProcessData {
  Json rows = Json::array();
  std::string marks;
  std::string bins;
};

// One compact row per process and its marks (see the page's script for the layout).
// M is written process by process into `marks` (the largest part: never one tree).
// B: for a process whose forks are not all listed, every fork counted in time bins:
// "index": [t0_us, width_us, [forks per bin], [hazardous per bin]] (only the listed forks
// are marks; absent for small jobs, whose every fork is a mark).
ProcessData ProcessesData(const JobReport& r, const Timeline& t,
                          std::map<std::string, int>* host_index) {
  ProcessData out;
  std::string& marks = out.marks;
  std::string& bins = out.bins;
  marks = "[";
  for (size_t i = 0; i < r.processes.size(); ++i) {
    const ProcessNode& p = r.processes[i];
    const ProcessTimeline& pt = t.processes[i];
    out.rows.push_back(ProcessRow(p, pt, t, (*host_index)[p.host]));

    Json ms = Json::array();
    for (const TimelineMark& m : pt.marks) {
      Json x = Json::array();
      if (MarkData(m, t, &x)) ms.push_back(std::move(x));
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
  marks += ']';
  if (!bins.empty()) bins += "}";
  return out;
}

Json FindingData(const ForkGroup& g, int id) {
  Json f = Json::object();
  f["id"] = id;
  f["heading"] = SiteHeading(g.stack);
  f["count"] = g.count;
  f["where"] = Where(g.processes.size(), g.ranks, g.hosts);
  Json reasons = Json::array();
  for (const auto& [reason, n] : g.reasons) {
    Json x = Json::array();
    x.emplace_back(reason);
    x.emplace_back(n);
    x.emplace_back(ExplainReason(reason));
    reasons.push_back(std::move(x));
  }
  f["reasons"] = std::move(reasons);
  f["fork"] = Lines(StackLines(g.stack, false));
  f["fork_native"] = Lines(StackLines(g.stack, true));
  if (!g.init_call.empty()) {
    f["init"] = InitPhrase(g);
    f["init_stack"] = Lines(StackLines(g.init_stack, false));
    f["init_native"] = Lines(StackLines(g.init_stack, true));
  }
  if (g.max_ranges > 0 || g.max_threads > 0 || g.kernel_cof) f["at_fork"] = RangesPhrase(g);
  f["actions"] = ActionsPhrase(g);
  f["children"] = ChildrenPhrase(g);
  if (!g.fix_tally.empty()) f["made_safe"] = FixPhrase(g.fix_tally);
  f["fix"] = FixFor(g);
  return f;
}

Json InitsData(const JobReport& r) {
  Json inits = Json::array();
  for (const auto& in : r.inits) {
    Json x = Json::object();
    std::string where = PythonInitSite(in.stack);
    x["heading"] = (where.empty() ? "" : where + ": ") + in.call +
                   (in.device.empty() ? "" : " on " + in.device) + " ×" + std::to_string(in.count);
    x["where"] = Where(in.processes.size(), in.ranks, {});
    x["stack"] = Lines(StackLines(in.stack, false));
    x["native"] = Lines(StackLines(in.stack, true));
    inits.push_back(std::move(x));
  }
  return inits;
}

Json DeathsData(const JobReport& r) {
  Json deaths = Json::array();
  for (const auto& dd : r.deaths) {
    const ProcessNode& p = r.processes[dd.process];
    std::string l = p.host + " pid " + std::to_string(p.pid);
    if (p.rank) l += " (rank " + std::to_string(*p.rank) + ")";
    l += ": " + (dd.signal == 11 ? std::string("SIGSEGV") : "signal " + std::to_string(dd.signal));
    if (dd.addr) l += " at " + Hex(*dd.addr);
    if (dd.range_addr) l += " in the range registered at " + Hex(*dd.range_addr);
    if (!dd.call.empty()) l += " by " + dd.call;
    if (dd.group >= 0) l += " [finding #" + std::to_string(dd.group + 1) + "]";
    deaths.emplace_back(l);
  }
  return deaths;
}

// [heading, why lines, RDMA state] per process that ran without the shim.
Json UnwatchedData(const JobReport& r) {
  Json unwatched = Json::array();
  for (const UnwatchedProcess& u : r.unwatched) {
    Json x = Json::array();
    x.emplace_back("pid " + std::to_string(u.pid) + " " + u.prog + " (" + u.path + ") on " +
                   u.host + ", parent " + std::to_string(u.ppid) +
                   (u.exec_by.empty() ? "" : ", exec'd by " + u.exec_by));
    Json why = Json::array();
    for (const std::string& w : u.why) why.emplace_back(UnwatchedWhy(w));
    x.push_back(std::move(why));
    x.emplace_back("RDMA state when it exec'd: " + UnwatchedRdmaState(u));
    unwatched.push_back(std::move(x));
  }
  return unwatched;
}

// The members after M and B: the findings, clean sites, RDMA init sites, deaths, notes and
// the processes that ran without the shim.
Json SitesData(const JobReport& r) {
  Json rest = Json::object();
  Json findings = Json::array();
  int id = 0;
  for (const auto& g : r.hazard_groups) findings.push_back(FindingData(g, ++id));
  rest["findings"] = std::move(findings);

  Json clean = Json::array();
  for (const auto& g : r.clean_groups) {
    Json c = Json::object();
    c["id"] = ++id;
    c["heading"] = SiteHeading(g.stack);
    c["count"] = g.count;
    c["where"] = Where(g.processes.size(), g.ranks, g.hosts);
    clean.push_back(std::move(c));
  }
  rest["clean"] = std::move(clean);
  rest["inits"] = InitsData(r);
  rest["deaths"] = DeathsData(r);

  Json notes = Json::array();
  for (const auto& n : r.notes) {
    Json x = Json::array();
    x.emplace_back(n.where);
    x.emplace_back(n.text);
    notes.push_back(std::move(x));
  }
  rest["notes"] = std::move(notes);
  rest["shim_notes"] = Lines(r.shim_notes);
  rest["unwatched"] = UnwatchedData(r);
  return rest;
}

}  // namespace

std::string RenderHtml(const JobReport& r, const Timeline& t) {
  std::map<std::string, int> host_index;
  Json d = HeadData(r, t, &host_index);
  ProcessData pd = ProcessesData(r, t, &host_index);
  d["P"] = std::move(pd.rows);
  // M and B (text already) are written between d and the members after them: spliced by
  // position, never by finding a placeholder that a name in the data could equal.
  Json rest = SitesData(r);

  // Inside <script> the text must never contain "</script" or "<!--": '<' only
  // occurs inside JSON strings, where \u003c means the same.
  std::string json = WriteJson(d, -1), data;
  json.pop_back();  // d's closing '}'
  json += ",\"M\":" + pd.marks;
  pd.marks = std::string();
  if (!pd.bins.empty()) {
    json += ",\"B\":" + pd.bins + ",\"forks_listed\":" + std::to_string(r.fork_list.size());
    pd.bins = std::string();
  }
  json += "," + WriteJson(rest, -1).substr(1);  // rest's members and the closing '}'
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
