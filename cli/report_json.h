// `forkguard report --format json`: schema `forkguard.report/1` (docs/report-schema.json).
#pragma once

#include <string>

#include "cli/job_report.h"
#include "cli/json.h"

namespace forkguard::cli {

inline constexpr char kReportSchema[] = "forkguard.report/1";

Json ReportToJson(const JobReport& r);
// WriteJson(ReportToJson(r)) and a newline, written with one fork's tree in memory at a time.
std::string RenderJson(const JobReport& r);

// The summary's fork counts, in the JSON report's order: forks, hazard_forks, clean_forks,
// hazard_sites, spawns, children_segv, and fixed_forks when fix mode made any fork safe (the
// JSON report and the HTML page's data).
void AddForkCounts(const JobReport& r, Json& s);
// What fix mode did (FixPhrase) as an object: forks, copied and withheld {ranges, bytes,
// kinds}, failed_ranges.
Json FixJson(const FixTally& f);

}  // namespace forkguard::cli
