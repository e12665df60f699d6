#include "tests/audit/log_lines.h"

#include <optional>

#include "tests/support/event_v2.h"

#include <dirent.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "gtest/gtest.h"

namespace forkguard::test_support {

int LineOf(const std::string& path, const std::string& marker) {
  std::ifstream in(path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find(marker) != std::string::npos) return n;
  }
  ADD_FAILURE() << "marker '" << marker << "' not found in " << path;
  return 0;
}

std::vector<std::string> ReadLogLines(const std::string& dir) {
  std::vector<std::string> lines;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    ADD_FAILURE() << "opendir(" << dir << "): " << strerror(errno);
    return lines;
  }
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(dir + "/" + e->d_name);
    // forkguard.event/2: each event with its header's fields and its stacks by value.
    testing_support::EventV2Expander v2;
    for (std::string line; std::getline(in, line);) {
      std::string problem;
      std::optional<std::string> expanded = v2.Expand(line, &problem);
      if (expanded) {
        lines.push_back(*expanded);
      } else if (problem == "not JSON") {
        lines.push_back(line);  // as it is (a truncated last line)
      }
    }
  }
  closedir(d);
  return lines;
}

std::vector<std::string> LinesWith(const std::vector<std::string>& lines,
                                   const std::vector<std::string>& needles) {
  std::vector<std::string> found;
  for (const std::string& line : lines) {
    bool all = true;
    for (const std::string& n : needles) all = all && line.find(n) != std::string::npos;
    if (all) found.push_back(line);
  }
  return found;
}

int CountOf(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

}  // namespace forkguard::test_support
