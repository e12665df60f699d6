// FixAdvice: the `fix:` line of a hazard message, chosen from the facts at the fork (who
// forked, in Python or C terms; what initialized RDMA; who turned fork support on). Pure
// logic over stacks already captured: no I/O, no dlsym, no allocation.
#pragma once

#include "formats/fix_text.h"
#include "formats/text_buffer.h"
#include "shim/stack/python_stack.h"
#include "shim/verdict/proc_facts.h"

namespace forkguard {

struct FixFacts {
  const PythonStack* fork_py = nullptr;  // may be null or empty
  bool init_in_mpi = false;              // MPI_Init*/PMPI_Init* in the first init's stack
  // ibv_fork_init() turned fork support on, called from a UCX library (libuct*, libucs*,
  // libucp*), and registrations are DONTFORK (the child-segv reason).
  bool fork_init_by_ucx = false;
  bool child_segv = false;
  // Every MADV_DONTFORK range would stay intact without it (ForkVerdict::dontfork_needless):
  // the kernel copies those pinned pages at fork, so fork support only kills children.
  bool fork_support_needless = false;
  bool library_cache_only = false;  // see ForkVerdict::library_cache_only
  bool child_execs = false;         // see ForkVerdict::child_execs
};

// True when `py` (innermost first) has a frame whose file path contains `file_part` (and,
// when `func` is non-null, whose function is `func`).
bool PythonStackHas(const PythonStack* py, const char* file_part, const char* func);

FixRule ChooseFix(const FixFacts& facts);

}  // namespace forkguard
