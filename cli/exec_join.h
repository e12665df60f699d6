// One process, two programs: a pid whose log ends with an `exec` event, and a later log of
// the same pid, are one process. ReadLogs joins them.
#pragma once

#include "cli/process_log.h"

namespace forkguard::cli {

// One pid on one host (and job) whose log ends with an `exec` event and a later log of the
// same pid that starts after it: one process that ran two programs. Joins such logs into
// the first (in place: events, stacks, fork tallies and counts), the later program's
// identity winning. ReadLogs does this; ParseLogText, one file, does not.
void JoinExecs(LogSet* logs);

}  // namespace forkguard::cli
