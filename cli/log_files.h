// Reading log files and directories: the walk (`*.jsonl`, symlinks, each file once), the
// owner policy of a shared log root, the reading threads; and reading one input file named
// on the command line (a suppression file, a baseline).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "cli/process_log.h"

namespace forkguard::cli {

// Reads the whole of `path` (a suppression file, a baseline: inputs named on the command
// line) into *text: a regular file of at most `max_bytes`, opened without blocking, so a FIFO
// or a device named there cannot hang the report. False with *error set otherwise.
inline constexpr size_t kMaxInputBytes = size_t{256} << 20;
bool ReadInputFile(const std::string& path, size_t max_bytes, std::string* text,
                   std::string* error);

// Reads files and directories (recursively, `*.jsonl` files) into `out`;
// "-" is standard input. Files are read `threads` at a time (0: one per core,
// at most 8), each streamed in chunks; the result does not depend on `threads`.
// Fork lines are tallied as they are read (ProcessLog::fork_sites); the children a
// fork_child line names are kept individually only when they have a log of their own, known
// from the file names the shim writes (forkguard.HOST.PID.START.jsonl); when some input is
// named otherwise (or is standard input) every child is kept.
//
// By default symlinks are followed, to files and directories (collected logs are often
// links). With `owner` (a report over a directory other users can write, such as a site's
// shared log root): no symlink is followed, the named paths included, and a file or
// directory not owned by `owner` is skipped with a note.
struct ReadPolicy {
  std::optional<uid_t> owner;
};
void ReadLogs(const std::vector<std::string>& paths, LogSet* out, int threads = 0,
              const ReadPolicy& policy = {});

// A process logged by both the shim and forkguard watch (the same host and pid, or the
// watcher's ns_host and ns_pid: the shim's in a container; the same program as
// /proc/PID/comm cuts it): the watcher's record is dropped, with one note. ReadLogs calls it
// last.
void PreferShimRecords(LogSet* out);

}  // namespace forkguard::cli
