// A 64-process job under the real shim on the stub libibverbs: 4 launchers' variables
// (torchrun, Open MPI, Slurm, PMIx) x 16 ranks, started together, every process forking after
// RDMA init, all stderr into one pipe and all logs under one FORKGUARD_LOG=DIR/%j/%h.
// - every stderr line is whole and starts with "[host rRANK pid] ", every message complete;
// - the log directories were created per job and host (templates, mode 0700);
// - `forkguard report` keeps the 4 jobs apart, ranks 0-15 each; `--job ID` selects one.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/json.h"
#include "tests/shim/shim_run.h"
#include "tests/support/runfiles.h"
#include "tests/support/shim_lines.h"

namespace forkguard::test_support {
namespace {

using cli::FindMember;
using cli::GetInt;
using cli::GetString;
using cli::Json;
using cli::ParseJson;

constexpr int kRanksPerJob = 16;

struct Launcher {
  const char* name;
  const char* job;  // the job id the shim must read
  std::vector<std::string> (*vars)(int rank);
};

const Launcher kLaunchers[] = {
    {"torchrun", "tr-77",
     [](int r) -> std::vector<std::string> {
       return {"RANK=" + std::to_string(r), "LOCAL_RANK=" + std::to_string(r % 4), "WORLD_SIZE=16",
               "TORCHELASTIC_RUN_ID=tr-77"};
     }},
    {"Open MPI", "prterun-node0-555@1",
     [](int r) -> std::vector<std::string> {
       return {"OMPI_COMM_WORLD_RANK=" + std::to_string(r),
               "OMPI_COMM_WORLD_LOCAL_RANK=" + std::to_string(r % 4),
               "PMIX_RANK=" + std::to_string(r), "PMIX_NAMESPACE=prterun-node0-555@1"};
     }},
    {"Slurm", "9001",
     [](int r) -> std::vector<std::string> {
       return {"SLURM_PROCID=" + std::to_string(r), "SLURM_LOCALID=" + std::to_string(r % 4),
               "SLURM_JOB_ID=9001"};
     }},
    {"PMIx", "pmix-ns-3",
     [](int r) -> std::vector<std::string> {
       return {"PMIX_RANK=" + std::to_string(r), "PMIX_NAMESPACE=pmix-ns-3"};
     }},
};

std::string Dirname(const std::string& p) { return p.substr(0, p.rfind('/')); }

// The processes get exactly the environment below, plus the sanitizer options `bazel test
// --config=asan|tsan|ubsan` sets (.bazelrc): without ASAN_OPTIONS' verify_asan_link_order=0
// an ASan program with the shim preloaded exits 1 at start ("ASan runtime does not come
// first"). None of them is set in the plain build.
std::vector<std::string> WithSanitizerOptions(std::vector<std::string> env) {
  for (const char* name : {"ASAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS"}) {
    if (const char* v = getenv(name)) env.push_back(std::string(name) + "=" + v);
  }
  return env;
}

std::string ReadAll(int fd) {
  std::string s;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    s.append(buf, n);
  }
  return s;
}

// Exactly `env` (and the sanitizer options): nothing of the test's environment.
RunOptions ExactEnv(const std::vector<std::string>& env) {
  RunOptions opt;
  opt.env = WithSanitizerOptions(env);
  opt.base_env = RunOptions::BaseEnv::kEmpty;
  return opt;
}

ProgramResult RunCli(const std::vector<std::string>& argv) {
  return RunProgram(argv, ExactEnv({"PATH=/usr/bin:/bin"}));
}

class ShimJob : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    base_ = new std::string(MakeTempDir("forkguard-job"));
    std::string log = *base_ + "/fg";  // not created yet: the shim creates it
    std::string program = Runfile("tests/shim/fork_after_rdma");
    std::string stub = Dirname(Runfile("tests/stub_ibverbs/lib/libibverbs.so.1"));
    std::string shim = ShimLibrary();
    int p[2];
    ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
    std::map<pid_t, int> started;  // pid -> rank
    for (const Launcher& l : kLaunchers) {
      for (int r = 0; r < kRanksPerJob; ++r) {
        std::vector<std::string> env = {"PATH=/usr/bin:/bin", "LD_PRELOAD=" + shim,
                                        "LD_LIBRARY_PATH=" + stub,
                                        "FORKGUARD_LOG=" + log + "/%j/%h"};
        for (const auto& v : l.vars(r)) env.push_back(v);
        pid_t pid = StartProgram({program}, ExactEnv(env), -1, -1, p[1]);
        ASSERT_GT(pid, 0);
        started[pid] = r;
      }
    }
    close(p[1]);
    err_ = new std::string(ReadAll(p[0]));
    close(p[0]);
    for (const auto& [pid, rank] : started) {
      int st = 0;
      ASSERT_EQ(waitpid(pid, &st, 0), pid);
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "pid " << pid << " status " << st;
    }
    pids_ = new std::map<pid_t, int>(started);
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    host_ = new std::string(host);
    log_ = new std::string(log);
  }

  static std::string* base_;
  static std::string* log_;
  static std::string* err_;
  static std::string* host_;
  static std::map<pid_t, int>* pids_;
};

std::string* ShimJob::base_ = nullptr;
std::string* ShimJob::log_ = nullptr;
std::string* ShimJob::err_ = nullptr;
std::string* ShimJob::host_ = nullptr;
std::map<pid_t, int>* ShimJob::pids_ = nullptr;

TEST_F(ShimJob, EveryStderrLineWholeAndPrefixedEveryMessageComplete) {
  std::istringstream in(*err_);
  std::string line;
  std::map<long, std::vector<std::string>> by_pid;
  int n = 0;
  std::string short_host = host_->substr(0, host_->find('.'));
  while (std::getline(in, line)) {
    ++n;
    auto p = ParseShimLinePrefix(line);
    ASSERT_TRUE(p.has_value()) << "line " << n << " has no prefix: " << line;
    EXPECT_EQ(p->host, short_host) << line;
    ASSERT_TRUE(pids_->count(p->pid)) << "a pid we did not start: " << line;
    EXPECT_EQ(p->rank, (*pids_)[p->pid]) << line;
    std::string rest = line.substr(p->length);
    EXPECT_EQ(rest.find("] "), std::string::npos) << "two lines in one: " << line;
    by_pid[p->pid].push_back(rest);
  }
  ASSERT_EQ(by_pid.size(), pids_->size()) << *err_;
  for (const auto& [pid, lines] : by_pid) {
    // One message per process, its lines in order: the header, indented lines, the mode.
    ASSERT_GE(lines.size(), 5u);
    std::string header = "forkguard: fork after RDMA init in pid " + std::to_string(pid) +
                         " (fork_after_rdma, rank " + std::to_string((*pids_)[pid]) + " on ";
    EXPECT_EQ(lines[0].rfind(header, 0), 0u) << lines[0];
    for (size_t i = 1; i < lines.size(); ++i) EXPECT_EQ(lines[i].rfind("  ", 0), 0u) << lines[i];
    EXPECT_EQ(lines.back().rfind("  mode: warn", 0), 0u) << lines.back();
  }
}

TEST_F(ShimJob, LogDirectoriesCreatedPerJobAndHost) {
  for (const Launcher& l : kLaunchers) {
    std::string dir = *log_ + "/" + l.job + "/" + *host_;
    struct stat st;
    ASSERT_EQ(stat(dir.c_str(), &st), 0) << l.name << ": " << dir;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
    ASSERT_EQ(stat((*log_ + "/" + l.job).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
  }
}

TEST_F(ShimJob, ReportKeepsTheJobsApart) {
  std::string fg = Runfile("cli/forkguard");
  ProgramResult r = RunCli({fg, "report", "--no-symbolize", "--format", "json", *log_});
  ASSERT_EQ(r.status, 0) << r.err;
  Json doc;
  std::string error;
  ASSERT_TRUE(ParseJson(r.out, &doc, &error)) << error;
  const Json* jobs = FindMember(*FindMember(doc, "summary"), "jobs");
  ASSERT_TRUE(jobs != nullptr && jobs->is_array());
  std::map<std::string, const Json*> by_id;
  for (const Json& j : *jobs) by_id[GetString(j, "job")] = &j;
  ASSERT_EQ(by_id.size(), 4u) << r.out.substr(0, 2000);
  for (const Launcher& l : kLaunchers) {
    ASSERT_TRUE(by_id.count(l.job)) << l.name << " job " << l.job << " missing";
    const Json& j = *by_id[l.job];
    EXPECT_EQ(GetString(j, "ranks_text"), "ranks 0-15") << l.name;
    EXPECT_GE(GetInt(j, "processes", 0), kRanksPerJob) << l.name;
    EXPECT_EQ(GetInt(j, "hazard_forks", 0), kRanksPerJob) << l.name;
    EXPECT_EQ(GetInt(j, "hazard_sites", 0), 1) << l.name;
  }
  // One finding per job: the same line forked in all 64 processes, but in 4 jobs.
  const Json* findings = FindMember(doc, "findings");
  ASSERT_EQ(findings->size(), 4u);
  for (const Json& f : *findings) {
    EXPECT_EQ(GetInt(f, "count", 0), kRanksPerJob) << GetString(f, "job");
    EXPECT_EQ(GetInt(f, "process_count", 0), kRanksPerJob) << GetString(f, "job");
  }
  std::map<std::string, std::set<int64_t>> local;
  for (const Json& p : *FindMember(doc, "processes")) {
    if (const Json* lr = FindMember(p, "local_rank"); lr && lr->is_number_integer()) {
      local[GetString(p, "job")].insert(lr->get<int64_t>());
    }
  }
  EXPECT_EQ(local["tr-77"], (std::set<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(local["9001"], (std::set<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(local["prterun-node0-555@1"], (std::set<int64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(local["pmix-ns-3"].empty()) << "PMIx alone sets no local rank we read";

  ProgramResult text = RunCli({fg, "report", "--no-symbolize", *log_});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_EQ(text.out.rfind("forkguard: 4 jobs in the logs: 9001 (", 0), 0u) << text.out;
  for (const Launcher& l : kLaunchers) {
    EXPECT_NE(text.out.find(std::string("\n=== job ") + l.job + " ===\n"), std::string::npos)
        << l.job;
  }

  ProgramResult md = RunCli({fg, "report", "--no-symbolize", "--format", "markdown", *log_});
  ASSERT_EQ(md.status, 0) << md.err;
  for (const Launcher& l : kLaunchers) {
    EXPECT_NE(md.out.find(std::string("\n## job ") + l.job + "\n"), std::string::npos) << l.job;
  }

  ProgramResult one = RunCli({fg, "report", "--no-symbolize", "--job", "9001", *log_});
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_NE(one.out.find("forkguard: job 9001: "), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("ranks 0-15"), std::string::npos) << one.out;
  EXPECT_EQ(one.out.find("tr-77"), std::string::npos) << one.out;

  ProgramResult none = RunCli({fg, "report", "--job", "nope", *log_});
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("no job nope in the logs (jobs there: 9001, pmix-ns-3"),
            std::string::npos)
      << none.err;
}

}  // namespace
}  // namespace forkguard::test_support
