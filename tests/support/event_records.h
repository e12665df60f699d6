// Every event of a log as one self-contained JSON object, for tests and their harnesses
// (tests/shim, tests/audit, tests/safety) that read every field a line has. Built on the
// product's reader (cli/log_lines.h), the same lines skipped with the same notes; the
// report itself folds the same decoding into processes instead (cli/process_fold.h).
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "cli/json.h"
#include "cli/process_log.h"

namespace forkguard::test_support {

// One event of a log as one self-contained object (DecodeEventRecords).
struct EventRecord {
  int line = 0;  // 1-based line in its file
  cli::Json json;
};

// Decodes the text of the log file `file_name` line by line as ParseLogText does (the same
// lines skipped, with notes in *notes), and yields each event of either schema with every
// field its line has: a /1 line as it is; a /2 event with its header's fields (but
// start_ns), "ts_ns" (absolute), "tid" (the header's pid when absent), "mr" as "addr",
// "len", "access", "handle", mr_register's "call" and "dontfork" when absent (as the report
// reads them), and each stack its record holds as an array of frames ({"ip","obj","off",
// "sym"}, {"ip"} for a raw address, {"py":{"file","line","func"}}). `symbolize` (may be
// empty) names those stacks' native frames first (Frame::func, written as "sym"). For tools
// and tests that read every field; the report folds the same decoding into processes.
std::vector<EventRecord> DecodeEventRecords(std::string_view file_name, std::string_view text,
                                            const std::function<void(cli::Stack*)>& symbolize,
                                            std::vector<cli::Note>* notes);

}  // namespace forkguard::test_support
