// `forkguard report --format markdown`: a summary, a table of the hazardous call sites and
// each site with its stacks folded, to paste into a GitHub issue.
#pragma once

#include <string>

#include "cli/job_report.h"

namespace forkguard::cli {

std::string RenderMarkdown(const JobReport& r, bool show_native = false);

}  // namespace forkguard::cli
