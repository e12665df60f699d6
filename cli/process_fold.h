// Folding the events of a log into processes (ProcessLog): each line's process by (host,
// job, pid), its events kept or counted, its stacks interned, its forks tallied
// (cli/fork_tally.h). The lines come from cli/log_lines.h, each event's fields from
// cli/event_decode.h.
#pragma once

#include <string>
#include <string_view>

#include "cli/fork_tally.h"
#include "cli/process_log.h"

namespace forkguard::cli {

// Parses the text of one log file named `file_name` into `out`.
void ParseLogText(std::string_view file_name, std::string_view text, LogSet* out);

// Parses the log file open on `fd`, named `path`, into `out`, streamed; `with_logs`: the
// processes with a log of their own (null: unknown, every child kept).
void FoldStream(int fd, const std::string& path, const WithLogs* with_logs, LogSet* out);

}  // namespace forkguard::cli
