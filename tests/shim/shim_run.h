// Running tests/shim/fork_after_rdma under libforkguard.so and checking what
// the shim said (stderr, per the message contract) and logged (EVENT_LOG.md).
#pragma once

#include <string>
#include <vector>

#include "tests/shim/shim_harness.h"

namespace forkguard::test_support {

enum class Verbs { kStub, kReal };

struct ShimRun {
  ProgramResult proc;
  ProgramReport report;
  LoggedEvents log;
  std::string log_dir;
};

// Runs a test program (workspace-relative runfile, e.g.
// "tests/shim/fork_after_rdma") with LD_PRELOAD=shim/libforkguard.so,
// FORKGUARD_LOG=<fresh dir>, FORKGUARD_MODE=mode (unset when empty), extra
// NAME=value env entries, and - for Verbs::kStub - LD_LIBRARY_PATH at the stub
// libibverbs/librdmacm.
ShimRun RunUnderShim(const std::string& program, const std::vector<std::string>& args,
                     const std::string& mode, const std::vector<std::string>& env, Verbs verbs);

// Path of (a private copy of) shim/libforkguard.so.
std::string ShimLibrary();

// The same program without the shim (baseline behaviour).
ProgramResult RunWithoutShim(const std::string& program, const std::vector<std::string>& args,
                             const std::vector<std::string>& env, Verbs verbs);

// The parent's hazard message on stderr, cut into the parts of the contract.
struct HazardMessage {
  bool found = false;  // "forkguard: fork after RDMA init in pid <pid> (" seen
  int count = 0;       // how many such headers
  long pid = -1;       // from the first header
  bool verdict_line = false;
  std::vector<std::string> reasons;       // from "verdict: hazard (a, b)"
  std::vector<std::string> reason_lines;  // lines starting with "<reason>:"
  std::string init_section;               // from "RDMA first initialized" up to the next section
  std::string fork_section;               // from "fork called at:" up to the next section
  bool has_fix = false;                   // a "fix:" line
  bool has_error_mode_line = false;       // "mode: error - the fork fails with EPERM"
  bool HasReason(const std::string& r) const;
};
HazardMessage ParseHazardMessage(const std::string& err);

// The child's line "forkguard: child <pid> SIGSEGV at 0x...: inside a range
// registered for RDMA by the parent" (first one for that pid).
struct ChildSegvMessage {
  bool found = false;
  long pid = -1;
  uint64_t addr = 0;
  std::string line;
  std::string rest;  // stderr after that line (the registering stack etc.)
};
ChildSegvMessage FindChildSegvMessage(const std::string& err, long pid);
// Any "forkguard: child <pid> SIGSEGV at 0x...:" line (e.g. "in a page shared
// with a range registered ..." for heap data next to a registered buffer).
ChildSegvMessage FindChildSegvLine(const std::string& err, long pid);

// gtest checks shared by the host and real-device tests. Each adds failures
// with the run's output attached.
void ExpectWellFormedLog(const ShimRun& run);
void ExpectCleanRun(const ShimRun& run);  // exit 0, empty stderr, only clean forks
// Warn-mode hazard with both stacks naming the program's own functions.
void ExpectHazardWarning(const ShimRun& run, const std::vector<std::string>& must_have_reasons,
                         const std::vector<std::string>& must_not_have_reasons);
// The child `child` died of SIGSEGV at `addr`, explained on stderr and in the
// log with the stack that registered the range.
void ExpectChildSegvExplained(const ShimRun& run, pid_t child, uint64_t addr);

}  // namespace forkguard::test_support
