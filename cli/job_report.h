// The merged picture of a job: every process, rank and host from a set of
// event logs, the process tree, each fork with its verdict, identical fork call
// sites grouped ("×64"), where RDMA was initialized and which children died.
// Pure analysis: reading is event_log.*, output is report_text, report_json, report_markdown
// (their shared phrases: report_phrases), report_html, report_trace and report_ci.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/event_log.h"
#include "cli/unwatched.h"

namespace forkguard::cli {

class Symbolizer;

struct ProcessNode {
  std::string host;
  int64_t pid = -1;
  int64_t ppid = -1;
  std::string prog;
  std::string exe;
  std::vector<std::string> argv;
  // The programs it ran before `prog` and exec'd away from (one pid, several logs joined).
  std::vector<ProcessLog::Exec> execs;
  std::optional<int64_t> rank;
  std::optional<int64_t> local_rank;
  std::string job;  // "" when unknown
  std::string mode;
  std::string file;
  int64_t start_ns = 0;
  int parent = -1;  // index into JobReport::processes, -1 when not in the logs
  std::vector<int> children;
  int forks = 0;  // exact, like every count here
  int hazard_forks = 0;
  int64_t fixed_forks = 0;    // of them, made safe by fix mode (action "fixed")
  int forks_listed = 0;       // of them in JobReport::fork_list (ProcessLog::fork_sample)
  int64_t fork_children = 0;  // fork_child lines (children forked that the parent saw)
  int64_t first_fork_ns = 0;  // 0 when no fork
  int64_t last_fork_ns = 0;
  bool rdma_initialized = false;
  bool exec_after_fork = false;  // a child_exec event: benign
  bool died_segv = false;        // a child_segv event
  std::optional<int64_t> exit_status;
  bool exited = false;  // has a process_exit event
  // Registrations, exact when the process exited or exec'd; otherwise a lower bound (the
  // shim counts repeat registrations and writes the counts with its next line).
  int64_t registrations = 0;
  bool registrations_at_least = false;
};

// Identical fork call sites (same `site` hash, or same stack when the hash is
// absent) with the same verdict, merged over all processes.
struct ForkGroup : ForkRangesAtWorst {  // the ranges: worst case over the group
  std::string key;
  std::string job;  // groups never merge across jobs
  std::string site;
  std::string verdict;                 // "hazard" / "clean"
  std::map<std::string, int> reasons;  // reason -> forks with it
  std::map<std::string, int> actions;  // proceeded/failed/aborted/fixed/off -> forks
  std::map<std::string, int> via;
  int count = 0;
  std::set<int> processes;
  std::set<int64_t> ranks;
  std::set<std::string> hosts;
  Stack stack;  // of the first fork seen
  // RDMA init as the fork saw it (first fork of the group that had one).
  std::string init_call;
  std::string init_device;
  Stack init_stack;
  int64_t min_age_ms = -1;
  int64_t max_age_ms = -1;
  int children_forked = 0;
  int children_segv = 0;
  int children_exec = 0;
  std::vector<std::string> errnos;  // when action is failed
  FixTally fix_tally;               // what fix mode did at the group's forks
  // The shim's fix rule for this site (first fork of the group that named one).
  std::string fix_rule;
  std::string fix_library;
};

// Identical RDMA initialization sites (same call + device + stack).
struct InitSite {
  std::string job;
  std::string call;
  std::string device;
  Stack stack;
  int count = 0;
  std::set<int> processes;
  std::set<int64_t> ranks;
};

struct ChildDeath {
  int process = -1;  // the child that died
  int parent = -1;
  int group = -1;  // index into hazard_groups of the fork that made it, -1 unknown
  int signal = 0;
  std::optional<uint64_t> addr;
  std::optional<uint64_t> range_addr;
  std::optional<uint64_t> range_len;
  std::string call;  // the registering call, e.g. "ibv_reg_mr"
  Stack reg_stack;
};

// One fork decision of the sample (ProcessLog::fork_sample: every fork of a process
// that made at most kForkSampleHead + kForkSampleTail), in log order per process.
struct ForkEntry {
  int process = -1;
  int64_t ts_ns = 0;
  int64_t tid = 0;
  int line = 0;  // in the process's log
  std::string verdict;
  std::string action;
  std::vector<std::string> reasons;
  int64_t child_pid = -1;  // from fork_child, -1 when unknown
  bool hazard = false;     // group indexes hazard_groups when true, else clean_groups
  int group = -1;
};

// One job's part of the logs (processes with the same `job` field; "" for none).
struct JobSummary {
  std::string job;
  int processes = 0;
  std::set<std::string> hosts;
  std::set<int64_t> ranks;
  int64_t forks = 0;
  int64_t hazard_forks = 0;
  int hazard_sites = 0;
};

// One suppression entry's use in the logs (cli/report_suppressions.h).
struct SuppressionUse {
  int line = 0;                 // in the suppression file; 0: named only by the shim's log
  std::string text;             // canonical entry text
  int64_t forks = 0;            // forks it silenced
  std::set<std::string> sites;  // group keys of those forks
};

struct JobReport {
  std::vector<ProcessNode> processes;
  std::vector<JobSummary> jobs;          // by job id; "" (no id) first
  std::vector<ForkGroup> hazard_groups;  // most forks first
  std::vector<ForkGroup> clean_groups;
  // Hazardous forks a suppression silenced (verdict "suppressed": by the shim at run time or
  // by report --suppressions), grouped like the others.
  std::vector<ForkGroup> suppressed_groups;
  std::vector<InitSite> inits;
  std::vector<ChildDeath> deaths;
  std::vector<ForkEntry> fork_list;  // the sampled forks, by process (all of small jobs)
  std::vector<Note> notes;
  std::vector<std::string> shim_notes;  // distinct `note` event texts
  std::set<std::string> hosts;
  std::set<int64_t> ranks;
  int files_read = 0;
  int64_t lines_used = 0;
  int64_t lines_skipped = 0;
  int64_t forks = 0;
  int64_t hazard_forks = 0;
  int64_t suppressed_forks = 0;
  // What fix mode did, over every fork: fix_tally.forks were made safe (still counted in
  // hazard_forks: their verdict stands, and inherited-rdma is not something fix changes).
  FixTally fix_tally;
  int64_t fork_children = 0;  // fork_child lines
  int64_t spawns = 0;
  // Set by the report command, not by BuildJobReport: the suppression file's entries with
  // their use in this report, and, with a baseline, which hazard groups it lacks.
  std::string suppressions_file;
  std::vector<SuppressionUse> suppressions;
  std::string baseline_file;
  std::vector<bool> hazard_new;  // by hazard_groups index; empty without a baseline
  // The run's processes that ran without the shim (FindUnwatched), for JSON and HTML.
  std::vector<UnwatchedProcess> unwatched;
};

// Builds the report; `symbolizer` may be null (no file:line).
JobReport BuildJobReport(const LogSet& logs, Symbolizer* symbolizer);

// A short human name of a reason ("child-segv" -> what it means).
std::string ExplainReason(const std::string& reason);

// "rank 3", "ranks 0-7", "ranks 0-3, 8, 10-11": runs of consecutive ranks, two in a row as
// "4, 5". Past `max_runs` runs the rest is counted: "ranks 0-3, 8 and 1000 more", and with
// max_runs 1, "rank 7 and 1023 more". "rank" when one rank is named, else "ranks".
std::string FormatRanks(const std::set<int64_t>& ranks, int max_runs = 6);

// The job ids in the logs, sorted ("" for processes without one, first).
std::vector<std::string> JobIds(const LogSet& logs);

// Every job's processes, moved out of `logs` (no copy of the events), in JobIds order; the
// reader's notes and counts go with the first.
std::vector<LogSet> SplitByJob(LogSet logs);

}  // namespace forkguard::cli
