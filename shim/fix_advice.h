// FixAdvice: the `fix:` line of a hazard message, chosen from the facts at the fork (who
// forked, in Python or C terms; what initialized RDMA; who turned fork support on). Pure
// logic over stacks already captured: no I/O, no dlsym, no allocation.
#pragma once

#include "shim/proc_facts.h"
#include "shim/python_stack.h"
#include "shim/text_buffer.h"

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

struct FixFacts {
  const PythonStack* fork_py = nullptr;  // may be null or empty
  bool init_in_mpi = false;              // MPI_Init*/PMPI_Init* in the first init's stack
  // ibv_fork_init() turned fork support on, called from a UCX library (libuct*, libucs*,
  // libucp*), and registrations are DONTFORK (the child-segv reason).
  bool fork_init_by_ucx = false;
  bool child_segv = false;
  KernelCof kernel_cof = KernelCof::kUnknown;
  bool library_cache_only = false;  // see ForkVerdict::library_cache_only
  bool child_execs = false;         // see ForkVerdict::child_execs
};

// True when `py` (innermost first) has a frame whose file path contains `file_part` (and,
// when `func` is non-null, whose function is `func`).
bool PythonStackHas(const PythonStack* py, const char* file_part, const char* func);

FixRule ChooseFix(const FixFacts& facts);

// "  fix: ...\n". `library` names the library for kLibraryCache / kUcxForkInit (may be null).
void FormatFix(TextBuffer& out, FixRule rule, const char* library);

}  // namespace forkguard
