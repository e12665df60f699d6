// Rendering a JobReport: text (a compiler-style diagnostic that fits 100
// columns), JSON (schema `forkguard.report/1`, docs/report-schema.json) and
// Markdown (pastes into a GitHub issue).
#pragma once

#include <string>

#include "cli/job_report.h"
#include "cli/json.h"

namespace forkguard::cli {

inline constexpr char kReportSchema[] = "forkguard.report/1";

std::string RenderText(const JobReport& r, int width = 100);
JsonValue ReportToJson(const JobReport& r);
std::string RenderJson(const JobReport& r);
std::string RenderMarkdown(const JobReport& r);

// "loader.cc:42", "train.py:17", "worker_main", or "" — the frame a person
// would call "where fork was called".
std::string SiteLabel(const Stack& s);

}  // namespace forkguard::cli
