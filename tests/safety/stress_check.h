// The checks shared by the host (stub) and real-device stress tests.
#pragma once

#include <string>

#include "tests/safety/safety_util.h"

namespace forkguard::safety {

// Runs `stress_prog stress forks_per_thread dev` under the shim with a log and
// checks: no hang (watchdog), exit 0, every fork's `fork` and `fork_child` events
// present exactly once and matched to the fork the program made, verdicts
// consistent with the phase (clean / pinned MR live / all released), every log
// line valid JSON with contiguous seq per file.
void CheckStress(int forks_per_thread, const std::string& dev, const std::vector<std::string>& env,
                 int watchdog_seconds);

}  // namespace forkguard::safety
