// Placeholder until the transport lands: the subcommands exist and say so.
#include "rdma/refloader_commands.h"

#include <stdio.h>
#include <string.h>

namespace forkguard::rdma {

bool IsRefloaderRdmaCommand(const char* name) {
  return name && (!strcmp(name, "serve") || !strcmp(name, "consume") || !strcmp(name, "demo"));
}

int RunRefloaderRdmaCommand(int, char** argv) {
  fprintf(stderr, "refloader %s: the RDMA transport is not built into this refloader\n", argv[0]);
  return 2;
}

const char* RefloaderRdmaCommandsHelp() { return ""; }

}  // namespace forkguard::rdma
