// Will the program an exec*() starts run without the shim? Asked in the exec wrappers, before
// the real call, so that `forkguard run` can name every process of a run it did not watch:
//   preload-removed  the new environment has no LD_PRELOAD naming libforkguard.so
//                    (env -i, subprocess.run(env={}), a launcher that cleans the environment)
//   static           the target (or its #! interpreter) is an ELF file without PT_INTERP: no
//                    dynamic loader, nothing is preloaded
//   setuid           the target's set-user-ID (set-group-ID) bit makes another user
//                    (group) than the real one effective, on a mount that honours it: it
//                    runs with AT_SECURE, and the loader ignores a preload from outside the
//                    system's library directories (file capabilities are not looked at)
// Async-signal-safe, no allocation (a forked or vforked child calls it): open/read/fstat only.
#pragma once

#include <cstddef>

namespace forkguard {

enum ExecUnwatched : unsigned {
  kExecPreloadRemoved = 1u << 0,
  kExecStatic = 1u << 1,
  kExecSetuid = 1u << 2,
};
// "preload-removed", "static", "setuid".
const char* ExecUnwatchedName(ExecUnwatched reason);

// True when `envp` has an LD_PRELOAD entry naming libforkguard.so.
bool EnvPreloadsShim(char* const envp[]);

// 1: an ELF file with PT_INTERP (dynamically linked); 0: an ELF file without one (static);
// -1: not an ELF file we can read.
int ElfIsDynamic(int fd);

// The reasons (ExecUnwatched bits) the program `file` exec'd with `envp` runs unwatched.
// `search`: execvp-style, a name without '/' is looked up in PATH (from the caller's
// environment). `resolved` (cap bytes) receives the path judged ("" when not found).
unsigned ExecUnwatchedReasons(const char* file, char* const envp[], bool search, char* resolved,
                              size_t cap);

}  // namespace forkguard
