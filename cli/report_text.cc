#include "cli/report_text.h"

#include <algorithm>
#include <array>
#include <map>
#include <vector>

#include "cli/format.h"
#include "cli/report_baseline.h"
#include "cli/report_phrases.h"
#include "cli/report_suppressions.h"
#include "cli/stack_view.h"

namespace forkguard::cli {
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

// One hazardous call site: the heading, the reasons, where fork was called and RDMA first
// initialized, what was at the fork, what happened, the fix.
void AppendFinding(std::string* out, const JobReport& r, const ForkGroup& g, int id, size_t width,
                   bool show_native) {
  std::string loc = SiteHeading(g.stack);
  if (loc.empty()) loc = g.site.empty() ? "<unknown call site>" : "site " + g.site;
  std::string head = loc + ": hazard: fork() after RDMA initialization";
  if (g.count > 1) head += " ×" + std::to_string(g.count);
  if (static_cast<size_t>(id) <= r.hazard_new.size())
    head += r.hazard_new[id - 1] ? " (new: not in the baseline)" : " (in the baseline)";
  *out += "\n" + Wrap("", "    ",
                      head + " " + ProcessesPhrase(g) + " [" + std::to_string(id) + "/" +
                          std::to_string(r.hazard_groups.size()) + "]",
                      width);
  for (const auto& [reason, n] : g.reasons) {
    std::string tag = reason + (n != g.count ? " (" + std::to_string(n) + "×)" : "");
    *out += Wrap("  = " + tag + ":", "      ", ExplainReason(reason), width);
  }
  *out += "  fork called at:\n";
  AppendStack(out, g.stack, "      ", width, 12, show_native);
  if (!g.init_call.empty()) {
    *out += Wrap("  note:", "      ", InitPhrase(g), width);
    AppendStack(out, g.init_stack, "      ", width, 12, show_native);
  }
  if (g.max_ranges > 0 || g.max_threads > 0 || g.kernel_cof)
    *out += Wrap("  note:", "      ", "at the fork: " + RangesPhrase(g), width);
  *out +=
      Wrap("  note:", "      ", "action: " + ActionsPhrase(g) + "; " + ChildrenPhrase(g), width);
  if (!g.fix_tally.empty())
    *out += Wrap("  note:", "      ", "fix mode: " + FixPhrase(g.fix_tally), width);
  *out += Wrap("  help:", "      ", FixFor(g), width);
}

void AppendCleanSites(std::string* out, const JobReport& r, size_t width) {
  int64_t n = 0;
  for (const auto& g : r.clean_groups) n += g.count;
  *out += "\n" +
          Fit("clean: " + Plural(n, "fork", "forks") + " at " +
                  Plural(static_cast<int64_t>(r.clean_groups.size()), "call site", "call sites") +
                  " with no live RDMA resources (nothing to do)",
              width) +
          "\n";
  for (size_t i = 0; i < r.clean_groups.size() && i < 5; ++i) {
    const auto& g = r.clean_groups[i];
    std::string loc = SiteHeading(g.stack);
    *out += Fit("  " + (loc.empty() ? "<unknown call site>" : loc) + " ×" +
                    std::to_string(g.count) + " " + ProcessesPhrase(g),
                width) +
            "\n";
  }
  if (r.clean_groups.size() > 5)
    *out += "  … " + std::to_string(r.clean_groups.size() - 5) + " more\n";
}

void AppendInitSites(std::string* out, const JobReport& r, size_t width, bool show_native) {
  *out += "\nRDMA initialized at " +
          Plural(static_cast<int64_t>(r.inits.size()), "site:", "sites:") + "\n";
  for (size_t i = 0; i < r.inits.size() && i < 8; ++i) {
    const auto& s = r.inits[i];
    std::string where = PythonInitSite(s.stack);
    std::string l = "  " + (where.empty() ? "" : where + ": ") + s.call +
                    (s.device.empty() ? "" : " on " + s.device) + " ×" + std::to_string(s.count) +
                    " in " +
                    Plural(static_cast<int64_t>(s.processes.size()), "process", "processes");
    if (!s.ranks.empty()) l += " (" + FormatRanks(s.ranks) + ")";
    *out += Fit(l, width) + "\n";
    AppendStack(out, s.stack, "      ", width, 6, show_native);
  }
}

void AppendDeaths(std::string* out, const JobReport& r, size_t width) {
  *out += "\n" + Plural(static_cast<int64_t>(r.deaths.size()), "child", "children") +
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
    *out += Fit(l, width) + "\n";
  }
  if (r.deaths.size() > 10) *out += "  … " + std::to_string(r.deaths.size() - 10) + " more\n";
  // Where the memory they touched was registered (the first death's view).
  for (const auto& d : r.deaths) {
    if (d.reg_stack.empty()) continue;
    *out += Fit("  note: the range was registered" + (d.call.empty() ? "" : " by " + d.call) +
                    " (in the parent) at:",
                width) +
            "\n";
    AppendStack(out, d.reg_stack, "      ", width, 8);
    break;
  }
}

// Each process tree, by host.
void AppendProcessTrees(std::string* out, const JobReport& r, size_t width) {
  // A big job's tree is in the JSON report; the text shows its beginning.
  constexpr size_t kMaxTreeLines = 80;
  std::string tree;
  std::string last_host;
  int roots = 0, shown = 0;
  for (int i = 0; i < static_cast<int>(r.processes.size()); ++i) {
    if (r.processes[i].parent >= 0) continue;
    ++roots;
    if (static_cast<size_t>(std::count(tree.begin(), tree.end(), '\n')) >= kMaxTreeLines) continue;
    ++shown;
    if (r.processes[i].host != last_host) {
      last_host = r.processes[i].host;
      tree += Fit("  host " + last_host, width) + "\n";
    }
    AppendTree(&tree, r, i, "    ", width, 0);
  }
  *out += "\nprocess tree:\n" + tree;
  if (shown < roots)
    *out += "  … " + std::to_string(roots - shown) +
            " more process trees (--format json lists every process)\n";
}

void AppendNotes(std::string* out, const JobReport& r, size_t width) {
  if (!r.shim_notes.empty()) {
    *out += "\nshim notes:\n";
    for (const auto& n : r.shim_notes) *out += Wrap("  ", "    ", n, width);
  }
  if (!r.notes.empty()) {
    *out += "\n" + Plural(static_cast<int64_t>(r.notes.size()), "note", "notes") +
            " on the input (" + std::to_string(r.lines_skipped) + " lines skipped):\n";
    for (const auto& n : r.notes)
      *out += Wrap("  " + FitLeft(n.where, width - 20) + ":", "      ", n.text, width);
  }
}

}  // namespace

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
  for (const auto& g : r.hazard_groups) AppendFinding(&out, r, g, ++id, width, show_native);

  out += BaselineText(r, width);
  out += SuppressionsText(r, width);

  if (!r.clean_groups.empty()) AppendCleanSites(&out, r, width);
  if (!r.inits.empty()) AppendInitSites(&out, r, width, show_native);
  if (!r.deaths.empty()) AppendDeaths(&out, r, width);
  if (!r.processes.empty()) AppendProcessTrees(&out, r, width);
  AppendNotes(&out, r, width);
  if (r.processes.empty()) out += "\nno forkguard events found\n";
  return out;
}

}  // namespace forkguard::cli
