// Locating a test's data files (built artifacts listed in `data`) the same way
// under `bazel test` and inside the Soft-RoCE guest (scripts/rdma-lane sets the
// same variables Bazel does).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace forkguard::testing {

// Absolute path of a workspace-relative runfile, e.g. "shim/libforkguard.so".
// Aborts the test with a clear message when it does not exist.
std::string Runfile(const std::string& workspace_relative);

// A fresh private directory under TEST_TMPDIR (or /tmp), created 0700.
std::string MakeTempDir(const std::string& prefix);

// Runs `args` (args[0] the program) through popen (a shell spawned with posix_spawn: this
// process forks nothing) and returns {exit status, or 128 + signal; stdout and stderr}.
std::pair<int, std::string> RunAndCapture(const std::vector<std::string>& args);

}  // namespace forkguard::testing
