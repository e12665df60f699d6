// libFuzzer target: `forkguard report` on structured hostile logs. The input is a program
// (cli/fuzz_log_program.h) that writes /1 and /2 event logs with the schema's keys and
// hostile values, and a suppression file; they go through the reader, the suppressions, the
// baseline, BuildJobReport and every output format of the report command (text, verbose
// text, JSON, Markdown, HTML, trace, SARIF, JUnit, GitHub, --emit-suppressions, and the
// per-job sections of a multi-job text or Markdown report).
// Build: `bazel build //cli:report_fuzzer` (clang, bazel/fuzz.bzl); scripts/fuzz runs it.
//
// Besides sanitizer errors it aborts when an output breaks its contract: JSON, trace and
// SARIF that do not parse, a GitHub annotation that is not one workflow command a line, text
// or Markdown carrying control characters (a terminal or CI runner takes them as commands),
// a --emit-suppressions file the suppression parser rejects a line of.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/event_log.h"
#include "cli/fuzz_log_program.h"
#include "cli/job_report.h"
#include "cli/job_timeline.h"
#include "cli/json.h"
#include "cli/report_baseline.h"
#include "cli/report_ci.h"
#include "cli/report_html.h"
#include "cli/report_render.h"
#include "cli/report_suppressions.h"
#include "cli/report_trace.h"
#include "cli/unwatched.h"
#include "formats/suppressions.h"

namespace {

using namespace forkguard::cli;

void Expect(bool ok, const char* what, const std::string& output) {
  // FORKGUARD_FUZZ_CRASHES_ONLY=1: sanitizer errors and crashes only (to look past a known
  // contract breach).
  static const bool crashes_only = std::getenv("FORKGUARD_FUZZ_CRASHES_ONLY") != nullptr;
  if (ok || crashes_only) return;
  std::fprintf(stderr, "report_fuzzer: %s\n--- output (first 2000 bytes) ---\n%.2000s\n", what,
               output.c_str());
  std::abort();
}

bool IsJson(const std::string& text) {
  Json v;
  std::string err;
  return ParseJson(text, &v, &err);
}

// No byte a terminal acts on: C0 controls but newline and tab, DEL.
bool Printable(const std::string& text) {
  for (unsigned char c : text)
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return false;
  return true;
}

// Every line a GitHub Actions workflow command.
bool OneCommandPerLine(const std::string& text) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (end > at && text.compare(at, 2, "::") != 0) return false;
    if (text.find('\r', at) < end) return false;
    at = end + 1;
  }
  return true;
}

void CheckReport(const JobReport& r) {
  std::string text = RenderText(r, 100, false);
  Expect(Printable(text), "text report carries control characters", text);
  std::string verbose = RenderText(r, 100, true);
  Expect(Printable(verbose), "verbose text report carries control characters", verbose);
  std::string md = RenderMarkdown(r, true);
  Expect(Printable(md), "Markdown report carries control characters", md);
  RenderMarkdown(r, false);
  std::string json = RenderJson(r);
  Expect(IsJson(json), "JSON report does not parse", json);
  std::string sarif = RenderSarif(r, "0.1.0");
  Expect(IsJson(sarif), "SARIF report does not parse", sarif);
  RenderJunit(r);
  std::string github = RenderGithub(r);
  Expect(OneCommandPerLine(github), "GitHub report line is not one workflow command", github);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::vector<fuzz::LogFile> files = fuzz::GenerateLogs(&in, 24);
  std::string supp_text = in.ConsumeBool() ? fuzz::GenerateSuppressions(&in, 6) : "";
  const bool with_baseline = in.ConsumeBool();

  LogSet logs;
  for (const fuzz::LogFile& f : files) ParseLogText(f.name, f.text, &logs);
  JoinExecs(&logs);

  // The suppression file as LoadSuppressionFile reads it (the report refuses a file with bad
  // lines; its good entries are applied here all the same, as the shim applies them).
  SuppressionFile supp;
  supp.path = "fuzz.supp";
  supp.set = std::make_unique<forkguard::SuppressionSet>();
  forkguard::ParseSuppressions(
      supp_text.data(), supp_text.size(), supp.set.get(), [](int, const char*, void*) {}, nullptr);

  std::vector<UnwatchedProcess> unwatched = FindUnwatched(logs);
  std::string unwatched_text = FormatUnwatched(unwatched);
  Expect(Printable(unwatched_text), "unwatched section carries control characters", unwatched_text);
  SuppressionTally tally;
  ApplySuppressions(&logs, supp_text.empty() ? nullptr : &supp, nullptr, &tally);

  JobReport r = BuildJobReport(logs, nullptr);
  FillSuppressionUse(tally, supp_text.empty() ? nullptr : &supp, nullptr, &r);
  r.unwatched = unwatched;
  if (with_baseline) {
    // A baseline holding every other hazardous site of this very report.
    Baseline b;
    b.path = "fuzz-baseline.json";
    for (size_t i = 0; i < r.hazard_groups.size(); i += 2) {
      std::vector<std::string> reasons;
      for (const auto& [name, n] : r.hazard_groups[i].reasons) reasons.push_back(name);
      b.keys.insert(BaselineKey(reasons, r.hazard_groups[i].stack));
    }
    MarkNewSites(b, &r);
  }
  CheckReport(r);

  Timeline t = BuildTimeline(logs, r);
  RenderHtml(r, t);
  std::string trace = RenderTrace(r, t);
  Expect(IsJson(trace), "trace does not parse", trace);

  // --emit-suppressions: the shim and the report read it back, every line.
  std::string emitted = EmitSuppressions(r);
  auto reread = std::make_unique<forkguard::SuppressionSet>();
  int bad = forkguard::ParseSuppressions(
      emitted.data(), emitted.size(), reread.get(), [](int, const char*, void*) {}, nullptr);
  Expect(bad == 0, "--emit-suppressions wrote a line the parser rejects", emitted);

  // Several jobs: text and Markdown give one report per job.
  std::vector<LogSet> parts = SplitByJob(std::move(logs));
  if (parts.size() > 1) {
    for (LogSet& part : parts) {
      std::string id = part.processes.empty() ? "" : part.processes[0].job;
      JobReport pr = BuildJobReport(part, nullptr);
      FillSuppressionUse(tally, supp_text.empty() ? nullptr : &supp, &id, &pr);
      CheckReport(pr);
    }
  }
  return 0;
}
