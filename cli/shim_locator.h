// Where libforkguard.so and libforkguard_audit.so are, for `run` and `doctor`.
#pragma once

#include <string>
#include <vector>

namespace forkguard::cli {

inline constexpr char kPreloadName[] = "libforkguard.so";
inline constexpr char kAuditName[] = "libforkguard_audit.so";

struct ShimLocation {
  std::string preload;                // absolute path, "" when not found
  std::string audit;                  // absolute path, "" when not found
  std::vector<std::string> searched;  // directories tried, in order
};

// Search order: $FORKGUARD_SHIM_DIR alone when set; else, relative to this
// executable, ../lib (installed: PREFIX/bin/forkguard, PREFIX/lib/*.so),
// ../lib/<multiarch>/forkguard (the Debian package: /usr/bin/forkguard,
// /usr/lib/x86_64-linux-gnu/forkguard/*.so), the executable's own directory, its Bazel runfiles
// (…/forkguard.runfiles/ forkguard/shim, $RUNFILES_DIR, $TEST_SRCDIR) and ../shim (bazel-bin/cli ->
// bazel-bin/shim). `argv0` helps when the binary is a runfiles symlink.
ShimLocation LocateShim(const char* argv0);

}  // namespace forkguard::cli
