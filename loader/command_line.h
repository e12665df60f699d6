// --name value / --flag parsing for refloader's subcommands (loader/ and rdma/),
// kept deliberately small.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/tfrecord.h"  // ParseSize

namespace forkguard::loader {

struct CommandLine {
  std::map<std::string, std::string> values;
  std::vector<std::string> flags;

  // Parses argv[first..argc): each argument is --FLAG (one of flag_names) or --NAME VALUE
  // (one of value_names); anything else throws std::invalid_argument naming it.
  static CommandLine Parse(int argc, char** argv, int first,
                           const std::vector<std::string>& flag_names,
                           const std::vector<std::string>& value_names) {
    CommandLine a;
    for (int i = first; i < argc; i++) {
      std::string k = argv[i];
      if (k.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + k + "'");
      k = k.substr(2);
      if (Contains(flag_names, k)) {
        a.flags.push_back(k);
        continue;
      }
      if (!Contains(value_names, k)) throw std::invalid_argument("unknown option --" + k);
      if (i + 1 >= argc) throw std::invalid_argument("--" + k + " needs a value");
      a.values[k] = argv[++i];
    }
    return a;
  }

  bool Flag(const std::string& k) const { return Contains(flags, k); }
  std::string Str(const std::string& k, const std::string& def) const {
    auto it = values.find(k);
    return it == values.end() ? def : it->second;
  }
  // Sizes accept K/M/G suffixes (ParseSize).
  uint64_t Num(const std::string& k, uint64_t def) const {
    auto it = values.find(k);
    return it == values.end() ? def : ParseSize(it->second);
  }

 private:
  static bool Contains(const std::vector<std::string>& v, const std::string& k) {
    return std::find(v.begin(), v.end(), k) != v.end();
  }
};

}  // namespace forkguard::loader
