// Test helpers: finding a check's line in `forkguard doctor`'s output.
#pragma once

#include <string>

namespace forkguard::cli::testdata {

// `forkguard doctor` output: the line of check `name` (e.g. "warn  RDMA devices ..."),
// or "" when absent.
std::string DoctorLine(const std::string& out, const std::string& name);

// The check's line and its continuation lines, joined with single spaces.
std::string DoctorBlock(const std::string& out, const std::string& name);

}  // namespace forkguard::cli::testdata
