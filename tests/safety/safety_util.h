// Helpers for the safety tests (tests/safety): read a FORKGUARD_LOG directory strictly,
// copy artifacts privately; programs run through tests/support/run_program.h.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "cli/json.h"
#include "tests/support/run_program.h"
#include "tests/support/shim_lines.h"

namespace forkguard::safety {

// The shared runner (tests/support/run_program.h), named here for the safety tests.
using test_support::ProgramResult;
using test_support::ReadFileOrEmpty;
using test_support::RunOptions;
using test_support::RunProgram;
using test_support::StartedProgram;
using test_support::StartProgramToFiles;
using test_support::WaitForFiles;

// What a safety test's program starts from: the test's environment without the shim's
// variables, killed with its process group after 120 s (a hang fails).
RunOptions SafetyRunOptions();

// One event-log line, read by the product's reader (test_support::DecodeEventRecords): the event
// with its header's fields and its stacks by value.
struct LogLine {
  std::string file;  // base name
  int line_no = 0;
  cli::Json json;
  std::string Event() const { return cli::GetString(json, "event"); }
  int64_t Int(const char* key) const { return cli::GetInt(json, key, -1); }
};

struct LogDir {
  std::vector<std::string> files;              // base names of *.jsonl
  std::vector<LogLine> lines;                  // every event
  std::vector<std::string> problems;           // the reader's notes, unterminated lines
  std::vector<std::string> other_files;        // anything else in the directory
  std::map<std::string, unsigned> file_modes;  // base name -> st_mode & 07777
  std::vector<LogLine> Of(const std::string& event) const;
};

// Strict: every line must be a complete JSON object ending in '\n' (a truncated
// last line is a problem too unless `allow_truncated_last`).
LogDir ReadLogDir(const std::string& dir, bool allow_truncated_last = false);

// A world-readable private directory (not under the test's 0700 parents when
// `world_readable`), removed by the caller with RemoveTree.
std::string MakeDir(const std::string& prefix, bool world_readable);
void RemoveTree(const std::string& path);
// Copies a file (mode kept) into dir; returns the new path.
std::string CopyInto(const std::string& src, const std::string& dir);
int CountLines(const std::string& text, const std::string& prefix);

// Artifacts, copied once per test process into a private directory (bazel-bin may
// change under a running test).
std::string Shim();  // libforkguard.so
std::string StubLibDir();
// The LD_PRELOAD value: the shim, preceded by the sanitizer runtime this test uses (if any).
std::string Preload();  // directory with the stub libibverbs.so.1 / librdmacm.so.1
std::string Program(const std::string& workspace_relative);

}  // namespace forkguard::safety
