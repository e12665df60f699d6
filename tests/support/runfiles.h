// Locating a test's data files (built artifacts listed in `data`) through Bazel's runfiles
// library, the same way under `bazel test` and inside the Soft-RoCE guest (scripts/lanes/rdma-lane
// sets the variables Bazel does).
#pragma once

#include <set>
#include <string>

namespace forkguard::test_support {

// Absolute path of a workspace-relative runfile, e.g. "shim/libforkguard.so" (symlinks
// resolved). Aborts the test with a clear message when it does not exist.
std::string Runfile(const std::string& workspace_relative);

// A fresh private directory under TEST_TMPDIR (or /tmp), created 0700.
std::string MakeTempDir(const std::string& prefix);

// The names in a directory (dot files too, not "." and ".."), in order; empty when it cannot be
// read.
std::set<std::string> DirNames(const std::string& dir);

}  // namespace forkguard::test_support
