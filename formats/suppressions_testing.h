// For tests of suppression files: a text parsed by ParseSuppressions with every error kept.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "formats/suppressions.h"

namespace forkguard {

struct ParsedSuppressions {
  std::unique_ptr<SuppressionSet> set = std::make_unique<SuppressionSet>();
  std::vector<std::pair<int, std::string>> errors;  // line, text
  int bad = 0;                                      // ParseSuppressions' result
};

ParsedSuppressions ParseSuppressionText(const std::string& text);

}  // namespace forkguard
