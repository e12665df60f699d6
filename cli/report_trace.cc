#include "cli/report_trace.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>

#include "cli/json.h"
#include "cli/report_json.h"
#include "cli/stack_view.h"

namespace forkguard::cli {
namespace {

// Trace timestamps are microseconds; ours are ns since the epoch. Relative to the
// job's first event (otherData.t0_ns has it) so that viewers start at 0.
Json Us(const Timeline& t, int64_t ns) { return Json(static_cast<double>(ns - t.t0_ns) / 1000.0); }

std::string ProcessName(const ProcessNode& p) {
  std::string s = p.prog.empty() ? "?" : p.prog;
  if (p.rank) s += " [rank " + std::to_string(*p.rank) + "]";
  s += " pid " + std::to_string(p.pid) + " @ " + p.host;
  return s;
}

Json Base(const char* ph, const char* name, int64_t pid, int64_t tid) {
  Json e = Json::object();
  e["ph"] = ph;
  e["name"] = name;
  e["pid"] = pid;
  e["tid"] = tid;
  return e;
}

// Each event is written out as it is made (through a small buffer): the trace is never
// whole in memory.
class TraceWriter {
 public:
  explicit TraceWriter(const TraceSink& sink) : sink_(sink) {}

  void Emit(const Json& e) {
    if (!first_) buf_ += ',';
    first_ = false;
    buf_ += WriteJson(e, -1);
    if (buf_.size() >= (1 << 16)) {
      sink_(buf_);
      buf_.clear();
    }
  }

  // A metadata event: args {key: v}.
  void Meta(const char* name, int64_t pid, int64_t tid, const char* key, Json v) {
    Json e = Base("M", name, pid, tid);
    Json a = Json::object();
    a[key] = std::move(v);
    e["args"] = std::move(a);
    Emit(e);
  }

  // The end of the events, otherData, and what is left to the sink.
  void Finish(const Json& other) {
    buf_ += "],\"displayTimeUnit\":\"ms\",\"otherData\":" + WriteJson(other, -1) + "}\n";
    sink_(buf_);
  }

 private:
  const TraceSink& sink_;
  std::string buf_ = "{\"traceEvents\":[";
  bool first_ = true;
};

// The process's lifetime: the slice the flow arrows bind to.
void EmitLifetime(TraceWriter& w, const ProcessNode& p, const ProcessTimeline& pt,
                  const Timeline& t, int64_t tp, int64_t tt, bool binned) {
  int64_t begin = pt.begin_ns ? pt.begin_ns : t.t0_ns;
  int64_t end = std::max(pt.end_ns, begin);
  Json life = Base("X", (p.prog.empty() ? "?" : p.prog).c_str(), tp, tt);
  life["cat"] = "process";
  life["ts"] = Us(t, begin);
  life["dur"] = std::max(1.0, static_cast<double>(end - begin) / 1000.0);
  Json la = Json::object();
  la["host"] = p.host;
  la["pid"] = p.pid;
  la["ppid"] = p.ppid;
  la["rank"] = p.rank ? Json(*p.rank) : Json();
  la["ending"] = pt.ending;
  la["forks"] = p.forks;
  la["hazard_forks"] = p.hazard_forks;
  if (pt.registrations) {
    la["registrations"] = pt.registrations;
    la["registered_bytes"] = pt.registered_bytes;
    // No exit record: the shim's counts since its last line may be lost.
    if (p.registrations_at_least) la["registrations_at_least"] = true;
  }
  if (binned) {
    la["forks_listed"] = pt.forks_listed;
    la["note"] = "only the first " + std::to_string(ProcessLog::kForkSampleHead) + " and last " +
                 std::to_string(ProcessLog::kForkSampleTail) +
                 " forks are events; every fork is counted in the \"forks\" counter";
  }
  life["args"] = std::move(la);
  w.Emit(life);
}

// Every fork of a process with more than are listed: a counter per time bin.
void EmitForkBins(TraceWriter& w, const ProcessTimeline& pt, const Timeline& t, int64_t tp,
                  int64_t tt) {
  for (size_t k = 0; k <= pt.bin_forks.size(); ++k) {
    Json c = Base("C", "forks", tp, tt);
    c["ts"] = Us(t, pt.bins_t0_ns + static_cast<int64_t>(k) * pt.bin_width_ns);
    Json a = Json::object();
    int64_t n = k < pt.bin_forks.size() ? pt.bin_forks[k] : 0;
    int64_t h = k < pt.bin_forks.size() ? pt.bin_hazard[k] : 0;
    a["hazard"] = h;
    a["clean"] = n - h;
    c["args"] = std::move(a);
    w.Emit(c);
  }
}

// A mark as an instant event: its name, category, colour and args.
struct InstantEvent {
  std::string name;
  const char* cat = "rdma";
  const char* color = nullptr;
  Json args = Json::object();
};

// False for the marks the trace leaves out (deregistrations).
bool MarkEvent(const JobReport& r, const TimelineMark& m, InstantEvent* out) {
  std::string& name = out->name;
  const char*& cat = out->cat;
  const char*& color = out->color;
  Json& a = out->args;
  if (m.tid) a["tid"] = m.tid;
  switch (m.kind) {
    case TimelineMark::Kind::kRdmaInit:
      name = "RDMA init: " + m.call;
      a["call"] = m.call;
      a["device"] = m.device.empty() ? Json() : Json(m.device);
      color = "rail_load";
      break;
    case TimelineMark::Kind::kRegister:
      name = "register " + std::to_string(m.bytes) + " B";
      a["call"] = m.call;
      a["bytes"] = m.bytes;
      a["dontfork"] = m.dontfork;
      color = "grey";
      break;
    case TimelineMark::Kind::kFork:
      // A hazardous fork fix mode made safe is not drawn as a harmful one.
      name = "fork (" + m.verdict + (m.action == schema::kActionFixed ? ", made safe" : "") + ")";
      cat = "fork";
      a["verdict"] = m.verdict;
      {
        Json rs = Json::array();
        for (const auto& x : m.reasons) rs.emplace_back(x);
        a["reasons"] = std::move(rs);
      }
      a["action"] = m.action;
      a["child_pid"] = m.child_pid > 0 ? Json(m.child_pid) : Json();
      a["site_id"] = m.site_id > 0 ? Json(m.site_id) : Json();
      if (m.site_id > 0) {
        const auto& g = m.site_id <= static_cast<int>(r.hazard_groups.size())
                            ? r.hazard_groups[m.site_id - 1]
                            : r.clean_groups[m.site_id - 1 - r.hazard_groups.size()];
        a["site"] = SiteHeading(g.stack);
      }
      color = m.verdict == schema::kVerdictHazard && m.action != schema::kActionFixed ? "terrible"
                                                                                      : "good";
      break;
    case TimelineMark::Kind::kSpawn:
      name = "spawn: " + m.call;
      cat = "fork";
      a["call"] = m.call;
      a["child_pid"] = m.child_pid > 0 ? Json(m.child_pid) : Json();
      break;
    case TimelineMark::Kind::kExec:
      name = "child exec";
      cat = "child";
      a["path"] = m.call;
      break;
    case TimelineMark::Kind::kSegv:
      name = "child death: SIGSEGV";
      cat = "child";
      a["signal"] = m.signal;
      color = "terrible";
      break;
    case TimelineMark::Kind::kExit:
      name = "exit";
      cat = "child";
      break;
    case TimelineMark::Kind::kDeregister:
      return false;
  }
  return true;
}

// Fork -> child: a flow from the parent's slice to the child's lifetime slice.
void EmitForkFlow(TraceWriter& w, const JobReport& r, const Timeline& t, const TimelineMark& m,
                  int64_t tp, int64_t tt, int64_t flow_id) {
  const ProcessNode& c = r.processes[m.child];
  int64_t cbegin = t.processes[m.child].begin_ns ? t.processes[m.child].begin_ns : m.ts_ns;
  Json s = Base("s", "fork", tp, tt);
  s["cat"] = "fork";
  s["id"] = flow_id;
  s["ts"] = Us(t, m.ts_ns);
  w.Emit(s);
  Json f = Base("f", "fork", m.child + 1, c.pid > 0 ? c.pid : 1);
  f["cat"] = "fork";
  f["id"] = flow_id;
  f["bp"] = "e";
  f["ts"] = Us(t, std::max(cbegin, m.ts_ns));
  w.Emit(f);
}

}  // namespace

void RenderTrace(const JobReport& r, const Timeline& t, const TraceSink& sink) {
  TraceWriter w(sink);
  // Trace pids must be unique over the job, real pids are only unique per host:
  // track i+1 is process i; the real pid is in the names and args.
  std::map<std::string, int> host_order;
  for (const auto& h : r.hosts) host_order.emplace(h, static_cast<int>(host_order.size()));
  int64_t flow_id = 0;
  for (int i = 0; i < static_cast<int>(r.processes.size()); ++i) {
    const ProcessNode& p = r.processes[i];
    const ProcessTimeline& pt = t.processes[i];
    const int64_t tp = i + 1, tt = p.pid > 0 ? p.pid : 1;
    w.Meta("process_name", tp, tt, "name", Json(ProcessName(p)));
    w.Meta("process_labels", tp, tt, "labels", Json("host " + p.host));
    // Hosts in order, then the JobReport's order (start time) within a host.
    w.Meta("process_sort_index", tp, tt, "sort_index",
           Json(static_cast<int64_t>(host_order[p.host]) * 1000000 + i));
    w.Meta("thread_name", tp, tt, "name", Json("pid " + std::to_string(p.pid)));

    const bool binned = pt.forks_listed < pt.forks && !pt.bin_forks.empty();
    EmitLifetime(w, p, pt, t, tp, tt, binned);
    if (binned) EmitForkBins(w, pt, t, tp, tt);

    for (const TimelineMark& m : pt.marks) {
      InstantEvent ie;
      if (!MarkEvent(r, m, &ie)) continue;
      Json e = Base("i", ie.name.c_str(), tp, tt);
      e["cat"] = ie.cat;
      e["s"] = "t";
      e["ts"] = Us(t, m.ts_ns);
      if (ie.color) e["cname"] = ie.color;
      e["args"] = std::move(ie.args);
      w.Emit(e);
      if (m.kind == TimelineMark::Kind::kFork && m.child >= 0)
        EmitForkFlow(w, r, t, m, tp, tt, ++flow_id);
    }
  }
  Json other = Json::object();
  other["generator"] = "forkguard report --format trace";
  other["report_schema"] = kReportSchema;
  other["t0_ns"] = t.t0_ns;
  other["processes"] = static_cast<int64_t>(r.processes.size());
  other["forks"] = r.forks;
  other["hazard_forks"] = r.hazard_forks;
  if (!r.fix_tally.empty()) other["fixed_forks"] = r.fix_tally.forks;
  w.Finish(other);
}

std::string RenderTrace(const JobReport& r, const Timeline& t) {
  std::string out;
  RenderTrace(r, t, [&](std::string_view s) { out += s; });
  return out;
}

}  // namespace forkguard::cli
