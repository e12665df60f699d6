// A process that execs is one process: the real shim (LD_PRELOAD, FORKGUARD_LOG) in a shell
// wrapper that execs its program, as `srun wrapper.sh` does, writes one log per program, all
// with the same pid; `forkguard report` joins them by the `exec` event into one process that
// ran several programs. A forked child that execs stays a process of its own.
#include <string>

#include "cli/json.h"
#include "gtest/gtest.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using test_support::ProgramResult;
using test_support::RunProgram;

std::string Forkguard() { return forkguard::test_support::Runfile("cli/forkguard"); }
std::string Shim() { return forkguard::test_support::Runfile("shim/libforkguard.so"); }

// Runs `script` with `sh -c` under the real shim, as rank `rank` of Slurm job 77.
void RunUnderShim(const std::string& dir, const std::string& script, int rank) {
  ProgramResult r = RunProgram({"/bin/sh", "-c", script},
                               {"LD_PRELOAD=" + Shim(), "FORKGUARD_LOG=" + dir, "SLURM_JOB_ID=77",
                                "SLURM_PROCID=" + std::to_string(rank), "FORKGUARD_QUIET=1"});
  ASSERT_EQ(r.status, 0) << r.err;
}

Json Report(const std::string& dir) {
  ProgramResult rep = RunProgram({Forkguard(), "report", "--format", "json", dir});
  EXPECT_EQ(rep.status, 0) << rep.err;
  Json j;
  std::string error;
  EXPECT_TRUE(ParseJson(rep.out, &j, &error)) << error;
  return j;
}

TEST(ReportExec, AWrapperThatExecsIsOneProcessWithTwoPrograms) {
  std::string dir = forkguard::test_support::MakeTempDir("exec-logs");
  // Four ranks, each a wrapper shell that execs the program (here another shell that execs
  // `true`: three programs, one pid).
  for (int rank = 0; rank < 4; ++rank) RunUnderShim(dir, "exec /bin/sh -c 'exec /bin/true'", rank);
  Json j = Report(dir);
  const Json* s = FindMember(j, "summary");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(GetInt(*s, "processes", -1), 4);
  const Json* procs = FindMember(j, "processes");
  ASSERT_TRUE(procs != nullptr && procs->is_array());
  ASSERT_EQ(procs->size(), 4u);
  for (const Json& p : *procs) {
    EXPECT_EQ(GetString(p, "prog"), "true");
    const Json* from = FindMember(p, "exec_from");
    ASSERT_TRUE(from != nullptr && from->is_array()) << WriteJson(p);
    ASSERT_EQ(from->size(), 2u);
    EXPECT_EQ(GetString((*from)[0], "prog"), "sh");
    EXPECT_EQ(GetString((*from)[1], "prog"), "sh");
  }
  ProgramResult text = RunProgram({Forkguard(), "report", dir});
  EXPECT_NE(text.out.find("job 77: 4 processes (4 ranks) on 1 host"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(" true (exec'd from sh from sh) [rank 0]"), std::string::npos)
      << text.out;
}

TEST(ReportExec, AForkedChildThatExecsIsItsOwnProcess) {
  std::string dir = forkguard::test_support::MakeTempDir("fork-exec-logs");
  // The shell forks a subshell that execs `true`; then the shell itself execs `true`.
  RunUnderShim(dir, "(exec /bin/true); exec /bin/true", 0);
  Json j = Report(dir);
  const Json* procs = FindMember(j, "processes");
  ASSERT_TRUE(procs != nullptr && procs->is_array());
  // The shell (joined with the `true` it exec'd) and its child (which ran `true`).
  ASSERT_EQ(procs->size(), 2u) << WriteJson(j);
  int joined = 0;
  for (const Json& p : *procs) {
    EXPECT_EQ(GetString(p, "prog"), "true");
    if (FindMember(p, "exec_from")) ++joined;
  }
  EXPECT_EQ(joined, 1);
  EXPECT_EQ(GetInt(*FindMember(j, "summary"), "forks", -1), 1);
}

}  // namespace
}  // namespace forkguard::cli
