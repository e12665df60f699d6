#include "tests/audit/log_lines.h"

#include <dirent.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/event_log.h"
#include "cli/json.h"
#include "gtest/gtest.h"
#include "tests/support/event_records.h"

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
    std::ifstream in(dir + "/" + e->d_name, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    // Through the product's reader: each event with its header's fields and its stacks as
    // frames, as one line of JSON.
    std::vector<cli::Note> notes;
    for (const EventRecord& r : DecodeEventRecords(e->d_name, text.str(), {}, &notes))
      lines.push_back(cli::WriteJson(r.json, -1));
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

std::string TextAfter(const std::string& text, const std::string& prefix) {
  size_t at = text.find(prefix);
  if (at == std::string::npos) return "";
  at += prefix.size();
  return text.substr(at, text.find('\n', at) - at);
}

}  // namespace forkguard::test_support
