// The report in the formats CI systems read, from the same JobReport the JSON report is made
// of: one result / test case / annotation per hazardous call site.
//   --format sarif:  SARIF 2.1.0 (OASIS), one rule per verdict kind, one result per site; the
//                    location is the innermost user frame's file:line, the RDMA init site a
//                    related location.
//   --format junit:  JUnit XML, one test case per call site (hazard: failure; suppressed or
//                    in the baseline: skipped; clean: passed).
//   --format github: GitHub Actions workflow commands, one `::error`/`::warning` line per
//                    hazardous site (`::notice` for sites already in the baseline).
#pragma once

#include <string>

#include "cli/job_report.h"

namespace forkguard::cli {

inline constexpr char kSarifSchemaUri[] =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

std::string RenderSarif(const JobReport& r, const std::string& tool_version);
std::string RenderJunit(const JobReport& r);
std::string RenderGithub(const JobReport& r);

// The verdict kind a site is filed under: child-segv, then parent-corruption, then
// inherited-rdma (the worst of its reasons).
std::string PrimaryKind(const ForkGroup& g);

// Where a site is, as CI tools want it: the innermost user frame's file and line (Python: the
// user's Python line; native: the first frame outside libc/libibverbs/forkguard with
// file:line). file "" when the stack has no symbolized frame.
struct SourceSpot {
  std::string file;
  int line = 0;
  std::string function;
};
SourceSpot SiteSpot(const Stack& s);

}  // namespace forkguard::cli
