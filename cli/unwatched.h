// The processes of a run that forkguard did not watch: programs exec'd without the shim
// (their environment dropped LD_PRELOAD, a static binary, a setuid program), named by the
// process that exec'd them (the shim's unwatched_exec record, formats/EVENT_LOG.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/event_log.h"

namespace forkguard::cli {

// A process that ran without the shim: its record (path, exec_by, why, held_rdma) and the
// process its log names.
struct UnwatchedProcess : UnwatchedExec {
  std::string host;
  int64_t pid = -1;
  int64_t ppid = -1;
  std::string prog;  // the program's file name
};

// Every unwatched_exec record of `logs`, by host and pid.
std::vector<UnwatchedProcess> FindUnwatched(const LogSet& logs);

// The report's section: "" when every process was watched.
std::string FormatUnwatched(const std::vector<UnwatchedProcess>& list, bool markdown = false);

// Why the shim could not be in it, in words ("a static binary (...)") for a reason code
// ("preload-removed", "static", "setuid"; anything else as it is).
std::string UnwatchedWhy(const std::string& reason);

// "held (inherited)", "none" or "unknown": its RDMA state when it exec'd.
std::string UnwatchedRdmaState(const UnwatchedProcess& u);

}  // namespace forkguard::cli
