#include "cli/report_phrases.h"

#include "cli/format.h"
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

void AppendStack(std::string* out, const Stack& s, const std::string& indent, size_t width,
                 size_t max_frames, bool show_native) {
  for (const auto& line : StackLines(s, show_native, max_frames))
    *out += Fit(indent + line, width) + "\n";
}

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
    // "refused": forkguard watch --enforce had the kernel refuse it (no child was made).
    s += std::to_string(n) + " " +
         (a == schema::kActionRefused ? std::string("refused by the kernel") : a);
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

std::string SiteLabel(const Stack& s) {
  // In a Python program the user's Python line is the one its author knows.
  StackView v = ViewStack(s);
  if (v.python) return ShortPythonPath(s[v.head].py_file) + ":" + std::to_string(s[v.head].py_line);
  return SiteHeading(s);
}

}  // namespace forkguard::cli
