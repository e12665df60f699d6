// Reading forkguard event logs (schemas `forkguard.event/2` and `/1`, formats/EVENT_LOG.md).
// Each line is decoded once with simdjson into a typed Event; files stream
// through a fixed buffer and are read in parallel.
//
// The reader is built for logs from crashed and killed processes: every line
// is parsed on its own, and anything it cannot use (truncated last line,
// garbage, binary junk, an unknown future schema major version, an unreadable
// file, an empty directory) becomes a Note ("file:line: what") while every
// other line is kept. It never throws and never aborts.
//
// What the reports include. The reader's rooms, each with its test beside it:
//   process_log.h    what a read log holds (processes, events, stacks, fork tallies, notes)
//   log_files.h      ReadLogs: the walk, the owner policy, the threads; ReadInputFile
//   log_lines.h      lines: framing, schemas, bounds, the /2 module and stack tables
//   event_fields.h   a line's members by key, tolerant typed lookups, addresses
//   event_decode.h   one event's typed record (a struct per record type) and stacks
//   process_fold.h   ParseLogText: events folded into processes
//   fork_tally.h     forks tallied per site, with a bounded sample
//   exec_join.h      JoinExecs: one pid's logs across exec joined
#pragma once

#include "cli/exec_join.h"
#include "cli/json.h"
#include "cli/log_files.h"
#include "cli/process_fold.h"
#include "cli/process_log.h"
