// The RDMA subcommands of `refloader` (serve, consume, demo), implemented in
// rdma/ so that loader/ stays free of verbs. loader/refloader_main.cc calls
// these when argv[1] names one of them.
#pragma once

namespace forkguard::rdma {

// True if `name` is an RDMA subcommand ("serve", "consume", "demo").
bool IsRefloaderRdmaCommand(const char* name);

// Runs it; argv[0] is the subcommand name. Returns the process exit status.
int RunRefloaderRdmaCommand(int argc, char** argv);

// One line per subcommand for `refloader --help`.
const char* RefloaderRdmaCommandsHelp();

}  // namespace forkguard::rdma
