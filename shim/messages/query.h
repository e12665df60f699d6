// The shim's answer to forkguard_fork_check() (api/forkguard.h): the decision a fork would
// get now, written into the public result instead of printed, logged or enforced.
#pragma once

#include "api/forkguard.h"
#include "shim/messages/message.h"

namespace forkguard {

// Fills `out` (all of it; sizeof(*out)) from the facts one fork decision gathered.
// `message`: the hazard message FormatHazardMessage wrote for them, null for a clean fork.
// Symbolizes stacks (takes the loader lock): not for the fork path.
void FillQueryResult(forkguard_check_result* out, const ForkReport& r, const char* message);

// A clean answer when nothing is tracked and no RDMA descriptor is open.
void FillCleanQueryResult(forkguard_check_result* out, const RdmaFds& fds);

}  // namespace forkguard
