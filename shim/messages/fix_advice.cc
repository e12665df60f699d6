#include "shim/messages/fix_advice.h"

#include <cstring>

namespace forkguard {

bool PythonStackHas(const PythonStack* py, const char* file_part, const char* func) {
  if (py == nullptr) return false;
  for (int i = 0; i < py->depth; ++i) {
    const PythonStack::Frame& f = py->frames[i];
    if (strstr(f.file, file_part) == nullptr) continue;
    if (func == nullptr || strcmp(f.func, func) == 0) return true;
  }
  return false;
}

FixRule ChooseFix(const FixFacts& f) {
  if (f.library_cache_only) return FixRule::kLibraryCache;
  // The cheapest fix of all: fork support UCX turned on and this kernel does not need.
  if (f.fork_init_by_ucx && f.child_segv && f.fork_support_needless) {
    return FixRule::kUcxForkInit;
  }
  bool python = f.fork_py != nullptr && f.fork_py->depth > 0;
  if (f.child_execs && python) return FixRule::kPreexecFn;
  if (python && PythonStackHas(f.fork_py, "torch/utils/data/", nullptr)) {
    return FixRule::kDataLoader;
  }
  if (python && PythonStackHas(f.fork_py, "multiprocessing/popen_fork.py", nullptr)) {
    return FixRule::kMultiprocessingFork;
  }
  if (f.init_in_mpi) return FixRule::kMpiInit;
  return python ? FixRule::kPythonFork : FixRule::kCProgram;
}

}  // namespace forkguard
