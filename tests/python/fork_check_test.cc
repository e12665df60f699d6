// forkguard's query API (api/forkguard.h) through the Python module, then a real fork in
// the same process: the check's verdict must be the one the shim then prints for the fork.
// The Python check (forkguard.state()/check()), the C API called straight through ctypes
// and the shim's message for the fork must say the same. Host: the stub libibverbs through
// ctypes. FORKGUARD_TEST_RDMA (fork_check_rdma_test): pyverbs on rxe0, where the /proc +
// RDMA netlink answer must agree as well, with the shim and in a process without it.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/audit/log_lines.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"
#ifdef FORKGUARD_TEST_RDMA
#include "tests/support/rdma_device.h"
#endif

namespace forkguard::test_support {
namespace {

std::string Dir(const std::string& path) { return path.substr(0, path.rfind('/')); }

ProgramResult RunScenario(const std::string& scenario, bool shim, const std::string& fork_safe,
                          const std::string& log_dir = "") {
  std::string device = "rxe0";
#ifdef FORKGUARD_TEST_RDMA
  device = RequireRdmaDevice().name;
#endif
  std::vector<std::string> env = {
      "LD_PRELOAD=" + (shim ? Runfile("shim/libforkguard.so") : std::string()),
      "FORKGUARD_CHECK_LIB=" + Runfile("api/libforkguard_check.so"),
      "PYTHONPATH=" + Dir(Dir(Runfile("python/forkguard/__init__.py"))),
      "PYTHONDONTWRITEBYTECODE=1",
      "FORKGUARD_MODE=warn",
      "FORKGUARD_LOG=" + log_dir,
      "RXE_DEV=" + device,
      "RDMAV_FORK_SAFE=" + fork_safe,
      "IBV_FORK_SAFE="};
#ifndef FORKGUARD_TEST_RDMA
  std::string lib = Runfile("tests/stub_ibverbs/lib/libibverbs.so.1");
  env.push_back("LD_LIBRARY_PATH=" + Dir(lib));
  env.push_back("FORKGUARD_TEST_VERBS=ctypes");
#endif
  ProgramResult r = RunProgram(
      {"/usr/bin/python3", Runfile("tests/python/fork_check_scenarios.py"), scenario}, env, 200);
  EXPECT_FALSE(r.timed_out) << scenario << " hung";
  return r;
}

// The shim's verdict for the fork (its "  verdict: ..." line), "clean" when it said nothing.
std::string ShimVerdict(const ProgramResult& r) {
  if (r.err.find("forkguard: fork after RDMA init") == std::string::npos) return "clean";
  return TextAfter(r.err, "  verdict: ");
}

// The verdict `expected` for `scenario` from the Python check and the C API (and the
// shim's own message for the fork); without the shim the library answers from /proc and
// RDMA netlink with the same verdict, and says it has less detail.
void ExpectVerdict(bool shim, const std::string& scenario, const std::string& fork_safe,
                   const std::string& expected) {
  ProgramResult r = RunScenario(scenario, shim, fork_safe);
  const std::string source = shim ? " (shim)" : " (proc)";
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(TextAfter(r.out, "check: "), expected + source) << r.out << r.err;
  EXPECT_EQ(TextAfter(r.out, "c_api: "),
            expected + source + " hazard=" + (expected == "clean" ? "0" : "1"))
      << r.out;
  EXPECT_EQ(TextAfter(r.out, "child: "), "0") << r.out;
#ifdef FORKGUARD_TEST_RDMA
  // What the kernel shows, put through the same rule, says the same.
  EXPECT_EQ(TextAfter(r.out, "proc: "), expected + " (proc)") << r.out << r.err;
#endif
  if (expected == "clean") {
    EXPECT_EQ(TextAfter(r.out, "raises: "), "no") << r.out;
  } else {
    // The error carries the message, whose first line names the process.
    EXPECT_NE(TextAfter(r.out, "raises: ")
                  .find(std::string("ForkAfterRdmaError: forkguard: ") +
                        (shim ? "fork after RDMA init" : "fork check in pid")),
              std::string::npos)
        << r.out;
  }
  if (!shim) {
    EXPECT_NE(TextAfter(r.out, "proc detail: ").find("no shim: from /proc and RDMA netlink"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(TextAfter(r.out, "init_site: "), "") << r.out;  // no sites without the shim
    EXPECT_EQ(r.err.find("forkguard:"), std::string::npos) << r.err;
    return;
  }
  EXPECT_EQ(ShimVerdict(r), expected) << r.out << r.err;
  if (expected == "clean") return;
  // Where RDMA was first initialized, as the shim names it, in Python terms too.
  EXPECT_NE(TextAfter(r.out, "init_site: ").find("ibv_open_device"), std::string::npos) << r.out;
#ifdef FORKGUARD_TEST_RDMA
  int line = LineOf(Runfile("tests/python/fork_check_scenarios.py"), "MARK:init-pyverbs");
  // (ctypes drops the GIL around a call: on the host the shim sees no Python stack at init)
  EXPECT_NE(TextAfter(r.out, "init_site: ")
                .find("fork_check_scenarios.py\", line " + std::to_string(line) + ", in"),
            std::string::npos)
      << r.out;
#endif
  // The check's caller, past the forkguard module's own frames.
  int check_line = LineOf(Runfile("tests/python/fork_check_scenarios.py"), "MARK:check");
  EXPECT_NE(
      TextAfter(r.out, "fork_site: ")
          .find("fork_check_scenarios.py\", line " + std::to_string(check_line) + ", in main"),
      std::string::npos)
      << r.out;
}

TEST(ForkCheck, ContextAndPdInheritedRdma) {
  ExpectVerdict(/*shim=*/true, "pd", "", "hazard (inherited-rdma)");
}

TEST(ForkCheck, RegisteredWithForkSupportChildSegv) {
  ExpectVerdict(/*shim=*/true, "mr", "1", "hazard (child-segv, inherited-rdma)");
}

TEST(ForkCheck, ReleasedIsClean) { ExpectVerdict(/*shim=*/true, "closed", "", "clean"); }

#ifdef FORKGUARD_TEST_RDMA
TEST(ForkCheck, RegisteredWithoutForkSupportInheritedRdma) {
  ExpectVerdict(/*shim=*/true, "mr", "", "hazard (inherited-rdma)");
}
#endif

TEST(ForkCheck, WithoutTheShimTheFallbackSaysSo) {
  ProgramResult r = RunScenario("pd", /*shim=*/false, "");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(TextAfter(r.out, "proc detail: ").find("no shim: from /proc and RDMA netlink"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.err.find("forkguard:"), std::string::npos) << r.err;
#ifdef FORKGUARD_TEST_RDMA
  EXPECT_EQ(TextAfter(r.out, "check: "), "hazard (inherited-rdma) (proc)") << r.out;
  EXPECT_NE(TextAfter(r.out, "raises: ").find("ForkAfterRdmaError: forkguard: fork check in pid"),
            std::string::npos)
      << r.out;
#else
  // The stub opens no device node: nothing the kernel could show.
  EXPECT_EQ(TextAfter(r.out, "check: "), "clean (proc)") << r.out;
#endif
}

#ifdef FORKGUARD_TEST_RDMA
// The same three scenarios in a process without the shim.
TEST(ForkCheckWithoutShim, RegisteredWithoutForkSupportInheritedRdma) {
  ExpectVerdict(/*shim=*/false, "mr", "", "hazard (inherited-rdma)");
}

TEST(ForkCheckWithoutShim, RegisteredWithForkSupportChildSegv) {
  ExpectVerdict(/*shim=*/false, "mr", "1", "hazard (child-segv, inherited-rdma)");
}

TEST(ForkCheckWithoutShim, ReleasedIsClean) {
  ExpectVerdict(/*shim=*/false, "closed", "", "clean");
}
#endif

TEST(ForkCheck, SafeContextWorkersRunWithoutHazard) {
  std::string logs = std::string(getenv("TEST_TMPDIR")) + "/safe-logs";
  ProgramResult r = RunScenario("safe", /*shim=*/true, "1", logs);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(TextAfter(r.out, "context: "), "forkserver") << r.out;
  EXPECT_EQ(TextAfter(r.out, "squares: "), "[1, 4, 9]") << r.out << r.err;
  // No process of the run forked with RDMA state: the shim said nothing, and its log of the
  // run (the trainer, the forkserver it started, the workers) has forks, none hazardous.
  EXPECT_EQ(r.err.find("fork after RDMA init"), std::string::npos) << r.err;
  std::vector<std::string> log = ReadLogLines(logs);
  EXPECT_GE(LinesWith(log, {"\"event\":\"fork\"", "\"verdict\":\"clean\""}).size(), 2u)
      << "the forkserver's forks of the two workers";
  EXPECT_EQ(LinesWith(log, {"\"event\":\"fork\"", "\"verdict\":\"hazard\""}).size(), 0u);
}

}  // namespace
}  // namespace forkguard::test_support
