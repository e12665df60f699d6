#include "tests/support/runfiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
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

std::pair<int, std::string> RunAndCapture(const std::vector<std::string>& args) {
  std::string cmd;
  for (const auto& a : args) cmd += "'" + a + "' ";
  cmd += "2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = p ? pclose(p) : -1;
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out};
}

}  // namespace forkguard::testing
