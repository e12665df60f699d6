// Structured fuzz inputs: a libFuzzer input read as a program (FuzzedDataProvider) that
// writes forkguard event logs (forkguard.event/1 and /2: headers, module and stack records,
// every event type of formats/event_schema.h with its keys) and suppression files, so that a
// few bytes of input reach the report's analysis with well-formed lines carrying hostile
// values: extreme numbers (INT64_MIN/MAX, 2^63, 1e300), long names, control characters,
// invalid UTF-8, deep nesting. The fuzzers: cli/report_fuzzer.cc, cli/suppressions_fuzzer.cc.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <string>
#include <vector>

namespace forkguard::cli::fuzz {

// One generated log file: the name the shim would give it (or another) and its text.
struct LogFile {
  std::string name;
  std::string text;
};

// 1 to 3 files of /1 or /2 lines (rarely another schema), each up to `max_lines` lines.
std::vector<LogFile> GenerateLogs(FuzzedDataProvider* in, int max_lines);

// A suppression file: entries of kind=, frame=, program=, rank= with names the generated
// logs use (so entries match), hostile values, comments, quoting and bad lines.
std::string GenerateSuppressions(FuzzedDataProvider* in, int max_lines);

// A string of the kind the generators write: a name of the schema's vocabulary, or a long,
// control-character, invalid UTF-8, markup or quote-laden one.
std::string GenerateName(FuzzedDataProvider* in);

}  // namespace forkguard::cli::fuzz
