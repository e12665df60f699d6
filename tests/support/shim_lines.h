// The shim prefixes every stderr line with "[HOST rRANK PID] " (shim/base/stderr_line.h). Tests
// that look for the shim's wording strip it first.
#pragma once

#include <optional>
#include <string>

namespace forkguard::test_support {

struct ShimLinePrefix {
  std::string host;
  long rank = -1;  // -1: not in the prefix
  long pid = -1;
  size_t length = 0;  // bytes of the prefix, with its trailing space
};

// The prefix at the start of `line`, if there is one.
std::optional<ShimLinePrefix> ParseShimLinePrefix(const std::string& line);

// `line` without the prefix (unchanged when it has none).
std::string StripShimLinePrefix(const std::string& line);

// Every line of `text` stripped.
std::string StripShimLinePrefixes(const std::string& text);

}  // namespace forkguard::test_support
