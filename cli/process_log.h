// What a read event log holds: the processes, their events, stacks and fork tallies, and the
// reader's notes. Filled by the reader (cli/event_log.h: log_files, log_lines, event_decode,
// process_fold, fork_tally, exec_join), read by every report.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "formats/event_schema.h"

namespace forkguard::cli {

// A fork's verdict or action its line did not carry.
inline constexpr char kAbsentValue[] = "unknown";
// The report's verdict for the forks of a site a suppression silenced (the shim's at run
// time, or report --suppressions'): not a verdict the log writes.
inline constexpr char kVerdictSuppressed[] = "suppressed";

// One stack frame, innermost first in a Stack. Either native (obj/off/sym) or
// Python (py_*). file/line/func are filled by the Symbolizer.
struct Frame {
  uint64_t ip = 0;
  std::string obj;
  std::optional<uint64_t> off;
  std::string sym;
  std::string symoff;
  std::string build_id;  // /2: of obj, as the process had it loaded ("" when unknown)
  uint64_t base = 0;     // /2: where obj was loaded in the process (0 when unknown)
  bool python = false;
  std::string py_file;
  int64_t py_line = 0;
  std::string py_func;
  // From symbolization (libdw) of obj+off.
  std::string func;
  std::string src_file;
  int src_line = 0;
};
using Stack = std::vector<Frame>;

// A reader diagnostic. `where` is "file:line" or "file".
struct Note {
  std::string where;
  std::string text;
};

// What fix mode (FORKGUARD_MODE=fix) did at forks: a fork's `action` "fixed" and its ranges'
// `fixed` (formats/EVENT_LOG.md). Per fork, then summed over the forks taken in (each sum held
// at the int64 range, whatever the number of forks).
struct FixTally {
  // The memory kinds a range can be of, one bit each in the *_kinds masks; a kind the reader
  // does not know (or none) counts as the last, "unknown".
  static constexpr const char* kKinds[] = {"anonymous", "thp",          "hugetlb",
                                           "shared",    "private-file", "unknown"};
  int64_t forks = 0;  // forks made safe: action "fixed"
  // Of the ranges of those forks: made MADV_DOFORK for the fork (the child got a copy), and
  // made MADV_DONTFORK for it (the child had no mapping there). Bytes are the ranges' lengths.
  int64_t copied_ranges = 0;
  int64_t copied_bytes = 0;
  int64_t withheld_ranges = 0;
  int64_t withheld_bytes = 0;
  unsigned copied_kinds = 0;  // bit i: kKinds[i]
  unsigned withheld_kinds = 0;
  // Ranges of any fork (fixed or not: a withhold that failed fails the fork) whose madvise
  // failed: left as they were.
  int64_t failed_ranges = 0;
  bool empty() const { return forks == 0 && failed_ranges == 0; }
  void Take(const FixTally& o);
  // The names of the kinds in `mask`, in kKinds order.
  static std::vector<std::string> KindNames(unsigned mask);
};

// The typed records of the events the reader decodes, one struct per record type, each
// field with one meaning (formats/EVENT_LOG.md names the keys they come from). Defaults when
// a key is absent or mistyped: a bad field never drops the line. Stacks are indices into
// ProcessLog::stacks, -1 when absent.
//
// Adding a key the report reads touches four places, each checked by a test:
//   1. formats/event_schema.h: the key in FORKGUARD_EVENT_KEYS and its record's row of
//      FORKGUARD_RECORD_KEYS (or FORKGUARD_OBJECT_KEYS for a key inside an object);
//   2. docs/event-schema.json: the key in its record's properties
//      (//cli:event_schema_test: 1 and 2 name the same keys);
//   3. the field in its record's struct below;
//   4. its decoding in the record's Decode function in cli/event_decode.cc, which reads only
//      keys that 1 places in the record (checked when it compiles), and
//      //cli:event_decode_test (EveryRecordDecodesItsKeys, EveryForkKeyDecodes), which
//      reads every key of every record from a line and checks each field.
// A new record type: its struct (with its kType) in Event::Record, its Decode function in
// cli/event_decode.cc (DecodeEvent finds it by kType), and its line in that test.

// The program a process runs, as it started.
struct ProcessStart {
  static constexpr schema::EventType kType = schema::EventType::kProcessStart;
  std::string exe;
  std::string mode;
  std::vector<std::string> argv;  // at most 64
};

// A process's exit.
struct ProcessExit {
  static constexpr schema::EventType kType = schema::EventType::kProcessExit;
  std::optional<int64_t> status;
};

// The process's first RDMA use.
struct RdmaInit {
  static constexpr schema::EventType kType = schema::EventType::kRdmaInit;
  std::string call;  // "?" when absent
  std::string device;
  int stack = -1;
};

// One fork decision. Tallied per site as it is read (cli/fork_tally.h), never kept in
// ProcessLog::events, so it is not one of Event::Record's types (it would size every kept
// event): DecodeFork fills it, reused from fork line to fork line.
struct Fork {
  static constexpr schema::EventType kType = schema::EventType::kFork;
  // The RDMA init the fork saw (its `init` object).
  struct Init {
    std::string call;  // "?" when the init object has none
    std::string device;
    int64_t age_ms = -1;
    int stack = -1;
  };
  std::string verdict;  // "unknown" when absent
  std::string action;   // "unknown" when absent
  std::string site;
  std::string via;
  std::string fix;                   // the shim's fix rule ("dataloader", ...), "" when absent
  std::string fix_library;           // who it names: held_by, or fork_support.by
  std::string errno_text;            // when action is failed or refused
  std::string suppressed;            // the suppression entry that silenced it (the shim's)
  std::vector<std::string> reasons;  // at most 16
  int stack = -1;                    // the fork's call stack
  std::optional<Init> init;
  // Its registered ranges: how many, their bytes, how many are MADV_DONTFORK.
  int ranges = 0;
  int64_t range_bytes = 0;
  int dontfork_ranges = 0;
  int64_t threads = 0;
  std::optional<bool> kernel_cof;
  FixTally fix_tally;  // what fix mode did at this fork (forks: 1 when its action is "fixed")
};

// The child of the newest fork without one.
struct ForkChild {
  static constexpr schema::EventType kType = schema::EventType::kForkChild;
  int64_t child_pid = -1;
};

// A posix_spawn, posix_spawnp or vfork.
struct Spawn {
  static constexpr schema::EventType kType = schema::EventType::kSpawn;
  std::string call;
  int64_t child_pid = -1;  // -1 for vfork (logged before the call) and a failed spawn
};

// A child of a hazardous fork exec'd: it is benign.
struct ChildExec {
  static constexpr schema::EventType kType = schema::EventType::kChildExec;
  std::string path;  // the program it exec'd
};

// A forked child died of SIGSEGV in a range its parent registered.
struct ChildSegv {
  static constexpr schema::EventType kType = schema::EventType::kChildSegv;
  int signal = 11;
  std::optional<uint64_t> addr;
  std::optional<uint64_t> range_addr;  // the registered range it fell in
  std::optional<uint64_t> range_len;
  std::string call;    // the call that registered the range
  int reg_stack = -1;  // where it was registered
};

// The shim's words about itself (a `note` record).
struct NoteRecord {
  static constexpr schema::EventType kType = schema::EventType::kNote;
  std::string text;
};

// A program exec'd without the shim.
struct UnwatchedExec {
  static constexpr schema::EventType kType = schema::EventType::kUnwatchedExec;
  std::string path;               // the program, as exec'd (resolved along PATH)
  std::string exec_by;            // the watched program that exec'd it
  std::vector<std::string> why;   // preload-removed, static, setuid (at most 16)
  std::optional<bool> held_rdma;  // whether the process held RDMA state when it exec'd
};

// One decoded line: the fields every line has, and the typed record of its type (none for a
// type without fields the report reads, or one this forkguard does not know). Decoded once,
// straight from simdjson; nothing keeps the JSON text.
struct Event {
  using Record = std::variant<std::monostate, ProcessStart, ProcessExit, RdmaInit, ForkChild, Spawn,
                              ChildExec, ChildSegv, NoteRecord, UnwatchedExec>;

  std::string type;  // "fork", "rdma_init", ... (unknown types are kept)
  schema::EventType kind = schema::EventType::kCount;  // of `type`; kCount: unknown
  int64_t ts_ns = 0;
  int64_t seq = -1;
  int64_t tid = 0;
  int line = 0;  // 1-based line in its file
  Record record;

  // The record when it is a T, else null: `if (const auto* s = e.As<ChildSegv>())`.
  template <typename T>
  const T* As() const {
    return std::get_if<T>(&record);
  }
  template <typename T>
  T* As() {
    return std::get_if<T>(&record);
  }
};

// The first registrations of a process, for timelines (bounded: the rest are counted).
struct RegistrationSample {
  int64_t ts_ns = 0;
  int64_t tid = 0;
  int64_t len = 0;
  bool dontfork = false;
  std::string call;
};

// What a process did, in counts, whatever the events kept: bounded per process
// (a timeline summary for renderers; see ProcessLog::events for what is kept).
struct ProcessSummary {
  static constexpr size_t kMaxRegistrationSamples = 32;
  static constexpr size_t kMaxCountedTypes = 32;        // the rest count as "other"
  std::map<std::string, int64_t, std::less<>> counts;   // event type -> lines (first 32 types)
  int64_t lines = 0;                                    // lines used, of every type
  std::vector<RegistrationSample> first_registrations;  // at most kMaxRegistrationSamples
  int64_t last_ts_ns = 0;
  int64_t rdma_init_ts_ns = 0;  // first rdma_init, 0 when none
  // Registrations: mr_register lines plus the counts of mr_counts lines (the shim writes a
  // line for the first registration at a site and counts the others), and their bytes.
  int64_t registrations = 0;
  int64_t registered_bytes = 0;
  int64_t counted_registrations = 0;  // of them, from mr_counts
  int64_t deregistrations = 0;        // mr_counts' deregs, and older files' mr_deregister lines
  // The process wrote process_exit (or child_exec: it exec'd): the counts are complete. A
  // process killed (or ending in _exit) may have counted registrations it never wrote: its
  // totals are lower bounds ("at least N").
  bool counts_final = false;
  // Adds `n` lines of `type` to `counts`.
  void CountType(std::string_view type, int64_t n);
};

// The registered ranges at a fork, worst case over the forks taken in: the fork with the most
// bytes (then the most ranges), the most threads, and the kernel's copy-on-fork answer of the
// last fork that gave one. A site's forks, and a group's sites, merge by the same rule.
struct ForkRangesAtWorst {
  int max_ranges = 0;
  int64_t max_range_bytes = 0;
  int dontfork_ranges = 0;
  int64_t max_threads = 0;
  std::optional<bool> kernel_cof;
  // Takes one fork's figures (or a site's worst) in.
  void Take(int ranges, int64_t range_bytes, int dontfork, int64_t threads,
            std::optional<bool> cof);
};

// The forks of one process at one call site with one verdict (same `site` hash, or the
// same stack when the hash is absent), every count exact whatever the number of forks.
struct ForkSite : ForkRangesAtWorst {
  std::string verdict;  // "hazard" / "clean" / "unknown"
  std::string site;     // the shim's hash, "" when absent
  int stack = -1;       // of the first fork here (ProcessLog::stacks)
  // The suppression entry that silenced the forks here ("" when none): the shim's at run
  // time (its forks are a site of their own), or report --suppressions' (ApplySuppressions).
  std::string suppressed;
  int64_t count = 0;
  int64_t hazard = 0;  // forks whose verdict is "hazard" (count, or 0)
  int64_t first_ts_ns = 0;
  int64_t last_ts_ns = 0;
  int64_t children = 0;                    // fork_child lines that name a child of a fork here
  std::map<std::string, int64_t> reasons;  // reason -> forks with it
  std::map<std::string, int64_t> actions;  // proceeded/failed/aborted/fixed/off -> forks
  std::map<std::string, int64_t> via;
  std::string fix;  // of the first fork here that named one
  std::string fix_library;
  std::vector<std::string> errnos;  // distinct, when action is failed (at most 16)
  FixTally fix_tally;               // what fix mode did at the forks here, summed
  // RDMA init as the forks saw it: the first fork with one; ages over all.
  bool has_init = false;
  std::string init_call;
  std::string init_device;
  int init_stack = -1;
  int64_t min_age_ms = -1;
  int64_t max_age_ms = -1;
};

// One fork decision kept individually (ProcessLog::fork_sample).
struct ForkSample {
  int64_t ts_ns = 0;
  int64_t tid = 0;
  int line = 0;
  int site = -1;        // index into ProcessLog::fork_sites
  int64_t ordinal = 0;  // 0 for the process's first fork
  std::string action;
  std::vector<std::string> reasons;
  int64_t child_pid = -1;  // from its fork_child line, -1 when none
};

// A fork_child line kept individually: its child has a log of its own (or, when the reader
// cannot tell which children have one, every child).
struct ChildLink {
  int64_t child_pid = -1;
  int site = -1;  // index into ProcessLog::fork_sites
  int64_t fork_ts_ns = 0;
};

// Bounds on the numbers the reader takes from a log. Every field of every line is hostile
// input (a shared log root, downloaded artifacts): a line with a value outside these is
// skipped with a note naming its file and line, so no later arithmetic on what is kept can
// overflow.
namespace limits {
inline constexpr int64_t kMaxTsNs = int64_t{1} << 62;   // ns since 1970: until about 2116
inline constexpr int64_t kMaxPid = 4194304;             // the kernel's PID_MAX_LIMIT
inline constexpr int64_t kMaxBytes = int64_t{1} << 50;  // one range or registration: 1 PiB
inline constexpr int64_t kMaxCount = int64_t{1} << 40;  // a count carried by one line
inline constexpr int64_t kMaxRank = int64_t{1} << 31;   // a launcher's rank
}  // namespace limits

// a + b, held at the int64 range: counts summed over any number of lines cannot wrap.
inline int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

// Forks per process over time, for timelines: `bins` counts of equal width from `t0_ns`;
// a fork past the last bin doubles the width (neighbours merge), so memory is fixed and
// every fork is counted.
struct ForkHistogram {
  static constexpr size_t kBins = 64;
  int64_t t0_ns = 0;
  int64_t width_ns = 1000000;   // 1 ms, doubled as needed
  std::vector<int64_t> forks;   // per bin (kBins once the first fork is added)
  std::vector<int64_t> hazard;  // of them, hazardous
  void Add(int64_t ts_ns, bool is_hazard) { Add(ts_ns, 1, is_hazard ? 1 : 0); }
  void Add(int64_t ts_ns, int64_t n, int64_t n_hazard);  // n forks at ts_ns
};

// All events of one process (one file normally; a file whose lines name
// several pids is split so that nothing is attributed to the wrong process).
// `events` keeps every line except the per-registration ones (mr_register,
// mr_deregister, rdma_call, fork_init), which only count in `summary`, and the fork and
// fork_child lines, which are tallied per site in `fork_sites` with a bounded sample
// (`fork_sample`, `child_links`, `fork_bins`): memory grows with processes and distinct
// sites and stacks, not with registrations or forks.
struct ProcessLog {
  // Forks kept individually per process: the first kForkSampleHead and the last
  // kForkSampleTail (all of them when there are at most their sum).
  static constexpr size_t kForkSampleHead = 8;
  static constexpr size_t kForkSampleTail = 8;

  std::string file;
  std::string host;
  int64_t pid = -1;
  int64_t ppid = -1;
  std::string prog;
  bool watcher = false;  // written by forkguard watch (the header's "source"), not the shim
  // forkguard watch, a process in a container: its pid and host name there (-1, "": none).
  int64_t ns_pid = -1;
  std::string ns_host;
  std::optional<int64_t> rank;
  std::optional<int64_t> local_rank;
  std::string job;  // "" when the launcher gave none (logs before the field: also "")
  // The programs this process ran before `prog`, each ended by an `exec` event (its log
  // joined to the next one of the same pid: JoinExecs), oldest first; empty for most.
  struct Exec {
    std::string prog;
    std::string file;
  };
  std::vector<Exec> execs;
  int64_t first_ts_ns = 0;
  std::vector<Event> events;
  std::vector<Stack> stacks;  // distinct stacks of this process, by the records' indices
  ProcessSummary summary;
  // Forks: exact counts per site, a sample in log order, children kept individually.
  std::vector<ForkSite> fork_sites;
  std::vector<ForkSample> fork_sample;
  std::vector<ChildLink> child_links;
  ForkHistogram fork_bins;
  int64_t forks = 0;          // fork lines
  int64_t fork_children = 0;  // fork_child lines
  int64_t first_fork_ns = 0;
  int64_t last_fork_ns = 0;

  const Stack& StackAt(int id) const;  // empty for -1 / out of range
};

struct LogSet {
  std::vector<ProcessLog> processes;
  std::vector<Note> notes;
  int files_read = 0;
  int64_t lines_used = 0;
  int64_t lines_skipped = 0;
};

}  // namespace forkguard::cli
