// libFuzzer target: the event-log reader, the job analysis and every renderer
// on arbitrary bytes, plus a JSON writer/reader round-trip property.
// Build: `bazel build //cli:log_parser_fuzzer` (clang, bazel/fuzz.bzl); scripts/fuzz runs it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cli/event_log.h"
#include "cli/job_report.h"
#include "cli/job_timeline.h"
#include "cli/json.h"
#include "cli/report_html.h"
#include "cli/report_json.h"
#include "cli/report_markdown.h"
#include "cli/report_text.h"
#include "cli/report_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace forkguard::cli;
  std::string_view text(reinterpret_cast<const char*>(data), size);

  LogSet logs;
  ParseLogText("fuzz.jsonl", text, &logs);
  JobReport r = BuildJobReport(logs, nullptr);
  std::string out = RenderText(r) + RenderMarkdown(r) + RenderText(r, 100, true);
  Timeline t = BuildTimeline(logs, r);
  out += RenderHtml(r, t);
  // Our JSON report and the trace must always be valid JSON.
  Json report;
  std::string err;
  if (!ParseJson(RenderJson(r), &report, &err)) abort();
  if (!ParseJson(RenderTrace(r, t), &report, &err)) abort();

  // Whatever parses, once re-written, re-parses to the same text.
  Json v;
  if (ParseJson(text, &v, &err)) {
    std::string once = WriteJson(v, -1);
    Json v2, v3;
    if (!ParseJson(once, &v2, &err)) abort();
    std::string twice = WriteJson(v2, -1);
    if (!ParseJson(twice, &v3, &err)) abort();
    if (WriteJson(v3, -1) != twice) abort();
  }
  return out.empty() ? 1 : 0;
}
