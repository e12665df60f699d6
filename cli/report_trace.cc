#include "cli/report_trace.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>

#include "cli/json.h"
#include "cli/report_render.h"
#include "cli/stack_view.h"

namespace forkguard::cli {
namespace {

JsonValue Str(const std::string& s) { return JsonValue::String(s); }
JsonValue Int(int64_t i) { return JsonValue::Int(i); }

// Trace timestamps are microseconds; ours are ns since the epoch. Relative to the
// job's first event (otherData.t0_ns has it) so that viewers start at 0.
JsonValue Us(const Timeline& t, int64_t ns) {
  return JsonValue::Double(static_cast<double>(ns - t.t0_ns) / 1000.0);
}

std::string ProcessName(const ProcessNode& p) {
  std::string s = p.prog.empty() ? "?" : p.prog;
  if (p.rank) s += " [rank " + std::to_string(*p.rank) + "]";
  s += " pid " + std::to_string(p.pid) + " @ " + p.host;
  return s;
}

}  // namespace

void RenderTrace(const JobReport& r, const Timeline& t, const TraceSink& sink) {
  // Each event is written out as it is made (through a small buffer): the trace is never
  // whole in memory.
  std::string buf = "{\"traceEvents\":[";
  bool first = true;
  auto emit = [&](const JsonValue& e) {
    if (!first) buf += ',';
    first = false;
    buf += WriteJson(e, -1);
    if (buf.size() >= (1 << 16)) {
      sink(buf);
      buf.clear();
    }
  };
  // Trace pids must be unique over the job, real pids are only unique per host:
  // track i+1 is process i; the real pid is in the names and args.
  std::map<std::string, int> host_order;
  for (const auto& h : r.hosts) host_order.emplace(h, static_cast<int>(host_order.size()));
  auto base = [](const char* ph, const char* name, int64_t pid, int64_t tid) {
    JsonValue e = JsonValue::Object();
    e.Set("ph", Str(ph));
    e.Set("name", Str(name));
    e.Set("pid", Int(pid));
    e.Set("tid", Int(tid));
    return e;
  };
  auto meta = [&](const char* name, int64_t pid, int64_t tid, const char* key, JsonValue v) {
    JsonValue e = base("M", name, pid, tid);
    JsonValue a = JsonValue::Object();
    a.Set(key, std::move(v));
    e.Set("args", std::move(a));
    emit(e);
  };
  int64_t flow_id = 0;
  for (int i = 0; i < static_cast<int>(r.processes.size()); ++i) {
    const ProcessNode& p = r.processes[i];
    const ProcessTimeline& pt = t.processes[i];
    const int64_t tp = i + 1, tt = p.pid > 0 ? p.pid : 1;
    meta("process_name", tp, tt, "name", Str(ProcessName(p)));
    meta("process_labels", tp, tt, "labels", Str("host " + p.host));
    // Hosts in order, then the JobReport's order (start time) within a host.
    meta("process_sort_index", tp, tt, "sort_index",
         Int(static_cast<int64_t>(host_order[p.host]) * 1000000 + i));
    meta("thread_name", tp, tt, "name", Str("pid " + std::to_string(p.pid)));

    // The process's lifetime: the slice the flow arrows bind to.
    int64_t begin = pt.begin_ns ? pt.begin_ns : t.t0_ns;
    int64_t end = std::max(pt.end_ns, begin);
    JsonValue life = base("X", (p.prog.empty() ? "?" : p.prog).c_str(), tp, tt);
    life.Set("cat", Str("process"));
    life.Set("ts", Us(t, begin));
    life.Set("dur", JsonValue::Double(std::max(1.0, static_cast<double>(end - begin) / 1000.0)));
    JsonValue la = JsonValue::Object();
    la.Set("host", Str(p.host));
    la.Set("pid", Int(p.pid));
    la.Set("ppid", Int(p.ppid));
    la.Set("rank", p.rank ? Int(*p.rank) : JsonValue());
    la.Set("ending", Str(pt.ending));
    la.Set("forks", Int(p.forks));
    la.Set("hazard_forks", Int(p.hazard_forks));
    if (pt.registrations) {
      la.Set("registrations", Int(pt.registrations));
      la.Set("registered_bytes", Int(pt.registered_bytes));
      // No exit record: the shim's counts since its last line may be lost.
      if (p.registrations_at_least) la.Set("registrations_at_least", JsonValue::Bool(true));
    }
    const bool binned = pt.forks_listed < pt.forks && !pt.bin_forks.empty();
    if (binned) {
      la.Set("forks_listed", Int(pt.forks_listed));
      la.Set("note", Str("only the first " + std::to_string(ProcessLog::kForkSampleHead) +
                         " and last " + std::to_string(ProcessLog::kForkSampleTail) +
                         " forks are events; every fork is counted in the \"forks\" counter"));
    }
    life.Set("args", std::move(la));
    emit(life);
    // Every fork of a process with more than are listed: a counter per time bin.
    for (size_t k = 0; binned && k <= pt.bin_forks.size(); ++k) {
      JsonValue c = base("C", "forks", tp, tt);
      c.Set("ts", Us(t, pt.bins_t0_ns + static_cast<int64_t>(k) * pt.bin_width_ns));
      JsonValue a = JsonValue::Object();
      int64_t n = k < pt.bin_forks.size() ? pt.bin_forks[k] : 0;
      int64_t h = k < pt.bin_forks.size() ? pt.bin_hazard[k] : 0;
      a.Set("hazard", Int(h));
      a.Set("clean", Int(n - h));
      c.Set("args", std::move(a));
      emit(c);
    }

    for (const TimelineMark& m : pt.marks) {
      std::string name;
      const char* cat = "rdma";
      const char* color = nullptr;
      JsonValue a = JsonValue::Object();
      if (m.tid) a.Set("tid", Int(m.tid));
      switch (m.kind) {
        case TimelineMark::Kind::kRdmaInit:
          name = "RDMA init: " + m.call;
          a.Set("call", Str(m.call));
          a.Set("device", m.device.empty() ? JsonValue() : Str(m.device));
          color = "rail_load";
          break;
        case TimelineMark::Kind::kRegister:
          name = "register " + std::to_string(m.bytes) + " B";
          a.Set("call", Str(m.call));
          a.Set("bytes", Int(m.bytes));
          a.Set("dontfork", JsonValue::Bool(m.dontfork));
          color = "grey";
          break;
        case TimelineMark::Kind::kFork:
          name = "fork (" + m.verdict + ")";
          cat = "fork";
          a.Set("verdict", Str(m.verdict));
          {
            JsonValue rs = JsonValue::Array();
            for (const auto& x : m.reasons) rs.Push(Str(x));
            a.Set("reasons", std::move(rs));
          }
          a.Set("action", Str(m.action));
          a.Set("child_pid", m.child_pid > 0 ? Int(m.child_pid) : JsonValue());
          a.Set("site_id", m.site_id > 0 ? Int(m.site_id) : JsonValue());
          if (m.site_id > 0) {
            const auto& g = m.site_id <= static_cast<int>(r.hazard_groups.size())
                                ? r.hazard_groups[m.site_id - 1]
                                : r.clean_groups[m.site_id - 1 - r.hazard_groups.size()];
            a.Set("site", Str(SiteHeading(g.stack)));
          }
          color = m.verdict == "hazard" ? "terrible" : "good";
          break;
        case TimelineMark::Kind::kSpawn:
          name = "spawn: " + m.call;
          cat = "fork";
          a.Set("call", Str(m.call));
          a.Set("child_pid", m.child_pid > 0 ? Int(m.child_pid) : JsonValue());
          break;
        case TimelineMark::Kind::kExec:
          name = "child exec";
          cat = "child";
          a.Set("path", Str(m.call));
          break;
        case TimelineMark::Kind::kSegv:
          name = "child death: SIGSEGV";
          cat = "child";
          a.Set("signal", Int(m.signal));
          color = "terrible";
          break;
        case TimelineMark::Kind::kExit:
          name = "exit";
          cat = "child";
          break;
        case TimelineMark::Kind::kDeregister:
          continue;
      }
      JsonValue e = base("i", name.c_str(), tp, tt);
      e.Set("cat", Str(cat));
      e.Set("s", Str("t"));
      e.Set("ts", Us(t, m.ts_ns));
      if (color) e.Set("cname", Str(color));
      e.Set("args", std::move(a));
      emit(e);

      // Fork -> child: a flow from the parent's slice to the child's lifetime slice.
      if (m.kind == TimelineMark::Kind::kFork && m.child >= 0) {
        const ProcessNode& c = r.processes[m.child];
        int64_t cbegin = t.processes[m.child].begin_ns ? t.processes[m.child].begin_ns : m.ts_ns;
        ++flow_id;
        JsonValue s = base("s", "fork", tp, tt);
        s.Set("cat", Str("fork"));
        s.Set("id", Int(flow_id));
        s.Set("ts", Us(t, m.ts_ns));
        emit(s);
        JsonValue f = base("f", "fork", m.child + 1, c.pid > 0 ? c.pid : 1);
        f.Set("cat", Str("fork"));
        f.Set("id", Int(flow_id));
        f.Set("bp", Str("e"));
        f.Set("ts", Us(t, std::max(cbegin, m.ts_ns)));
        emit(f);
      }
    }
  }
  JsonValue other = JsonValue::Object();
  other.Set("generator", Str("forkguard report --format trace"));
  other.Set("report_schema", Str(kReportSchema));
  other.Set("t0_ns", Int(t.t0_ns));
  other.Set("processes", Int(static_cast<int64_t>(r.processes.size())));
  other.Set("forks", Int(r.forks));
  other.Set("hazard_forks", Int(r.hazard_forks));
  buf += "],\"displayTimeUnit\":\"ms\",\"otherData\":" + WriteJson(other, -1) + "}\n";
  sink(buf);
}

std::string RenderTrace(const JobReport& r, const Timeline& t) {
  std::string out;
  RenderTrace(r, t, [&](std::string_view s) { out += s; });
  return out;
}

}  // namespace forkguard::cli
