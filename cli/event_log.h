// Reading forkguard event logs (schema `forkguard.event/1`, shim/EVENT_LOG.md).
//
// The reader is built for logs from crashed and killed processes: every line
// is parsed on its own, and anything it cannot use (truncated last line,
// garbage, binary junk, an unknown future schema major version, an unreadable
// file, an empty directory) becomes a Note ("file:line: what") while every
// other line is kept. It never throws and never aborts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/json.h"

namespace forkguard::cli {

inline constexpr std::string_view kEventSchema = "forkguard.event/1";

// One stack frame, innermost first in a Stack. Either native (obj/off/sym) or
// Python (py_*). file/line/func are filled by the Symbolizer.
struct Frame {
  uint64_t ip = 0;
  std::string obj;
  std::optional<uint64_t> off;
  std::string sym;
  std::string symoff;
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

struct Event {
  std::string type;  // "fork", "rdma_init", ... (unknown types are kept)
  int64_t ts_ns = 0;
  int64_t seq = -1;
  int64_t tid = 0;
  int line = 0;    // 1-based line in its file
  JsonValue body;  // the whole JSON object
};

// All events of one process (one file normally; a file whose lines name
// several pids is split so that nothing is attributed to the wrong process).
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
// "-" is standard input.
void ReadLogs(const std::vector<std::string>& paths, LogSet* out);

// A stack from its JSON array (tolerant: bad frames are skipped).
Stack ParseStack(const JsonValue* v);

// "0x1a2b" or an integer -> value.
std::optional<uint64_t> ParseAddress(const JsonValue* v);

}  // namespace forkguard::cli
