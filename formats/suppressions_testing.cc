#include "formats/suppressions_testing.h"

namespace forkguard {

ParsedSuppressions ParseSuppressionText(const std::string& text) {
  ParsedSuppressions p;
  p.bad = ParseSuppressions(
      text.data(), text.size(), p.set.get(),
      [](int line, const char* what, void* ctx) {
        static_cast<ParsedSuppressions*>(ctx)->errors.emplace_back(line, what);
      },
      &p);
  return p;
}

}  // namespace forkguard
