// refloader's subcommands, one entry each: its name, its usage line, its table of option rows
// (flags/: name, value, default, help), and the function that runs it. main.cc dispatches on
// them and prints each one's part of `refloader --help` from its rows.
//   loader_commands.cc  make-dataset, run, memcpy-bandwidth (loader/ only), and the loader's
//                       option rows (LoaderFlags) that run, serve, consume and demo share
//   rdma_commands.cc    serve, consume, demo (loader/ -> rdma/ -> a consumer)
#pragma once

#include <time.h>

#include <string>
#include <vector>

#include "flags/flags.h"
#include "loader/loader.h"

namespace forkguard::refloader {

struct Command {
  const char* name;
  const char* usage;  // its first lines in `refloader --help` (and `refloader NAME --help`)
  flags::FlagTable flags;
  const char* notes;                  // what --help says after the options ("" for nothing)
  int (*run)(const flags::Options&);  // returns the exit status; throws UsageError
};

// The command's section of `refloader --help`: its usage, its options, its notes.
std::string Help(const Command& c);

const std::vector<Command>& LoaderCommands();
const std::vector<Command>& RdmaCommands();

// The options of loader::LoaderOptions, one row each, defined once for every command that
// starts or feeds a loader; each default is the struct's.
struct LoaderFlags {
  flags::Flag workers, batch_size, sample_bytes, prefetch, slots, timeout_ms, sampler, seed, rank,
      world, no_shuffle, drop_last, no_verify, fork_check;
};
const LoaderFlags& TheLoaderFlags();
// Sets the fields of `o` whose rows the command's table has (given or default); throws
// flags::UsageError for a bad value.
void ApplyLoaderFlags(const flags::Options& a, loader::LoaderOptions* o);

// Seconds on the monotonic clock, for the commands' timings.
inline double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// `refloader` with no arguments: make a dataset in a temp dir, run 2 epochs, remove it.
int DemoWithoutArguments();

}  // namespace forkguard::refloader
