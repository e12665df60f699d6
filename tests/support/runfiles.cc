#include "tests/support/runfiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <system_error>

#include "tools/cpp/runfiles/runfiles.h"

namespace forkguard::test_support {

using bazel::tools::cpp::runfiles::Runfiles;

std::string Runfile(const std::string& rel) {
  static Runfiles* runfiles = [] {
    std::string error;
    Runfiles* r = Runfiles::CreateForTest(&error);
    if (r == nullptr) {
      fprintf(stderr, "forkguard test: no runfiles (%s)\n", error.c_str());
      abort();
    }
    return r;
  }();
  const char* ws = getenv("TEST_WORKSPACE");
  std::string path = runfiles->Rlocation(std::string(ws && *ws ? ws : "forkguard") + "/" + rel);
  if (path.empty() || access(path.c_str(), F_OK) != 0) {
    fprintf(stderr, "forkguard test: runfile '%s' not found (at '%s'); add it to data\n",
            rel.c_str(), path.c_str());
    abort();
  }
  // The real file: tests copy artifacts or compare paths with /proc/PID/maps.
  char* real = realpath(path.c_str(), nullptr);
  std::string out = real ? real : path;
  free(real);
  return out;
}

std::string MakeTempDir(const std::string& prefix) {
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + prefix + ".XXXXXX";
  if (!mkdtemp(tmpl.data())) {
    perror("mkdtemp");
    abort();
  }
  return tmpl;
}

std::set<std::string> DirNames(const std::string& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.insert(it->path().filename().string());
  return names;
}

}  // namespace forkguard::test_support
