// `forkguard report --format trace`: Chrome Trace Event JSON (the format of
// chrome://tracing, Perfetto's legacy JSON importer and the PyTorch profiler):
// one track per process, grouped and sorted by host; instant events for RDMA
// init, registrations, forks (verdict in args), spawns, exec and child deaths;
// a flow arrow from each fork to the child it made.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "cli/job_report.h"
#include "cli/job_timeline.h"

namespace forkguard::cli {

// Writes the trace to `sink` piece by piece, as its events are made.
using TraceSink = std::function<void(std::string_view)>;
void RenderTrace(const JobReport& r, const Timeline& t, const TraceSink& sink);

// The whole trace as one string (small jobs, tests).
std::string RenderTrace(const JobReport& r, const Timeline& t);

}  // namespace forkguard::cli
