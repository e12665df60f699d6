// Rendering a JobReport: text (a compiler-style diagnostic that fits 100
// columns), JSON (schema `forkguard.report/1`, docs/report-schema.json) and
// Markdown (pastes into a GitHub issue).
#pragma once

#include <string>

#include "cli/job_report.h"
#include "cli/json.h"

namespace forkguard::cli {

inline constexpr char kReportSchema[] = "forkguard.report/1";

// show_native: for Python processes, also the interpreter's native frames (folded by
// default: the Python stack is what the user wrote).
std::string RenderText(const JobReport& r, int width = 100, bool show_native = false);
Json ReportToJson(const JobReport& r);
std::string RenderJson(const JobReport& r);
std::string RenderMarkdown(const JobReport& r, bool show_native = false);

// "loader.cc:42", "train.py:17", "worker_main", or "" — the frame a person
// would call "where fork was called" (for Python: the innermost frame outside
// the standard library and site-packages).
std::string SiteLabel(const Stack& s);

// Phrases shared by the renderers (text, Markdown, HTML).
std::string SummaryLine(const JobReport& r);
// The summary's fork counts, in the JSON report's order: forks, hazard_forks, clean_forks,
// hazard_sites, spawns, children_segv, and fixed_forks when fix mode made any fork safe (the
// JSON report and the HTML page's data).
void AddForkCounts(const JobReport& r, Json& s);
// What fix mode did: "2 forks made safe: 8.0 KiB copied for the children (anonymous),
// 2.0 MiB withheld from them (hugetlb)", and the ranges it could not change.
std::string FixPhrase(const FixTally& f);
// The same as an object: forks, copied and withheld {ranges, bytes, kinds}, failed_ranges.
Json FixJson(const FixTally& f);
std::string ProcessesPhrase(const ForkGroup& g);
std::string ActionsPhrase(const ForkGroup& g);
std::string ChildrenPhrase(const ForkGroup& g);
std::string RangesPhrase(const ForkGroup& g);
std::string InitPhrase(const ForkGroup& g);
// "rdma_common.py:20 in open_rdma (pyverbs)" for a Python init stack, "" otherwise.
std::string PythonInitSite(const Stack& st);
// The fix, in Python terms for a Python process.
std::string FixFor(const ForkGroup& g);

}  // namespace forkguard::cli
