#include "tests/support/runfiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <string>

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

}  // namespace forkguard::test_support
