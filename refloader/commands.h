// refloader's subcommands, one entry each: its name, its getopt_long table, its part of
// `refloader --help`, and the function that runs it. main.cc dispatches on them;
// refloader_cli_test checks every help text against its table.
//   loader_commands.cc  make-dataset, run, memcpy-bandwidth (loader/ only)
//   rdma_commands.cc    serve, consume, demo (loader/ -> rdma/ -> a consumer)
#pragma once

#include <getopt.h>
#include <time.h>

#include <vector>

#include "flags/flags.h"

namespace forkguard::refloader {

struct Command {
  const char* name;
  const option* long_opts;  // one getopt_long table per command, ending in {}
  const char* help;         // its section of `refloader --help` (and of `refloader NAME --help`)
  int (*run)(const flags::Options&);  // returns the exit status; throws UsageError
};

const std::vector<Command>& LoaderCommands();
const std::vector<Command>& RdmaCommands();

// Seconds on the monotonic clock, for the commands' timings.
inline double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// `refloader` with no arguments: make a dataset in a temp dir, run 2 epochs, remove it.
int DemoWithoutArguments();

}  // namespace forkguard::refloader
