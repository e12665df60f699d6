// Running a function in a forked child of the test process and getting back what it found:
// for tests of what a forked child may and may not do (the parent's resources refused there).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

namespace forkguard::test_support {

struct ForkedChild {
  pid_t pid = -1;        // -1 when pipe or fork failed
  int wait_status = -1;  // waitpid's
  std::string text;      // what `body` returned
};

// Forks, runs `body` in the child, sends what it returns back over a pipe, exits 0, and waits
// for the child.
ForkedChild RunInForkedChild(const std::function<std::string()>& body);

}  // namespace forkguard::test_support
