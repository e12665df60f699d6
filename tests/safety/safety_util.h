// Helpers for the issue-8 safety tests (tests/safety): run a program with a
// watchdog, read a FORKGUARD_LOG directory strictly, copy artifacts privately.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "cli/json.h"
#include "tests/support/shim_lines.h"

namespace forkguard::safety {

struct Run {
  pid_t pid = -1;
  int status = -1;  // waitpid status; -1 when the program could not start
  bool timed_out = false;
  std::string out;
  std::string err;
  bool Exited(int code) const;
  std::string Describe() const;  // status, stdout and stderr (capped) for failure messages
};

struct RunOptions {
  std::vector<std::string> env;  // NAME=value added to a clean environment
  int watchdog_seconds = 120;    // the whole process group is SIGKILLed after this: a hang fails
  bool keep_env = true;          // start from this test's environment (minus FORKGUARD_*, LD_*)
  uid_t uid = 0;                 // run as this uid/gid when run_as is set
  gid_t gid = 0;
  bool run_as = false;
};

// Runs argv in its own process group, stdin /dev/null, stdout/stderr captured.
Run RunProgram(const std::vector<std::string>& argv, const RunOptions& opt);

// Starts a program without waiting (stdout/stderr to files); Wait collects it.
struct Started {
  pid_t pid = -1;
  std::string out_path, err_path;
};
Started Start(const std::vector<std::string>& argv, const RunOptions& opt, const std::string& tag,
              const std::string& dir);
Run Wait(const Started& s, int watchdog_seconds);

// One event-log line.
struct LogLine {
  std::string file;  // base name
  int line_no = 0;
  cli::JsonValue json;
  std::string Event() const { return json.GetString("event"); }
  int64_t Int(const char* key) const { return json.GetInt(key, -1); }
};

struct LogDir {
  std::vector<std::string> files;              // base names of *.jsonl
  std::vector<LogLine> lines;                  // every line that parsed
  std::vector<std::string> problems;           // torn / unparsable / unterminated lines
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
std::string ReadFile(const std::string& path);
int CountLines(const std::string& text, const std::string& prefix);

// Artifacts, copied once per test process into a private directory (bazel-bin may
// change under a running test).
std::string Shim();  // libforkguard.so
std::string StubLibDir();
// The LD_PRELOAD value: the shim, preceded by the sanitizer runtime this test uses (if any).
std::string Preload();  // directory with the stub libibverbs.so.1 / librdmacm.so.1
std::string Program(const std::string& workspace_relative);

}  // namespace forkguard::safety
