#include "cli/testdata/doctor_output.h"

namespace forkguard::cli::testdata {

std::string DoctorLine(const std::string& out, const std::string& name) {
  size_t p = out.find("  " + name + " ");
  if (p == std::string::npos) return "";
  size_t start = out.rfind('\n', p);
  start = start == std::string::npos ? 0 : start + 1;
  return out.substr(start, out.find('\n', p) - start);
}

std::string DoctorBlock(const std::string& out, const std::string& name) {
  std::string first = DoctorLine(out, name);
  if (first.empty()) return "";
  std::string b = first;
  size_t p = out.find(first) + first.size() + 1;
  while (p < out.size() && out.compare(p, 24, std::string(24, ' ')) == 0) {
    size_t e = out.find('\n', p);
    std::string l = out.substr(p, e - p);
    b += " " + l.substr(l.find_first_not_of(' '));
    p = e == std::string::npos ? out.size() : e + 1;
  }
  return b;
}

}  // namespace forkguard::cli::testdata
