// Baselines (`forkguard report --baseline OLD.json --fail-on new-hazard`): the hazardous call
// sites of an earlier `--format json` report, so that CI fails only on sites that are new.
// Sites are keyed without line numbers, so a moved line is the same site: the verdict kinds,
// then each frame's function and object base name (native), or, when the stack has Python
// frames, each Python frame's function and file base name.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "cli/event_log.h"
#include "cli/job_report.h"
#include "cli/json.h"

namespace forkguard::cli {

// The key of a hazardous site (`reasons`: its verdict kinds, any order).
std::string BaselineKey(const std::vector<std::string>& reasons, const Stack& stack);

struct Baseline {
  std::string path;
  std::set<std::string> keys;  // of its findings and suppressed sites
};

// Reads a `forkguard report --format json` file; throws flags::UsageError when it cannot be
// read or is not such a report.
Baseline LoadBaseline(const std::string& path);

// Sets r->hazard_new (one flag per hazard group) and r->baseline_file; returns how many
// hazard groups the baseline lacks.
int MarkNewSites(const Baseline& b, JobReport* r);

// The report's baseline line (text) and "baseline" member (JSON); nothing without a baseline.
std::string BaselineText(const JobReport& r, size_t width);
void AddBaselineJson(const JobReport& r, Json* report);

}  // namespace forkguard::cli
