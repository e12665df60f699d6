// Phrases the report's formats share (text, Markdown, HTML, the CI formats): the summary line,
// a finding's processes, actions, children, ranges and RDMA init, what fix mode did, the fix,
// where a stack is. Each format is its own file: report_text, report_json, report_markdown,
// report_html, report_trace, report_ci.
#pragma once

#include <cstddef>
#include <string>

#include "cli/job_report.h"

namespace forkguard::cli {

// "loader.cc:42", "train.py:17", "worker_main", or "" — the frame a person
// would call "where fork was called" (for Python: the innermost frame outside
// the standard library and site-packages).
std::string SiteLabel(const Stack& s);

std::string SummaryLine(const JobReport& r);
// What fix mode did: "2 forks made safe: 8.0 KiB copied for the children (anonymous),
// 2.0 MiB withheld from them (hugetlb)", and the ranges it could not change.
std::string FixPhrase(const FixTally& f);
std::string ProcessesPhrase(const ForkGroup& g);
std::string ActionsPhrase(const ForkGroup& g);
std::string ChildrenPhrase(const ForkGroup& g);
std::string RangesPhrase(const ForkGroup& g);
std::string InitPhrase(const ForkGroup& g);
// "rdma_common.py:20 in open_rdma (pyverbs)" for a Python init stack, "" otherwise.
std::string PythonInitSite(const Stack& st);
// The fix, in Python terms for a Python process.
std::string FixFor(const ForkGroup& g);

// A stack's lines (StackLines), each after `indent` and fitted to `width` (text and Markdown).
void AppendStack(std::string* out, const Stack& s, const std::string& indent, size_t width,
                 size_t max_frames = 12, bool show_native = false);

}  // namespace forkguard::cli
