// FixText: the words of each `fix:` rule, one home for the shim's hazard message
// (shim/messages/message.cc) and forkguard report (cli/report_phrases.cc), which reads the rule's
// name from the fork event's "fix" field. No I/O, no allocation (async-signal-safe).
#pragma once

#include "formats/text_buffer.h"

namespace forkguard {

// In order of precedence: the first that applies is the advice.
enum class FixRule {
  kLibraryCache,         // only what a library keeps (librdmacm's device context) is live
  kUcxForkInit,          // UCX called ibv_fork_init on a copy-on-fork kernel: UCX_IB_FORK_INIT=n
  kPreexecFn,            // subprocess with preexec_fn: a real fork although the child execs
  kDataLoader,           // torch DataLoader in the Python fork stack
  kMultiprocessingFork,  // multiprocessing's 'fork' start method
  kMpiInit,              // RDMA initialized inside MPI_Init
  kPythonFork,           // os.fork() (or another fork) in Python code
  kCProgram,             // a native program
};
const char* FixRuleName(FixRule rule);  // "library-cache", "ucx-fork-init", ...

// The rule named `name` ("dataloader", ...); false when the name is not a rule.
bool FixRuleFromName(const char* name, FixRule* rule);

// "  fix: ...\n". `library` names the library for kLibraryCache / kUcxForkInit (may be null).
void FormatFix(TextBuffer& out, FixRule rule, const char* library);

}  // namespace forkguard
