// `forkguard run` on the host, with a stand-in shim (testdata/fake_shim.cc)
// found through FORKGUARD_SHIM_DIR: exit statuses, --fail-on, the program's
// environment, the end-of-run report, the temporary log directory and signal
// forwarding. The real shim on a real device: run_rdma_test.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using test_support::ProgramResult;
using test_support::ReadFileOrEmpty;
using test_support::RunProgram;

std::string Forkguard() { return forkguard::test_support::Runfile("cli/forkguard"); }
std::string FakeShim() {
  return forkguard::test_support::Runfile("cli/testdata/fake_shim/libforkguard.so");
}
std::string ShimDirEnv() {
  std::string s = FakeShim();
  return "FORKGUARD_SHIM_DIR=" + s.substr(0, s.rfind('/'));
}

ProgramResult RunForkguard(const std::vector<std::string>& run_args,
                           std::vector<std::string> env = {}) {
  std::vector<std::string> argv = {Forkguard(), "run"};
  argv.insert(argv.end(), run_args.begin(), run_args.end());
  env.push_back(ShimDirEnv());
  return RunProgram(argv, env);
}

TEST(Run, ExitStatusIsTheProgramsAndTheReportIsPrinted) {
  ProgramResult r = RunForkguard({"--", "/bin/sh", "-c", "(true); exit 7"});
  EXPECT_EQ(r.status, 7) << r.err;
  EXPECT_NE(r.err.find("forkguard: 2 processes on 1 host, 1 fork: 0 hazardous at 0 call sites, "
                       "1 clean"),
            std::string::npos)
      << r.err;
}

// CMD may start without "--": the first argument that is not an option; what follows is its.
TEST(Run, CommandWithoutDashDashKeepsItsOwnOptions) {
  ProgramResult r = RunForkguard({"--fail-on", "never", "/bin/sh", "-c", "exit 6", "--mode", "x"});
  EXPECT_EQ(r.status, 6) << r.err;
  r = RunForkguard({"--", "/bin/sh", "-c", "exit 8", "--", "--help"});
  EXPECT_EQ(r.status, 8) << r.err;
}

// The report's options are report's: every format, --native, --no-symbolize, --threads.
TEST(Run, ReportOptionsAreReportsOwn) {
  ProgramResult trace = RunForkguard(
      {"--no-audit", "--format", "trace", "--threads", "1", "--", "/bin/sh", "-c", "(true)"});
  EXPECT_EQ(trace.status, 0) << trace.err;
  EXPECT_EQ(trace.err.rfind("{", 0), 0u) << trace.err;
  EXPECT_NE(trace.err.find("\"traceEvents\""), std::string::npos) << trace.err;
  ProgramResult html = RunForkguard({"--no-audit", "--format=html", "--native", "--no-symbolize",
                                     "--", "/bin/sh", "-c", "(true)"});
  EXPECT_EQ(html.status, 0) << html.err;
  EXPECT_NE(html.err.find("<!doctype html>"), std::string::npos) << html.err;
  ProgramResult md = RunForkguard({"--no-audit", "--format", "md", "--", "/bin/true"});
  EXPECT_EQ(md.err.rfind("### forkguard: ", 0), 0u) << md.err;
  EXPECT_EQ(RunForkguard({"--threads", "0", "--", "/bin/true"}).err,
            "forkguard run: --threads takes a number from 1 to 999 (see forkguard run --help)\n");
}

TEST(Run, KilledProgramGives128PlusSignal) {
  ProgramResult r = RunForkguard({"--", "/bin/sh", "-c", "kill -9 $$"});
  EXPECT_EQ(r.status, 128 + 9) << r.err;
  EXPECT_NE(r.err.find("was killed by signal 9"), std::string::npos) << r.err;
}

TEST(Run, CommandNotFoundIs127NotExecutableIs126) {
  EXPECT_EQ(RunForkguard({"--", "/nonexistent/program"}).status, 127);
  EXPECT_EQ(RunForkguard({"--", "no-such-command-forkguard"}).status, 127);
  std::string dir = forkguard::test_support::MakeTempDir("noexec");
  std::string f = dir + "/script";
  FILE* fp = fopen(f.c_str(), "w");
  ASSERT_NE(fp, nullptr);
  fputs("#!/bin/sh\nexit 0\n", fp);
  fclose(fp);
  chmod(f.c_str(), 0644);
  // root may execute files without x bits only if some x bit is set: none here.
  EXPECT_EQ(RunForkguard({"--", f}).status, 126);
}

TEST(Run, FailOnHazardExits3) {
  std::vector<std::string> env = {"FAKE_SHIM_HAZARD=1"};
  ProgramResult plain = RunForkguard({"--", "/bin/sh", "-c", "(true); exit 0"}, env);
  EXPECT_EQ(plain.status, 0) << plain.err;
  EXPECT_NE(plain.err.find("hazard: fork() after RDMA initialization"), std::string::npos)
      << plain.err;
  ProgramResult gated =
      RunForkguard({"--fail-on", "hazard", "--", "/bin/sh", "-c", "(true); exit 0"}, env);
  EXPECT_EQ(gated.status, 3) << gated.err;
  ProgramResult never =
      RunForkguard({"--fail-on=never", "--", "/bin/sh", "-c", "(true); exit 5"}, env);
  EXPECT_EQ(never.status, 5);
  // A clean run passes the gate with the program's status.
  ProgramResult clean =
      RunForkguard({"--fail-on", "hazard", "--", "/bin/sh", "-c", "(true); exit 4"});
  EXPECT_EQ(clean.status, 4) << clean.err;
}

TEST(Run, EnvironmentOfTheProgram) {
  std::string dir = forkguard::test_support::MakeTempDir("env");
  std::string out = dir + "/env.txt";
  std::string script =
      "printf '%s\\n%s\\n%s\\n%s\\n' \"$LD_PRELOAD\" \"$FORKGUARD_MODE\" "
      "\"$FORKGUARD_LOG\" \"${LD_AUDIT-unset}\" > " +
      out;
  ProgramResult r = RunForkguard({"--mode", "error", "--no-audit", "--", "/bin/sh", "-c", script},
                                 {"LD_PRELOAD=/lib/x86_64-linux-gnu/libm.so.6", "LD_AUDIT="});
  ASSERT_EQ(r.status, 0) << r.err;
  std::string env = ReadFileOrEmpty(out);
  // The shim first, the user's preload kept after it.
  EXPECT_EQ(env.substr(0, env.find('\n')), FakeShim() + ":/lib/x86_64-linux-gnu/libm.so.6");
  EXPECT_NE(env.find("\nerror\n"), std::string::npos) << env;
  EXPECT_NE(env.find("\nunset\n"), std::string::npos) << env;  // --no-audit
  // The private log directory is gone after the report.
  size_t a = env.find('\n', env.find('\n') + 1) + 1;
  std::string log_dir = env.substr(a, env.find('\n', a) - a);
  ASSERT_NE(log_dir.find("forkguard-run."), std::string::npos) << log_dir;
  struct stat st;
  EXPECT_NE(0, stat(log_dir.c_str(), &st)) << log_dir << " still exists";
}

TEST(Run, LogDirIsKeptAndTheCliItselfIsNotWatched) {
  std::string dir = forkguard::test_support::MakeTempDir("logs");
  ProgramResult r = RunForkguard({"--log", dir, "--", "/bin/sh", "-c", "(true); (true); exit 0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("event logs in " + dir), std::string::npos) << r.err;
  // Logs of sh and its two subshells; none from forkguard (not preloaded).
  ProgramResult rep = RunProgram({Forkguard(), "report", "--format", "json", dir});
  ASSERT_EQ(rep.status, 0) << rep.err;
  EXPECT_NE(rep.out.find("\"processes\": 3,"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("\"forks\": 2,"), std::string::npos) << rep.out;
  // A second run into the same directory reports only its own processes.
  ProgramResult again = RunForkguard({"--log", dir, "--", "/bin/sh", "-c", "(true); exit 0"});
  EXPECT_NE(again.err.find("forkguard: 2 processes on 1 host, 1 fork"), std::string::npos)
      << again.err;
}

TEST(Run, LogTemplateRefusedWithAHint) {
  ProgramResult r = RunForkguard({"--log", "/tmp/fg/%j", "--", "/bin/true"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--log takes a plain directory, not a FORKGUARD_LOG template (%h %p %r %j)"),
            std::string::npos)
      << r.err;
}

TEST(Run, ForwardsSigtermToTheProgram) {
  std::string err = forkguard::test_support::MakeTempDir("sig") + "/stderr";
  int out_fd = -1;
  std::vector<std::string> argv = {
      Forkguard(), "run", "--",
      "/bin/sh",   "-c",  "trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done"};
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  int err_fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(err_fd, 0);
  test_support::RunOptions opt;
  opt.env = {ShimDirEnv()};
  pid_t pid = test_support::StartProgram(argv, opt, -1, out[1], err_fd);
  close(out[1]);
  close(err_fd);
  ASSERT_GT(pid, 0);
  out_fd = out[0];
  char buf[6] = {};
  ssize_t n = 0;
  while (n < 6) {  // "ready\n": the trap is installed
    ssize_t k = read(out_fd, buf + n, 6 - static_cast<size_t>(n));
    if (k < 0 && errno == EINTR) continue;
    ASSERT_GT(k, 0) << "program ended before it was ready";
    n += k;
  }
  ASSERT_EQ(0, kill(pid, SIGTERM));
  int st = 0;
  ASSERT_EQ(pid, waitpid(pid, &st, 0));
  close(out_fd);
  ASSERT_TRUE(WIFEXITED(st)) << "forkguard itself was killed";
  EXPECT_EQ(WEXITSTATUS(st), 42) << ReadFileOrEmpty(err);
  EXPECT_NE(ReadFileOrEmpty(err).find("forkguard: "), std::string::npos);
}

TEST(Run, UsageErrorsAndHelp) {
  // One line in flags::ReportUsageError's words, exit 2, for every bad command line.
  auto usage = [](const std::string& what) {
    return "forkguard run: " + what + " (see forkguard run --help)\n";
  };
  ProgramResult none = RunForkguard({});
  EXPECT_EQ(none.status, 2);
  EXPECT_EQ(none.err, usage("no command given"));
  ProgramResult loud = RunForkguard({"--mode", "loud", "--", "true"});
  EXPECT_EQ(loud.status, 2);
  EXPECT_EQ(loud.err, usage("--mode takes warn, error, abort, fix or off"));
  ProgramResult bogus = RunForkguard({"--bogus", "--", "true"});
  EXPECT_EQ(bogus.status, 2);
  EXPECT_EQ(bogus.err, usage("unknown option --bogus"));
  EXPECT_EQ(RunForkguard({"--log", "", "--", "true"}).err, usage("--log needs a directory"));
  EXPECT_EQ(RunForkguard({"--format"}).err, usage("--format needs a value"));
  EXPECT_EQ(RunForkguard({"--keep-log=yes", "--", "true"}).err, usage("--keep-log takes no value"));
  ProgramResult report = RunProgram({Forkguard(), "report"});
  EXPECT_EQ(report.status, 2);
  EXPECT_EQ(report.err, "forkguard report: no logs given (see forkguard report --help)\n");
  ProgramResult doctor = RunProgram({Forkguard(), "doctor", "--verbose"});
  EXPECT_EQ(doctor.status, 2);
  EXPECT_EQ(doctor.err,
            "forkguard doctor: unknown option --verbose (see forkguard doctor --help)\n");
  ProgramResult cmd = RunProgram({Forkguard(), "rnu"});
  EXPECT_EQ(cmd.status, 2);
  EXPECT_EQ(
      cmd.err,
      "forkguard: unknown command 'rnu' (commands: run, report, doctor, ps, probe, watch) (see "
      "forkguard --help)\n");
  ProgramResult h = RunForkguard({"--help"});
  EXPECT_EQ(h.status, 0);
  EXPECT_NE(h.out.find("EXIT STATUS"), std::string::npos);
  EXPECT_NE(h.out.find("127      CMD was not found"), std::string::npos);
  ProgramResult v = RunProgram({Forkguard(), "--version"});
  EXPECT_EQ(v.status, 0);
  EXPECT_EQ(v.out.rfind("forkguard ", 0), 0u);
}

// Installed layout: PREFIX/bin/forkguard finds PREFIX/lib/libforkguard.so.
TEST(Run, InstalledLayoutFindsTheShimInPrefixLib) {
  std::string prefix = forkguard::test_support::MakeTempDir("prefix");
  ASSERT_EQ(0, mkdir((prefix + "/bin").c_str(), 0755));
  ASSERT_EQ(0, mkdir((prefix + "/lib").c_str(), 0755));
  auto copy = [](const std::string& from, const std::string& to, mode_t mode) {
    std::string data = ReadFileOrEmpty(from);
    FILE* f = fopen(to.c_str(), "wb");
    if (!f) return false;
    bool ok = fwrite(data.data(), 1, data.size(), f) == data.size();
    ok = fclose(f) == 0 && ok;
    return ok && chmod(to.c_str(), mode) == 0 && !data.empty();
  };
  ASSERT_TRUE(copy(Forkguard(), prefix + "/bin/forkguard", 0755));
  ASSERT_TRUE(copy(FakeShim(), prefix + "/lib/libforkguard.so", 0644));
  std::string out = prefix + "/preload.txt";
  ProgramResult r = RunProgram(
      {prefix + "/bin/forkguard", "run", "--", "/bin/sh", "-c", "echo \"$LD_PRELOAD\" > " + out},
      {"FORKGUARD_SHIM_DIR=", "LD_PRELOAD=", "RUNFILES_DIR=", "TEST_SRCDIR="});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(ReadFileOrEmpty(out), prefix + "/lib/libforkguard.so\n");
}

TEST(Report, ReadsStandardInput) {
  std::string f = forkguard::test_support::Runfile("cli/testdata/corpus/valid.jsonl");
  ProgramResult r = RunProgram({"/bin/sh", "-c", "\"$0\" report - < \"$1\"", Forkguard(), f});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("forkguard: 1 process (1 rank) on 1 host, 1 fork: 1 hazardous"),
            std::string::npos)
      << r.out;
}

// Paths and options in any order; after "--" everything is a path.
TEST(Report, PathsAndOptionsInAnyOrder) {
  std::string f = forkguard::test_support::Runfile("cli/testdata/corpus/valid.jsonl");
  ProgramResult before = RunProgram({Forkguard(), "report", "--format", "json", f});
  ProgramResult after = RunProgram({Forkguard(), "report", f, "--format=json"});
  EXPECT_EQ(before.status, 0) << before.err;
  EXPECT_EQ(after.status, 0) << after.err;
  EXPECT_EQ(before.out, after.out);
  EXPECT_NE(after.out.find("\"schema\": \"forkguard.report/1\""), std::string::npos) << after.out;
  ProgramResult dashes = RunProgram({Forkguard(), "report", "--", "--format"});
  EXPECT_EQ(dashes.status, 0) << dashes.err;  // a path named --format: a note, not an option
  EXPECT_NE(dashes.out.find("--format"), std::string::npos) << dashes.out;
}

TEST(Run, MissingShimIs125) {
  ProgramResult r =
      RunProgram({Forkguard(), "run", "--", "true"}, {"FORKGUARD_SHIM_DIR=/nonexistent"});
  EXPECT_EQ(r.status, 125);
  EXPECT_NE(r.err.find("libforkguard.so not found"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace forkguard::cli
