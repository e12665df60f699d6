// Running a program from a test and capturing what it printed: the one process runner of
// every test. Programs start with posix_spawn (the test process forks nothing, so a test
// that holds RDMA resources or runs under the shim is not itself a hazardous fork), in
// their own process group, stdin /dev/null.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace forkguard::test_support {

struct RunOptions {
  // NAME=value entries added to the environment, replacing a variable of that name;
  // "NAME=" (nothing after '=') removes NAME.
  std::vector<std::string> env;
  enum class BaseEnv {
    kTest,  // the test's own environment
    // The test's own minus what would change the shim: FORKGUARD_*, LD_PRELOAD,
    // LD_LIBRARY_PATH, RDMAV_FORK_SAFE and IBV_FORK_SAFE.
    kTestWithoutShim,
    kEmpty,  // only `env`
  };
  BaseEnv base_env = BaseEnv::kTest;
  // > 0: the program's process group is SIGKILLed after this many seconds and the result
  // says timed_out (a guard against hangs, never a timing check).
  int timeout_s = 0;
  // stderr into the same pipe as stdout (`out`, in the order written; `err` stays empty).
  bool stderr_to_stdout = false;
  // Run as this uid/gid (the test must be root). The program then starts with fork+exec.
  bool run_as = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

// `env` over the test's environment without the shim's variables (BaseEnv::kTestWithoutShim).
RunOptions WithoutShimEnv(std::vector<std::string> env);

struct ProgramResult {
  pid_t pid = -1;
  int wait_status = -1;  // waitpid's; -1 when the program did not start
  int status = -1;       // exit code, or 128 + signal number; -1 when it did not start
  bool timed_out = false;
  std::string out;              // stdout
  std::string err;              // stderr (or why the program did not start)
  bool Exited(int code) const;  // exited with `code` (not killed, not timed out)
  bool KilledBy(int sig) const;
  // Status, stdout and stderr (each capped) for failure messages.
  std::string Describe() const;
};

// Runs argv (argv[0] a path) to its end, stdout and stderr captured.
ProgramResult RunProgram(const std::vector<std::string>& argv, const RunOptions& opt = {});
// The same with `env` over the test's own environment (BaseEnv::kTest) and timeout_s.
ProgramResult RunProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         int timeout_s = 0);

// Starts argv with `in_fd`, `out_fd`, `err_fd` as its stdin, stdout, stderr (-1: /dev/null)
// and returns its pid, or -1 (with the reason in *error when given). The caller keeps its
// own copies of the descriptors, and waits with WaitProgram.
pid_t StartProgram(const std::vector<std::string>& argv, const RunOptions& opt, int in_fd,
                   int out_fd, int err_fd, std::string* error = nullptr);

// Waits for a started program; timeout_s > 0 as in RunOptions. out and err are left empty.
ProgramResult WaitProgram(pid_t pid, int timeout_s = 0);

// A program started with its stdout and stderr in files (the test reads them as they grow,
// or after WaitForFiles).
struct StartedProgram {
  pid_t pid = -1;
  std::string out_path, err_path;
};
StartedProgram StartProgramToFiles(const std::vector<std::string>& argv, const RunOptions& opt,
                                   const std::string& out_path, const std::string& err_path);
ProgramResult WaitForFiles(const StartedProgram& s, int timeout_s = 0);

// The whole file, or "" when it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

}  // namespace forkguard::test_support
