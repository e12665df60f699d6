// refloader: the reference loader's command line. With no arguments it runs a demo on
// generated data; `make-dataset`, `run` and `memcpy-bandwidth` drive loader/ directly
// (loader_commands.cc), `serve`, `consume` and `demo` put rdma/ behind it
// (rdma_commands.cc). Every command parses its options with flags/ (one table of rows each,
// which also makes its part of --help) and reports a bad command line the same way: exit
// status 2.
#include <stdio.h>
#include <string.h>

#include <exception>
#include <string>

#include "flags/flags.h"
#include "refloader/commands.h"

namespace {

using forkguard::refloader::Command;

const char kHeader[] =
    "refloader - forkguard's reference data loader: workers are forked before any RDMA\n"
    "initialization, build batches in shared memory, and deliver every sample exactly once\n"
    "per epoch, in sampler order.\n"
    "\n"
    "Usage:\n"
    "  refloader                      demo: generate a dataset in a temp dir, run 2 epochs,\n"
    "                                 print samples/s and MB/s, remove the temp dir\n";
const char kFooter[] =
    "  refloader --help               this text; refloader COMMAND --help: that command's part\n"
    "\n"
    "Sizes and counts take K/M/G. Errors (dead or hung worker, corrupted record) go to stderr\n"
    "and exit status 1; a bad command line exits 2.\n";

void PrintHelp() {
  fputs(kHeader, stdout);
  for (const Command& c : forkguard::refloader::LoaderCommands()) fputs(Help(c).c_str(), stdout);
  fputs(kFooter, stdout);
  printf("\nRDMA subcommands (loader -> rdma/ -> a consumer):\n");
  for (const Command& c : forkguard::refloader::RdmaCommands()) fputs(Help(c).c_str(), stdout);
}

const Command* FindCommand(const char* name) {
  for (const auto* list :
       {&forkguard::refloader::LoaderCommands(), &forkguard::refloader::RdmaCommands()})
    for (const Command& c : *list)
      if (!strcmp(c.name, name)) return &c;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  namespace flags = forkguard::flags;
  std::string program = "refloader";
  try {
    if (argc < 2) return forkguard::refloader::DemoWithoutArguments();
    std::string cmd = argv[1];
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      PrintHelp();
      return 0;
    }
    const Command* c = FindCommand(argv[1]);
    if (!c) throw flags::UsageError("unknown command '" + cmd + "'");
    program += " " + cmd;
    // argv[1..] : the command's name is its argv[0].
    flags::Options opts = flags::Options::Parse(argc - 1, argv + 1, c->flags);
    if (flags::PrintHelpIfAsked(opts, [c] { return Help(*c); })) return 0;
    return c->run(opts);
  } catch (const flags::UsageError& e) {
    return flags::ReportUsageError(program, e);
  } catch (const std::invalid_argument& e) {  // a bad value found by loader/ (sampler, size)
    return flags::ReportUsageError(program, e);
  } catch (const std::exception& e) {
    // loader/'s own errors already say "refloader: ..."
    if (!strncmp(e.what(), "refloader", 9))
      fprintf(stderr, "%s\n", e.what());
    else
      fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return 1;
  }
}
