#include "tests/support/shim_lines.h"

#include <regex>
#include <sstream>

namespace forkguard::test_support {

std::optional<ShimLinePrefix> ParseShimLinePrefix(const std::string& line) {
  static const std::regex kPrefix(R"(^\[([^ \]]+)(?: r(\d+))? (\d+)\] )");
  std::smatch m;
  if (!std::regex_search(line, m, kPrefix)) return std::nullopt;
  ShimLinePrefix p;
  p.host = m[1];
  if (m[2].matched) p.rank = std::stol(m[2]);
  p.pid = std::stol(m[3]);
  p.length = static_cast<size_t>(m[0].length());
  return p;
}

std::string StripShimLinePrefix(const std::string& line) {
  std::optional<ShimLinePrefix> p = ParseShimLinePrefix(line);
  return p ? line.substr(p->length) : line;
}

std::string StripShimLinePrefixes(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) out += StripShimLinePrefix(line) + "\n";
  if (!text.empty() && text.back() != '\n' && !out.empty()) out.pop_back();
  return out;
}

}  // namespace forkguard::test_support
