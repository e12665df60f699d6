#include "tests/support/forked_child.h"

#include <sys/wait.h>
#include <unistd.h>

namespace forkguard::test_support {

ForkedChild RunInForkedChild(const std::function<std::string()>& body) {
  ForkedChild r;
  int p[2];
  if (pipe(p) != 0) return r;
  r.pid = fork();
  if (r.pid == 0) {
    close(p[0]);
    std::string text = body();
    (void)!write(p[1], text.data(), text.size());
    _exit(0);
  }
  close(p[1]);
  if (r.pid < 0) {
    close(p[0]);
    return r;
  }
  char buf[512];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) r.text.append(buf, static_cast<size_t>(n));
  close(p[0]);
  waitpid(r.pid, &r.wait_status, 0);
  return r;
}

}  // namespace forkguard::test_support
