#include "cli/report_render.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <map>

#include "cli/format.h"
#include "cli/report_baseline.h"
#include "cli/report_suppressions.h"
#include "cli/stack_view.h"
#include "formats/fix_text.h"

namespace forkguard::cli {
namespace {

constexpr char kFix[] =
    "create the loader workers before RDMA init (ibv_open_device/ibv_reg_mr/rdma_create_id), "
    "or start them with spawn/forkserver (posix_spawn) instead of fork";
constexpr char kPythonFix[] =
    "start the workers before RDMA init (DataLoader(persistent_workers=True) iterated once "
    "first, a multiprocessing Pool created first), or use multiprocessing_context='spawn' / "
    "'forkserver' (multiprocessing.set_start_method('forkserver'))";

}  // namespace

// The fix in the terms of the program that forked: the shim's rule for the site when its
// log names one (the words live in formats/fix_text.cc, shared with the live message), else
// from the stack (logs of older shims).
std::string FixFor(const ForkGroup& g) {
  FixRule rule;
  if (FixRuleFromName(g.fix_rule.c_str(), &rule)) {
    char buf[1024];
    TextBuffer b(buf, sizeof buf);
    FormatFix(b, rule, g.fix_library.empty() ? nullptr : g.fix_library.c_str());
    std::string text(b.data(), b.size());
    if (text.rfind("  fix: ", 0) == 0) text.erase(0, 7);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    if (!text.empty()) return text;
  }
  return ViewStack(g.stack).python ? kPythonFix : kFix;
}

namespace {

void AppendStack(std::string* out, const Stack& s, const std::string& indent, size_t width,
                 size_t max_frames = 12, bool show_native = false) {
  for (const auto& line : StackLines(s, show_native, max_frames))
    *out += Fit(indent + line, width) + "\n";
}

}  // namespace

std::string ProcessesPhrase(const ForkGroup& g) {
  std::string s = "in " + Plural(static_cast<int64_t>(g.processes.size()), "process", "processes");
  std::string extra;
  if (!g.ranks.empty()) extra = FormatRanks(g.ranks);
  if (g.hosts.size() == 1) {
    extra += (extra.empty() ? "" : ", ") + std::string("host ") + *g.hosts.begin();
  } else {
    extra +=
        (extra.empty() ? "" : ", ") + Plural(static_cast<int64_t>(g.hosts.size()), "host", "hosts");
  }
  return s + " (" + extra + ")";
}

std::string ActionsPhrase(const ForkGroup& g) {
  std::string s;
  for (const auto& [a, n] : g.actions) {
    if (!s.empty()) s += ", ";
    s += std::to_string(n) + " " + a;
  }
  if (!g.errnos.empty()) {
    s += " (errno";
    for (const auto& e : g.errnos) s += " " + e;
    s += ")";
  }
  return s;
}

std::string ChildrenPhrase(const ForkGroup& g) {
  std::string s = Plural(g.children_forked, "child", "children") + " forked";
  if (g.children_segv) s += ", " + std::to_string(g.children_segv) + " killed by SIGSEGV";
  if (g.children_exec) s += ", " + std::to_string(g.children_exec) + " exec'd (benign)";
  return s;
}

std::string RangesPhrase(const ForkGroup& g) {
  std::string s = Plural(g.max_ranges, "registered range", "registered ranges") + " (" +
                  FormatBytes(g.max_range_bytes) + ")";
  if (g.dontfork_ranges) s += ", " + std::to_string(g.dontfork_ranges) + " MADV_DONTFORK";
  if (g.max_threads) s += "; " + Plural(g.max_threads, "thread", "threads");
  if (g.kernel_cof) s += std::string("; kernel copy-on-fork: ") + (*g.kernel_cof ? "yes" : "no");
  return s;
}

// "rdma_common.py:20 in open_rdma (pyverbs)" for a Python init stack, "" otherwise.
std::string FixPhrase(const FixTally& f) {
  std::string s = Plural(f.forks, "fork", "forks") + " made safe";
  auto kinds = [](unsigned mask) {
    std::string k;
    for (const std::string& name : FixTally::KindNames(mask)) k += (k.empty() ? "" : ", ") + name;
    return k.empty() ? k : " (" + k + ")";
  };
  std::string parts;
  if (f.copied_ranges > 0)
    parts = FormatBytes(f.copied_bytes) + " copied for the children" + kinds(f.copied_kinds);
  if (f.withheld_ranges > 0)
    parts += (parts.empty() ? "" : ", ") + FormatBytes(f.withheld_bytes) +
             (f.copied_ranges > 0 ? " withheld from them" : " withheld from the children") +
             kinds(f.withheld_kinds);
  if (!parts.empty()) s += ": " + parts;
  if (f.failed_ranges > 0)
    s += "; " + Plural(f.failed_ranges, "range", "ranges") + " fix mode could not change";
  return s;
}

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

std::string PythonInitSite(const Stack& st) {
  StackView v = ViewStack(st);
  if (!v.python) return "";
  std::string s = SiteHeading(st);
  if (!v.libraries.empty()) s += " (" + v.libraries.front() + ")";
  return s;
}

std::string InitPhrase(const ForkGroup& g) {
  std::string where = PythonInitSite(g.init_stack);
  std::string s = "RDMA was first initialized " + (where.empty() ? "here" : "at " + where) +
                  ", by " + g.init_call;
  if (!g.init_device.empty()) s += " on " + g.init_device;
  if (g.min_age_ms >= 0) {
    s += ", " + FormatMs(g.min_age_ms);
    if (g.max_age_ms != g.min_age_ms) s += "–" + FormatMs(g.max_age_ms);
    s += " before the fork";
  }
  return s + ":";
}

std::string SummaryLine(const JobReport& r) {
  std::string s;
  if (r.jobs.size() == 1 && !r.jobs[0].job.empty()) s = "job " + r.jobs[0].job + ": ";
  s += Plural(static_cast<int64_t>(r.processes.size()), "process", "processes");
  if (!r.ranks.empty())
    s += " (" + Plural(static_cast<int64_t>(r.ranks.size()), "rank", "ranks") + ")";
  s += " on " + Plural(static_cast<int64_t>(r.hosts.size()), "host", "hosts") + ", " +
       Plural(r.forks, "fork", "forks") + ": " + std::to_string(r.hazard_forks) + " hazardous at " +
       Plural(static_cast<int64_t>(r.hazard_groups.size()), "call site", "call sites") + ", " +
       std::to_string(r.forks - r.hazard_forks - r.suppressed_forks) + " clean";
  if (r.suppressed_forks > 0) s += ", " + std::to_string(r.suppressed_forks) + " suppressed";
  return s;
}

namespace {

// One line per process with its children below, collapsing a large set of
// look-alike children ("worker ×8: 2 killed by SIGSEGV").
void AppendTree(std::string* out, const JobReport& r, int i, const std::string& indent,
                size_t width, int depth) {
  const ProcessNode& p = r.processes[i];
  std::string line = indent + std::to_string(p.pid) + " " + (p.prog.empty() ? "?" : p.prog);
  for (auto e = p.execs.rbegin(); e != p.execs.rend(); ++e)
    line += std::string(e == p.execs.rbegin() ? " (exec'd from " : " from ") +
            (e->prog.empty() ? "?" : e->prog) + (e + 1 == p.execs.rend() ? ")" : "");
  if (p.rank) line += " [rank " + std::to_string(*p.rank) + "]";
  if (p.rdma_initialized) line += " rdma";
  if (p.registrations) {
    line += std::string(", ") + (p.registrations_at_least ? "at least " : "") +
            Plural(p.registrations, "registration", "registrations");
  }
  if (p.forks) line += ", " + Plural(p.forks, "fork", "forks");
  if (p.hazard_forks) {
    line += " (" + std::to_string(p.hazard_forks) + " hazardous";
    if (p.fixed_forks) line += ", " + std::to_string(p.fixed_forks) + " made safe";
    line += ")";
  }
  if (p.died_segv) line += ", killed by SIGSEGV";
  if (p.exec_after_fork) line += ", exec'd";
  if (p.exit_status) line += ", exit " + std::to_string(*p.exit_status);
  *out += Fit(line, width) + "\n";
  if (depth > 16) return;
  std::vector<int> leaves, inner;
  for (int c : p.children) (r.processes[c].children.empty() ? leaves : inner).push_back(c);
  for (int c : inner) AppendTree(out, r, c, indent + "  ", width, depth + 1);
  if (leaves.size() <= 4) {
    for (int c : leaves) AppendTree(out, r, c, indent + "  ", width, depth + 1);
    return;
  }
  std::map<std::string, std::array<int, 3>> kinds;  // prog -> total, segv, exec
  for (int c : leaves) {
    auto& k = kinds[r.processes[c].prog];
    ++k[0];
    if (r.processes[c].died_segv) ++k[1];
    if (r.processes[c].exec_after_fork) ++k[2];
  }
  for (const auto& [prog, k] : kinds) {
    std::string l = indent + "  " + (prog.empty() ? "?" : prog) + " ×" + std::to_string(k[0]);
    if (k[1]) l += ", " + std::to_string(k[1]) + " killed by SIGSEGV";
    if (k[2]) l += ", " + std::to_string(k[2]) + " exec'd";
    *out += Fit(l, width) + "\n";
  }
}

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
  if (g.verdict == "hazard") o["fix"] = FixFor(g);
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
  if (g.verdict == "hazard") {
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

}  // namespace

std::string SiteLabel(const Stack& s) {
  // In a Python program the user's Python line is the one its author knows.
  StackView v = ViewStack(s);
  if (v.python) return ShortPythonPath(s[v.head].py_file) + ":" + std::to_string(s[v.head].py_line);
  return SiteHeading(s);
}

std::string RenderText(const JobReport& r, int width_in, bool show_native) {
  size_t width = static_cast<size_t>(std::max(width_in, 40));
  std::string out;
  out += Fit("forkguard: " + SummaryLine(r), width) + "\n";
  if (!r.fix_tally.empty()) out += Wrap("", "  ", "fix mode: " + FixPhrase(r.fix_tally), width);
  if (static_cast<int64_t>(r.fork_list.size()) < r.forks)
    out += Wrap("", "  ",
                "(every fork is counted per call site; " + std::to_string(r.fork_list.size()) +
                    " of " + std::to_string(r.forks) + " are listed one by one, the first " +
                    std::to_string(ProcessLog::kForkSampleHead) + " and last " +
                    std::to_string(ProcessLog::kForkSampleTail) +
                    " of each process, in --format json, html and trace)",
                width);

  int id = 0;
  for (const auto& g : r.hazard_groups) {
    ++id;
    std::string loc = SiteHeading(g.stack);
    if (loc.empty()) loc = g.site.empty() ? "<unknown call site>" : "site " + g.site;
    std::string head = loc + ": hazard: fork() after RDMA initialization";
    if (g.count > 1) head += " ×" + std::to_string(g.count);
    if (static_cast<size_t>(id) <= r.hazard_new.size())
      head += r.hazard_new[id - 1] ? " (new: not in the baseline)" : " (in the baseline)";
    out += "\n" + Wrap("", "    ",
                       head + " " + ProcessesPhrase(g) + " [" + std::to_string(id) + "/" +
                           std::to_string(r.hazard_groups.size()) + "]",
                       width);
    for (const auto& [reason, n] : g.reasons) {
      std::string tag = reason + (n != g.count ? " (" + std::to_string(n) + "×)" : "");
      out += Wrap("  = " + tag + ":", "      ", ExplainReason(reason), width);
    }
    out += "  fork called at:\n";
    AppendStack(&out, g.stack, "      ", width, 12, show_native);
    if (!g.init_call.empty()) {
      out += Wrap("  note:", "      ", InitPhrase(g), width);
      AppendStack(&out, g.init_stack, "      ", width, 12, show_native);
    }
    if (g.max_ranges > 0 || g.max_threads > 0 || g.kernel_cof)
      out += Wrap("  note:", "      ", "at the fork: " + RangesPhrase(g), width);
    out +=
        Wrap("  note:", "      ", "action: " + ActionsPhrase(g) + "; " + ChildrenPhrase(g), width);
    if (!g.fix_tally.empty())
      out += Wrap("  note:", "      ", "fix mode: " + FixPhrase(g.fix_tally), width);
    out += Wrap("  help:", "      ", FixFor(g), width);
  }

  out += BaselineText(r, width);
  out += SuppressionsText(r, width);

  if (!r.clean_groups.empty()) {
    int64_t n = 0;
    for (const auto& g : r.clean_groups) n += g.count;
    out += "\n" +
           Fit("clean: " + Plural(n, "fork", "forks") + " at " +
                   Plural(static_cast<int64_t>(r.clean_groups.size()), "call site", "call sites") +
                   " with no live RDMA resources (nothing to do)",
               width) +
           "\n";
    for (size_t i = 0; i < r.clean_groups.size() && i < 5; ++i) {
      const auto& g = r.clean_groups[i];
      std::string loc = SiteHeading(g.stack);
      out += Fit("  " + (loc.empty() ? "<unknown call site>" : loc) + " ×" +
                     std::to_string(g.count) + " " + ProcessesPhrase(g),
                 width) +
             "\n";
    }
    if (r.clean_groups.size() > 5)
      out += "  … " + std::to_string(r.clean_groups.size() - 5) + " more\n";
  }

  if (!r.inits.empty()) {
    out += "\nRDMA initialized at " +
           Plural(static_cast<int64_t>(r.inits.size()), "site:", "sites:") + "\n";
    for (size_t i = 0; i < r.inits.size() && i < 8; ++i) {
      const auto& s = r.inits[i];
      std::string where = PythonInitSite(s.stack);
      std::string l = "  " + (where.empty() ? "" : where + ": ") + s.call +
                      (s.device.empty() ? "" : " on " + s.device) + " ×" + std::to_string(s.count) +
                      " in " +
                      Plural(static_cast<int64_t>(s.processes.size()), "process", "processes");
      if (!s.ranks.empty()) l += " (" + FormatRanks(s.ranks) + ")";
      out += Fit(l, width) + "\n";
      AppendStack(&out, s.stack, "      ", width, 6, show_native);
    }
  }

  if (!r.deaths.empty()) {
    out += "\n" + Plural(static_cast<int64_t>(r.deaths.size()), "child", "children") +
           " killed touching RDMA-registered memory:\n";
    for (size_t i = 0; i < r.deaths.size() && i < 10; ++i) {
      const auto& d = r.deaths[i];
      const ProcessNode& p = r.processes[d.process];
      std::string l = "  " + p.host + " pid " + std::to_string(p.pid);
      if (p.rank) l += " (rank " + std::to_string(*p.rank) + ")";
      l += ": " + (d.signal == 11 ? std::string("SIGSEGV") : "signal " + std::to_string(d.signal));
      if (d.addr) l += " at " + Hex(*d.addr);
      if (d.range_addr)
        l += ", registered range " + Hex(*d.range_addr) +
             (d.range_len ? "+" + FormatBytes(static_cast<int64_t>(*d.range_len)) : "");
      if (d.group >= 0) l += " [" + std::to_string(d.group + 1) + "]";
      out += Fit(l, width) + "\n";
    }
    if (r.deaths.size() > 10) out += "  … " + std::to_string(r.deaths.size() - 10) + " more\n";
    // Where the memory they touched was registered (the first death's view).
    for (const auto& d : r.deaths) {
      if (d.reg_stack.empty()) continue;
      out += Fit("  note: the range was registered" + (d.call.empty() ? "" : " by " + d.call) +
                     " (in the parent) at:",
                 width) +
             "\n";
      AppendStack(&out, d.reg_stack, "      ", width, 8);
      break;
    }
  }

  if (!r.processes.empty()) {
    // A big job's tree is in the JSON report; the text shows its beginning.
    constexpr size_t kMaxTreeLines = 80;
    std::string tree;
    std::string last_host;
    int roots = 0, shown = 0;
    for (int i = 0; i < static_cast<int>(r.processes.size()); ++i) {
      if (r.processes[i].parent >= 0) continue;
      ++roots;
      if (static_cast<size_t>(std::count(tree.begin(), tree.end(), '\n')) >= kMaxTreeLines)
        continue;
      ++shown;
      if (r.processes[i].host != last_host) {
        last_host = r.processes[i].host;
        tree += Fit("  host " + last_host, width) + "\n";
      }
      AppendTree(&tree, r, i, "    ", width, 0);
    }
    out += "\nprocess tree:\n" + tree;
    if (shown < roots)
      out += "  … " + std::to_string(roots - shown) +
             " more process trees (--format json lists every process)\n";
  }

  if (!r.shim_notes.empty()) {
    out += "\nshim notes:\n";
    for (const auto& n : r.shim_notes) out += Wrap("  ", "    ", n, width);
  }
  if (!r.notes.empty()) {
    out += "\n" + Plural(static_cast<int64_t>(r.notes.size()), "note", "notes") +
           " on the input (" + std::to_string(r.lines_skipped) + " lines skipped):\n";
    for (const auto& n : r.notes)
      out += Wrap("  " + FitLeft(n.where, width - 20) + ":", "      ", n.text, width);
  }
  if (r.processes.empty()) out += "\nno forkguard events found\n";
  return out;
}

namespace {

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

Json ReportToJsonImpl(const JobReport& r, bool forks_marker);

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

namespace {

Json ReportToJsonImpl(const JobReport& r, bool forks_marker) {
  Json o = Json::object();
  o["schema"] = kReportSchema;
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
  o["summary"] = std::move(s);

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
  o["rdma_inits"] = std::move(inits);

  // The processes that ran without the shim: their forks are not in this report.
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
  o["unwatched"] = std::move(unwatched);

  // Every fork with its verdict (or, past ProcessLog's sample size, the first and last forks
  // of each process: summary.forks_sampled); `site_id` is the id of its finding or clean site.
  Json forks = Json::array();
  if (forks_marker)
    forks = Json(kForksMarker);
  else
    for (const auto& f : r.fork_list) forks.push_back(ForkJson(r, f));
  o["forks"] = std::move(forks);

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
  o["child_deaths"] = std::move(deaths);

  Json procs = Json::array();
  for (const auto& p : r.processes) {
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
    procs.push_back(std::move(x));
  }
  o["processes"] = std::move(procs);

  Json notes = Json::array();
  for (const auto& n : r.notes) {
    Json x = Json::object();
    x["where"] = n.where;
    x["text"] = n.text;
    notes.push_back(std::move(x));
  }
  o["notes"] = std::move(notes);
  Json sn = Json::array();
  for (const auto& n : r.shim_notes) sn.emplace_back(n);
  o["shim_notes"] = std::move(sn);
  return o;
}

}  // namespace

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

std::string RenderMarkdown(const JobReport& r, bool show_native) {
  std::string out = "### forkguard: ";
  out += r.hazard_forks
             ? std::to_string(r.hazard_forks) + " hazardous fork" +
                   (r.hazard_forks == 1 ? "" : "s") + " at " +
                   Plural(static_cast<int64_t>(r.hazard_groups.size()), "call site", "call sites")
             : std::string("no hazardous fork");
  out += "\n\n" + MarkdownText(SummaryLine(r)) + "\n";
  if (!r.fix_tally.empty())
    out += "\n" + MarkdownText("fix mode: " + FixPhrase(r.fix_tally)) + "\n";
  if (!r.hazard_groups.empty()) {
    out += "\n| # | call site | forks | processes | ranks | reasons | children killed |\n";
    out += "|---|---|---:|---:|---|---|---:|\n";
    int id = 0;
    for (const auto& g : r.hazard_groups) {
      std::string reasons;
      for (const auto& [k, n] : g.reasons) reasons += (reasons.empty() ? "" : ", ") + k;
      std::string loc = SiteHeading(g.stack);
      out += "| " + std::to_string(++id) + " | " + MarkdownCode(loc.empty() ? "?" : loc) + " | ×" +
             std::to_string(g.count) + " | " + std::to_string(g.processes.size()) + " | " +
             MarkdownText(FormatRanks(g.ranks)) + " | " + MarkdownText(reasons) + " | " +
             std::to_string(g.children_segv) + " |\n";
    }
    id = 0;
    for (const auto& g : r.hazard_groups) {
      std::string loc = SiteHeading(g.stack);
      out += "\n#### " + std::to_string(++id) + ". " + MarkdownCode(loc.empty() ? "?" : loc) +
             ": fork() after RDMA initialization ×" + std::to_string(g.count) + "\n\n";
      for (const auto& [reason, n] : g.reasons)
        out += "- **" + MarkdownText(reason) + "**: " + MarkdownText(ExplainReason(reason)) + "\n";
      out += "- " + MarkdownText(RangesPhrase(g)) + "\n";
      out += "- " + MarkdownText(ActionsPhrase(g) + "; " + ChildrenPhrase(g)) + "\n";
      if (!g.fix_tally.empty())
        out += "- **fix mode**: " + MarkdownText(FixPhrase(g.fix_tally)) + "\n";
      out += "- **fix**: " + MarkdownText(FixFor(g)) + "\n\n";
      out += "<details><summary>stacks</summary>\n\n```text\nfork called at:\n";
      std::string st;
      AppendStack(&st, g.stack, "  ", 200, 12, show_native);
      if (!g.init_call.empty()) {
        st += EscapeText(InitPhrase(g)) + "\n";
        AppendStack(&st, g.init_stack, "  ", 200, 12, show_native);
      }
      // A fence inside the text would end the block early.
      for (size_t p; (p = st.find("```")) != std::string::npos;) st.replace(p, 3, "'''");
      out += st + "```\n\n</details>\n";
    }
  }
  if (!r.deaths.empty()) {
    out += "\n**" + Plural(static_cast<int64_t>(r.deaths.size()), "child", "children") +
           " killed by SIGSEGV** touching RDMA-registered memory.\n";
  }
  if (!r.notes.empty()) {
    out += "\n<details><summary>" + Plural(static_cast<int64_t>(r.notes.size()), "note", "notes") +
           " on the input</summary>\n\n";
    for (const auto& n : r.notes)
      out += "- " + MarkdownCode(n.where) + ": " + MarkdownText(n.text) + "\n";
    out += "\n</details>\n";
  }
  return out;
}

}  // namespace forkguard::cli
