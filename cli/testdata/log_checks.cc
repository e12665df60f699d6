#include "cli/testdata/log_checks.h"

#include "cli/job_report.h"
#include "cli/log_files.h"
#include "cli/report_json.h"
#include "cli/report_markdown.h"
#include "cli/report_text.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli::testdata {

std::string Corpus(const std::string& name) {
  return forkguard::test_support::Runfile("cli/testdata/corpus/" + name);
}

LogSet ReadCorpus(const std::string& name) {
  LogSet l;
  ReadLogs({Corpus(name)}, &l);
  return l;
}

bool HasNote(const LogSet& l, const std::string& suffix, const std::string& text) {
  for (const auto& n : l.notes)
    if (n.where.size() >= suffix.size() &&
        n.where.compare(n.where.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        n.text.find(text) != std::string::npos)
      return true;
  return false;
}

int64_t CountEvents(const LogSet& l, const std::string& type) {
  int64_t n = 0;
  for (const auto& p : l.processes) {
    if (type == "fork") n += p.forks;
    for (const auto& e : p.events) n += e.type == type;
  }
  return n;
}

std::string FormatsOf(const LogSet& l) {
  JobReport r = BuildJobReport(l, nullptr);
  return RenderText(r) + RenderJson(r) + RenderMarkdown(r) + RenderText(r, 100, true);
}

}  // namespace forkguard::cli::testdata
