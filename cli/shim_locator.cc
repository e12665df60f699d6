#include "cli/shim_locator.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/format.h"

namespace forkguard::cli {
namespace {

std::string Absolute(const std::string& p) {
  char buf[PATH_MAX];
  if (realpath(p.c_str(), buf)) return buf;
  return p;
}

// The Debian package's directory for them: /usr/lib/<multiarch>/forkguard.
#if defined(__x86_64__)
constexpr char kMultiarchLibDir[] = "/../lib/x86_64-linux-gnu/forkguard";
#elif defined(__aarch64__)
constexpr char kMultiarchLibDir[] = "/../lib/aarch64-linux-gnu/forkguard";
#else
constexpr char kMultiarchLibDir[] = "/../lib/forkguard";
#endif

}  // namespace

ShimLocation LocateShim(const char* argv0) {
  ShimLocation loc;
  std::vector<std::string> dirs;
  if (const char* d = getenv("FORKGUARD_SHIM_DIR"); d && *d) {
    dirs.push_back(d);
  } else {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    std::vector<std::string> exes;
    if (n > 0) exes.push_back(std::string(exe, static_cast<size_t>(n)));
    if (argv0 && argv0[0] && std::string(argv0).find('/') != std::string::npos)
      exes.push_back(argv0);
    for (const auto& e : exes) {
      std::string dir = Dirname(e);
      dirs.push_back(dir + "/../lib");
      dirs.push_back(dir + kMultiarchLibDir);
      dirs.push_back(dir);
      dirs.push_back(e + ".runfiles/forkguard/shim");
      dirs.push_back(dir + "/../shim");
    }
    for (const char* var : {"RUNFILES_DIR", "TEST_SRCDIR"})
      if (const char* r = getenv(var); r && *r) dirs.push_back(std::string(r) + "/forkguard/shim");
  }
  for (const auto& raw : dirs) {
    std::string d = Absolute(raw);
    bool seen = false;
    for (const auto& s : loc.searched) seen = seen || s == d;
    if (seen) continue;
    loc.searched.push_back(d);
    std::string p = d + "/" + kPreloadName;
    std::string a = d + "/" + kAuditName;
    if (loc.preload.empty() && access(p.c_str(), R_OK) == 0) loc.preload = Absolute(p);
    if (loc.audit.empty() && access(a.c_str(), R_OK) == 0) loc.audit = Absolute(a);
    if (!loc.preload.empty() && !loc.audit.empty()) break;
  }
  return loc;
}

}  // namespace forkguard::cli
