#include "cli/report_markdown.h"

#include "cli/format.h"
#include "cli/report_phrases.h"
#include "cli/stack_view.h"

namespace forkguard::cli {

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
