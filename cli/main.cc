// forkguard: run a program under the fork/RDMA shim, report on event logs,
// check a machine. See `forkguard --help`.
#include <cstdio>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "flags/flags.h"

namespace forkguard::cli {

const char kMainHelp[] = R"(NAME
    forkguard - find, explain and stop fork() after RDMA initialization

SYNOPSIS
    forkguard run [--mode warn|error|abort|fix|off] [--log DIR] [--fail-on hazard]
                  [--suppressions FILE] [--require-watched] -- CMD...
    forkguard report [--format text|json|markdown|html|trace|sarif|junit|github]
                     [--fail-on hazard] [--suppressions FILE]
                     [--baseline OLD.json --fail-on new-hazard] LOG_DIR_OR_FILE...
    forkguard doctor
    forkguard ps [--format text|json]
    forkguard probe [--system] [--json] [--quiet]
    forkguard watch --log DIR [--enforce off|memory|all] [--ready-file FILE]
    forkguard help [COMMAND] | --help | --version

DESCRIPTION
    A process that has opened an RDMA device and registered memory must not
    fork: the child is killed by SIGSEGV when it touches registered memory
    (fork support on), the parent's buffers are silently corrupted (fork support
    off, a kernel that does not copy pinned pages of that memory kind at fork),
    and the child inherits RDMA resources it
    can never use. forkguard preloads libforkguard.so into a program, decides at
    each fork whether it is a hazard, warns (or fails the fork, aborts, or
    makes the fork safe per registered range: --mode fix), logs
    every decision, and explains it: where RDMA was initialized and where fork
    was called.

COMMANDS
    run      run a program under the shim and print the report of its run
    report   merge the event logs of many processes, ranks and hosts
    doctor   check devices, kernel, rdma-core, limits and the shim itself
    ps       the processes on this node that hold RDMA state, and what a fork
             would do to each now (no shim, no root needed)
    probe    measure what this kernel does to pinned pages at fork (once per
             boot; --system: as root, for every process of the boot)
    watch    judge every fork on this node in the kernel (BPF, root): static,
             set-user-ID and container programs too; --enforce refuses the
             harmful ones

    `forkguard COMMAND --help` describes each command and its exit statuses.

EXIT STATUS
    0 success; 1 doctor found a failing check (ps: the RDMA netlink dump
    failed; probe --system: the system cache was not written); 2 bad command
    line;
    3 --fail-on hazard saw a hazardous fork (new-hazard: one the baseline lacks);
    125 forkguard itself failed;
    run also exits with the program's status (128+N when killed by signal N),
    126 when it cannot be executed, 127 when it is not found.
)";

namespace {

int Main(int argc, char** argv) {
  if (argc < 2) {
    fputs(kMainHelp, stderr);
    return kExitUsage;
  }
  std::string cmd = argv[1];
  if (cmd == "--version" || cmd == "-V" || cmd == "version") {
    printf("forkguard %s (event schema forkguard.event/1, report schema forkguard.report/1)\n",
           kVersion);
    return kExitOk;
  }
  if (cmd == "-h" || cmd == "--help") {
    fputs(kMainHelp, stdout);
    return kExitOk;
  }
  if (cmd == "help") {
    std::string topic = argc > 2 ? argv[2] : "";
    std::string text = topic == "run"      ? RunHelp()
                       : topic == "report" ? ReportHelp()
                       : topic == "doctor" ? DoctorHelp()
                       : topic == "ps"     ? PsHelp()
                       : topic == "probe"  ? ProbeHelp()
                       : topic == "watch"  ? WatchHelp()
                                           : kMainHelp;
    fputs(text.c_str(), stdout);
    return kExitOk;
  }
  // The command's arguments: its name is their argv[0].
  std::string program = "forkguard";
  try {
    if (cmd == "run" || cmd == "report" || cmd == "doctor" || cmd == "ps" || cmd == "probe" ||
        cmd == "watch") {
      program += " " + cmd;
    }
    if (cmd == "run") return RunMain(argc - 1, argv + 1, argv[0]);
    if (cmd == "report") return ReportMain(argc - 1, argv + 1);
    if (cmd == "doctor") return DoctorMain(argc - 1, argv + 1, argv[0]);
    if (cmd == "ps") return PsMain(argc - 1, argv + 1);
    if (cmd == "probe") return ProbeMain(argc - 1, argv + 1);
    if (cmd == "watch") return WatchMain(argc - 1, argv + 1);
    throw flags::UsageError("unknown command '" + cmd +
                            "' (commands: run, report, doctor, ps, probe, watch)");
  } catch (const flags::UsageError& e) {
    return flags::ReportUsageError(program, e);
  }
}

}  // namespace
}  // namespace forkguard::cli

int main(int argc, char** argv) {
  try {
    return forkguard::cli::Main(argc, argv);
  } catch (const std::exception& e) {
    fprintf(stderr, "forkguard: internal error: %s\n", e.what());
  } catch (...) {
    fprintf(stderr, "forkguard: internal error\n");
  }
  return forkguard::cli::kExitInternal;
}
