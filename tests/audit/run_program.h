// Runs a program with extra environment variables and returns its exit status and
// output, for tests that check what a user would see (stdout, stderr).
#pragma once

#include <string>
#include <vector>

namespace forkguard::testing {

struct ProgramResult {
  int status = -1;         // exit code, or 128 + signal number
  std::string out;         // stdout
  std::string err;         // stderr
  bool timed_out = false;  // killed (SIGKILL) after the timeout: a hang, never a pass
};

// argv[0] must be an absolute path. `env` entries ("NAME=value") are added to (or
// replace) the test's own environment; "NAME=" with nothing after '=' removes NAME.
// timeout_s > 0 bounds the run (a guard against hangs, not a timing check).
ProgramResult RunProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         int timeout_s = 0);

// 1-based number of the first line of file `path` containing `marker`; fails the test
// (returns 0) when absent. Lets tests check reported line numbers without hard-coding.
int LineOf(const std::string& path, const std::string& marker);

// Every line of every file in directory `dir` (the shim's event log, FORKGUARD_LOG).
std::vector<std::string> ReadLogLines(const std::string& dir);

// The lines containing all of `needles`.
std::vector<std::string> LinesWith(const std::vector<std::string>& lines,
                                   const std::vector<std::string>& needles);

// Number of non-overlapping occurrences of needle in haystack.
int CountOf(const std::string& haystack, const std::string& needle);

}  // namespace forkguard::testing
