// What happened when, per process: RDMA init, registrations, forks (with their
// verdict and the child they made), spawns, and how each process ended. Built
// from the event logs next to the JobReport (same process indexes) for the
// renderers that draw time: HTML (report_html.cc) and Chrome Trace (report_trace.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/event_log.h"
#include "cli/job_report.h"

namespace forkguard::cli {

struct TimelineMark {
  enum class Kind { kRdmaInit, kRegister, kDeregister, kFork, kSpawn, kExec, kSegv, kExit };
  Kind kind = Kind::kFork;
  int64_t ts_ns = 0;
  int64_t tid = 0;
  std::string call;    // ibv_open_device, ibv_reg_mr, posix_spawn, ...; kExec: the program
  std::string device;  // rdma_init
  int64_t bytes = 0;   // registrations
  bool dontfork = false;
  // kFork: the decision and the child it made.
  std::string verdict;  // "hazard" / "clean"
  std::string action;   // proceeded / failed / aborted / off
  std::vector<std::string> reasons;
  int64_t child_pid = -1;
  int child = -1;    // index into JobReport::processes, -1 when the child left no log
  int site_id = -1;  // the JSON report's finding/clean-site id, -1 unknown
  int signal = 0;    // kSegv
};

struct ProcessTimeline {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;  // the last event seen
  // How the process ended, as far as the logs say: "exit", "exit N",
  // "killed by SIGSEGV", "exec'd", or "no exit record" (killed, _exit, still running).
  std::string ending;
  std::vector<TimelineMark> marks;  // in time order; registrations beyond kMaxRegisterMarks folded
  int registrations = 0;            // all of them
  int64_t registered_bytes = 0;
  // Forks: every one counted in bins of `bin_width_ns` from `bins_t0_ns` (ForkHistogram;
  // empty when none), the listed ones (JobReport::fork_list) drawn as marks.
  int forks = 0;
  int forks_listed = 0;
  int64_t bins_t0_ns = 0;
  int64_t bin_width_ns = 0;
  std::vector<int64_t> bin_forks;
  std::vector<int64_t> bin_hazard;
};

struct Timeline {
  static constexpr int kMaxRegisterMarks = 32;  // per process; the rest are counted
  int64_t t0_ns = 0;                            // earliest event of the job
  int64_t t1_ns = 0;                            // latest
  std::vector<ProcessTimeline> processes;       // indexed like JobReport::processes
};

Timeline BuildTimeline(const LogSet& logs, const JobReport& r);

// The id the JSON report gives a fork's site (findings first, then clean sites).
int SiteId(const JobReport& r, const ForkEntry& f);

}  // namespace forkguard::cli
