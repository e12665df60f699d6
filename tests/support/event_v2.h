// Test-only: turns the lines of a `forkguard.event/2` file back into self-contained event
// objects (every /1 common field, stacks as frame arrays), so that tests written against
// the meaning of an event keep reading it the same way. The file's header, module and stack
// records are consumed; /1 lines pass unchanged.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace forkguard::testing_support {

class EventV2Expander {
 public:
  // The self-contained JSON text of `line`, or nullopt for a record that is not an event
  // (header, module, stack) and for a line that is not JSON (*problem is set then, unless it
  // is just not an object this reader knows).
  std::optional<std::string> Expand(const std::string& line, std::string* problem);

 private:
  struct Module {
    std::string path;
    unsigned long long base = 0;
  };
  bool have_header_ = false;
  std::string header_members_;  // `"host":..,"pid":..,...` (no schema/event)
  long long start_ns_ = 0;
  long long pid_ = 0;
  std::map<long long, Module> modules_;
  std::map<long long, std::string> stacks_;  // id -> `[{"ip":..,"obj":..,"off":..,"sym":..}]`
};

// The name of the function (from .symtab, else .dynsym) of ELF file `path` holding the
// address `off` (relative to the file's first loaded byte); "" when none.
std::string ElfSymbolAt(const std::string& path, unsigned long long off);

}  // namespace forkguard::testing_support
