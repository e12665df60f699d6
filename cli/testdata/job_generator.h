// Writes the event logs of a synthetic multi-rank job in the shim's format
// (forkguard.event/2: header, module and stack records, events; formats/EVENT_LOG.md), as the
// shim would on a cluster: one file per process, named as the shim names it.
// Used by the report tests (and the JSON schema test) before real logs exist,
// and for jobs too big to run here. Stack frames point at real functions of
// the running binary so that symbolization to file:line can be checked.
#pragma once

#include <cstdint>
#include <string>

namespace forkguard::cli::testdata {

struct JobSpec {
  int ranks = 8;                // rank processes, spread over two hosts
  int procs_per_rank = 8;       // the rank itself + (procs_per_rank - 1) forked workers
  int hazard_ranks = 6;         // ranks 0..hazard_ranks-1 fork their workers after RDMA init
  int segv_children = 3;        // workers of rank 0 killed by SIGSEGV (child_segv)
  bool helper_fork = true;      // rank 1 also fork+execs a helper from another call site
  bool junk = false;            // add a truncated last line and a future-schema line
  std::string job;              // the `job` field of every line ("": none, as before it existed)
  int64_t start_offset_ns = 0;  // a second job on the same hosts and pids starts later
  // Job-scale knobs (scripts/bench report). 0 events: only the events above.
  int hosts = 2;               // ranks spread evenly over this many hosts
  int events_per_process = 0;  // pad every process to this many lines with
                               // mr_register/mr_deregister pairs (stacks like the shim's)
  int sites = 8;               // distinct registration call sites (stacks) in the padding
  // Forks of every process (a DataLoader forking its workers every epoch, 8 an epoch, each
  // child a distinct pid without a log of its own); a rank's pool workers and helper count
  // among them. 0: only the pool workers and the helper.
  int forks_per_process = 0;
};

// What the job contains, computed from the spec (the report must agree).
struct JobTruth {
  int processes = 0;
  int hosts = 0;
  int hazard_forks = 0;        // all hazardous forks
  int worker_site_hazard = 0;  // hazardous forks at the worker-pool call site
  int worker_site_hazard_processes = 0;
  int worker_site_clean = 0;
  int helper_hazard = 0;
  int segv = 0;
  int exec_children = 0;
  int hazard_sites = 0;
  int64_t epoch_forks = 0;  // at the DataLoader site (forks_per_process)
};

// Writes into existing directory `dir`; returns the truth.
JobTruth WriteJob(const std::string& dir, const JobSpec& spec);

// The function whose address the worker-pool fork stack names (for tests).
void StartWorkerPool();

}  // namespace forkguard::cli::testdata
