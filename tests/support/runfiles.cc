#include "tests/support/runfiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace forkguard::testing {

std::string Runfile(const std::string& rel) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  std::string candidates[3];
  if (srcdir && *srcdir) {
    candidates[0] = std::string(srcdir) + "/" + (ws && *ws ? ws : "forkguard") + "/" + rel;
  }
  if (const char* rd = getenv("RUNFILES_DIR"); rd && *rd) {
    candidates[1] = std::string(rd) + "/forkguard/" + rel;
  }
  candidates[2] = rel;  // cwd is the runfiles root of the workspace under Bazel
  for (const auto& c : candidates) {
    if (!c.empty() && access(c.c_str(), F_OK) == 0) {
      char* real = realpath(c.c_str(), nullptr);
      std::string out = real ? real : c;
      free(real);
      return out;
    }
  }
  fprintf(stderr, "forkguard test: runfile '%s' not found (TEST_SRCDIR=%s); add it to data\n",
          rel.c_str(), srcdir ? srcdir : "(unset)");
  abort();
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

}  // namespace forkguard::testing
