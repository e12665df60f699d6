// `forkguard report --format html`: one self-contained page for a person (no
// network: inline CSS, JavaScript and SVG; the data is embedded as JSON): the job
// summary, each finding with its stacks, a timeline per host and process (RDMA
// init, registrations, forks coloured by verdict, children and how they ended),
// the process tree. Aggregated by default (hosts and large families of children
// fold; rows are drawn when opened), so a 4096-process job stays small and quick.
// The page itself is cli/report_html_page.html.
#pragma once

#include <string>

#include "cli/job_report.h"
#include "cli/job_timeline.h"

namespace forkguard::cli {

std::string RenderHtml(const JobReport& r, const Timeline& t);

}  // namespace forkguard::cli
