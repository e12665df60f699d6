// Test helper: run a binary (the forkguard CLI) with extra environment and
// capture its exit status, stdout and stderr.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace forkguard::cli::testdata {

struct CliResult {
  int status = -1;  // exit status, or 128+signal
  std::string out;
  std::string err;
};

// Runs argv[0] with `env` (NAME=VALUE entries) added to this process's
// environment; entries "NAME=" with an empty value remove NAME.
CliResult RunCli(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});

// Starts it without waiting; stdout goes to the returned pipe fd.
pid_t StartCli(const std::vector<std::string>& argv, const std::vector<std::string>& env,
               int* stdout_fd, const std::string& stderr_path);

std::string ReadFileOrEmpty(const std::string& path);

// `forkguard doctor` output: the line of check `name` (e.g. "warn  RDMA devices ..."),
// or "" when absent.
std::string DoctorLine(const std::string& out, const std::string& name);

// The check's line and its continuation lines, joined with single spaces.
std::string DoctorBlock(const std::string& out, const std::string& name);

}  // namespace forkguard::cli::testdata
