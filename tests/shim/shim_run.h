// Running tests/shim/fork_after_rdma under libforkguard.so and checking what
// the shim said (stderr, per the message contract) and logged (formats/EVENT_LOG.md).
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
// Each of `texts` somewhere in what the program printed (stdout), and said (stderr, where the
// shim's messages go).
void ExpectPrinted(const ShimRun& run, const std::vector<std::string>& texts);
void ExpectSaid(const ShimRun& run, const std::vector<std::string>& texts);
// Warn-mode hazard with both stacks naming the program's own functions.
void ExpectHazardWarning(const ShimRun& run, const std::vector<std::string>& must_have_reasons,
                         const std::vector<std::string>& must_not_have_reasons);
// The child `child` died of SIGSEGV at `addr`, explained on stderr and in the
// log with the stack that registered the range.
void ExpectChildSegvExplained(const ShimRun& run, pid_t child, uint64_t addr);

// The one `event` line the parent wrote (fork, rdma_init, ...): a failure unless there is
// exactly one, and a null value then.
Json OneEvent(const ShimRun& run, const std::string& event);

// Exit 0 and an inherited-rdma hazard, on stderr and in the parent's one fork event, which
// is returned for the test's own checks.
Json ExpectInheritedRdma(const ShimRun& run);
// A librdmacm program that printed `printed` caught as above: one live cm id, one
// initialization, a well-formed log. Returns the fork event.
Json ExpectRdmacmCaught(const ShimRun& run, const std::string& printed);
// One child made by the posix_spawn-family function `call`: silent, logged as a spawn of
// that child, no hazardous fork.
void ExpectSpawnIsNotAHazard(const ShimRun& run, const std::string& call);
// A forked child that execs /bin/true: exits 0, its child_exec line names the path and
// the parent.
void ExpectForkExecLogged(const ShimRun& run);
// Error mode: the fork failed with EPERM, no child, the program carried on; the message
// says so, and the parent's one fork event is "failed" with errno 1.
void ExpectForkFailedWithEperm(const ShimRun& run);
// One mr_register line per registration the program reported (call and address).
void ExpectOneRegisterLinePerCall(const ShimRun& run);
// Fork support on and the child touched its registered buffer: exit 0, a warning with
// `reasons`, the child's SIGSEGV explained with the registering stack, the parent carried on.
void ExpectChildSegvWarned(const ShimRun& run, const std::vector<std::string>& reasons);
// The child's SIGSEGV in a registered range explained, then the program's own handler ran.
void ExpectChildSegvChained(const ShimRun& run);
// The child touched heap data sharing a page with a registered buffer: SIGSEGV there,
// explained on stderr and in the log with the registering stack.
void ExpectHeapNeighborExplained(const ShimRun& run);

}  // namespace forkguard::test_support
