// The loader's question before it forks its workers: is RDMA already up in this process?
// Asked through forkguard's query API (api/forkguard.h): the shim's own decision when it is
// preloaded (with where RDMA was first initialized), else /proc and RDMA netlink.
#include <cstdio>
#include <string>
#include <utility>

#include "api/forkguard.h"
#include "loader/loader.h"
#include "loader/worker.h"

namespace forkguard::loader {

namespace {

// Each mode's name, once: what ParseForkCheck reads and ForkCheckName writes.
constexpr std::pair<ForkCheck, const char*> kForkCheckNames[] = {
    {ForkCheck::kOff, "off"}, {ForkCheck::kWarn, "warn"}, {ForkCheck::kError, "error"}};

}  // namespace

bool ParseForkCheck(const std::string& text, ForkCheck* out) {
  for (const auto& [mode, name] : kForkCheckNames)
    if (text == name) {
      *out = mode;
      return true;
    }
  return false;
}

const char* ForkCheckName(ForkCheck mode) {
  for (const auto& [m, name] : kForkCheckNames)
    if (m == mode) return name;
  return "?";
}

}  // namespace forkguard::loader

namespace forkguard::loader::internal {

void CheckBeforeForkingWorkers(ForkCheck mode, uint32_t workers) {
  if (mode == ForkCheck::kOff || workers == 0) return;
  forkguard_check_result r{};
  r.size = sizeof(r);
  if (forkguard_fork_check(&r) != 0 || !r.hazard) return;
  std::string what =
      "forking " + std::to_string(workers) + " loader worker(s) now would be a " + r.verdict;
  if (r.init_site[0] != '\0') {
    what += ": RDMA was first initialized by " + std::string(r.init_site);
  } else {
    what += std::string(": RDMA is initialized in this process (") + r.detail +
            "; under forkguard the message names where)";
  }
  if (mode == ForkCheck::kError) {
    throw ForkCheckError("fork check: " + what +
                         ". Start the loader (fork its workers) before RDMA init.");
  }
  fprintf(stderr, "loader: fork check: %s; forking anyway (fork check: warn)\n", what.c_str());
  fflush(stderr);
}

}  // namespace forkguard::loader::internal
