// What the watcher's real-device tests share (cli/watch_rdma_test.cc,
// cli/watch_container_rdma_test.cc): `forkguard watch` started and stopped, the logs it and the
// shim wrote read back as verdicts, the shim's verdicts for the test program.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "cli/json.h"
#include "tests/support/run_program.h"

namespace forkguard::cli {

// The CLI of this build.
std::string Forkguard();

// The watcher, started for one test and stopped with SIGTERM.
class Watcher {
 public:
  explicit Watcher(const std::string& enforce = "off", bool persist = false);
  ~Watcher();
  bool ready() const { return ready_; }
  const std::string& startup_error() const { return startup_error_; }
  const std::string& dir() const { return dir_; }
  test_support::ProgramResult Stop();

 private:
  std::string dir_;
  test_support::StartedProgram started_;
  bool ready_ = false;
  bool stopped_ = false;
  std::string startup_error_;
};

// Every line of every log in `dir` whose file name starts with `prefix`, as JSON, with the
// file's header pid in "_pid".
std::vector<Json> Events(const std::string& dir, const std::string& prefix);

// The action and reasons of the fork events of the processes whose program is `prog`, one
// string each, in the order they were made.
std::vector<std::string> ForkReasons(const std::vector<Json>& events, const std::string& prog);

// cli/testdata/hazard_prog: registers memory and forks; statically linked, and dynamically.
std::string StaticProg();
std::string DynamicProg();

// The shim's verdicts for the dynamic program, with the same environment.
std::vector<std::string> ShimReasons(const std::string& dev, const std::string& fork_safe,
                                     std::string* dir = nullptr);

}  // namespace forkguard::cli
