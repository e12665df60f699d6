// Reading forkguard event logs (schemas `forkguard.event/2` and `/1`, shim/EVENT_LOG.md).
// Each line is decoded once with simdjson into a typed Event; files stream
// through a fixed buffer and are read in parallel.
//
// The reader is built for logs from crashed and killed processes: every line
// is parsed on its own, and anything it cannot use (truncated last line,
// garbage, binary junk, an unknown future schema major version, an unreadable
// file, an empty directory) becomes a Note ("file:line: what") while every
// other line is kept. It never throws and never aborts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/json.h"
#include "shim/event_schema.h"

namespace forkguard::cli {

inline constexpr std::string_view kEventSchema = schema::kEventV1;
inline constexpr std::string_view kEventSchemaV2 = schema::kEventV2;

// One stack frame, innermost first in a Stack. Either native (obj/off/sym) or
// Python (py_*). file/line/func are filled by the Symbolizer.
struct Frame {
  uint64_t ip = 0;
  std::string obj;
  std::optional<uint64_t> off;
  std::string sym;
  std::string symoff;
  std::string build_id;  // /2: of obj, as the process had it loaded ("" when unknown)
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

// One decoded line: the common fields, then the fields of the event types the
// report reads (defaults when absent or mistyped; a bad field never drops the
// line). Decoded once, straight from simdjson; nothing keeps the JSON text.
// Adding a field: decode it in cli/event_log.cc DecodeEvent().
struct Event {
  std::string type;  // "fork", "rdma_init", ... (unknown types are kept)
  int64_t ts_ns = 0;
  int64_t seq = -1;
  int64_t tid = 0;
  int line = 0;  // 1-based line in its file

  // process_start
  std::string exe;
  std::string mode;
  std::vector<std::string> argv;  // at most 64
  // process_exit
  std::optional<int64_t> status;
  // rdma_init, child_segv (the registering call), spawn
  std::string call;
  std::string device;  // rdma_init
  // fork: call stack; rdma_init: its stack; child_segv: reg_stack.
  // Index into ProcessLog::stacks, -1 when absent.
  int stack = -1;
  // fork
  std::string verdict;  // "unknown" when absent
  std::string action;   // "unknown" when absent
  std::string site;
  std::string via;
  std::string fix;          // the shim's fix rule ("dataloader", ...), "" when absent
  std::string fix_library;  // who it names: held_by, or fork_support.by
  std::string errno_text;   // when action is failed
  std::string suppressed;   // the suppression entry that silenced it (the shim's, or report's)
  std::vector<std::string> reasons;
  bool has_init = false;
  std::string init_call;  // "?" when the init object has none
  std::string init_device;
  int64_t init_age_ms = -1;
  int init_stack = -1;
  int ranges = 0;
  int64_t range_bytes = 0;
  int dontfork_ranges = 0;
  int64_t threads = 0;
  std::optional<bool> kernel_cof;
  // fork_child, spawn
  int64_t child_pid = -1;
  // child_segv
  int signal = 11;
  std::optional<uint64_t> addr;
  std::optional<uint64_t> range_addr;
  std::optional<uint64_t> range_len;
  // note
  std::string text;
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
  std::map<std::string, int64_t> counts;                // event type -> lines (first 32 types)
  int64_t lines = 0;                                    // lines used, of every type
  std::vector<RegistrationSample> first_registrations;  // at most kMaxRegistrationSamples
  int64_t last_ts_ns = 0;
  int64_t rdma_init_ts_ns = 0;  // first rdma_init, 0 when none
  int64_t registrations = 0;    // mr_register lines
  int64_t registered_bytes = 0;
};

// All events of one process (one file normally; a file whose lines name
// several pids is split so that nothing is attributed to the wrong process).
// `events` keeps every line except the per-registration ones (mr_register,
// mr_deregister, rdma_call, fork_init), which only count in `summary`: memory
// grows with processes, forks and distinct stacks, not with registrations.
struct ProcessLog {
  std::string file;
  std::string host;
  int64_t pid = -1;
  int64_t ppid = -1;
  std::string prog;
  std::optional<int64_t> rank;
  std::optional<int64_t> local_rank;
  std::string job;  // "" when the launcher gave none (logs before the field: also "")
  int64_t first_ts_ns = 0;
  std::vector<Event> events;
  std::vector<Stack> stacks;  // distinct stacks of this process, by Event::stack
  ProcessSummary summary;

  const Stack& StackAt(int id) const;  // empty for -1 / out of range
};

struct LogSet {
  std::vector<ProcessLog> processes;
  std::vector<Note> notes;
  int files_read = 0;
  int64_t lines_used = 0;
  int64_t lines_skipped = 0;
};

// Parses the text of one log file named `file_name` into `out`.
void ParseLogText(std::string_view file_name, std::string_view text, LogSet* out);

// Reads files and directories (recursively, `*.jsonl` files) into `out`;
// "-" is standard input. Files are read `threads` at a time (0: one per core,
// at most 8), each streamed in chunks; the result does not depend on `threads`.
void ReadLogs(const std::vector<std::string>& paths, LogSet* out, int threads = 0);

// "0x1a2b" or an integer -> value.
std::optional<uint64_t> ParseAddress(const JsonValue* v);
std::optional<uint64_t> ParseAddressText(std::string_view s);

}  // namespace forkguard::cli
