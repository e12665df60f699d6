// The loader obeys forkguard's rule: run `refloader run` (4 workers, the
// exactly-once --check on) under LD_PRELOAD=libforkguard.so in error mode and
// check the shim's event log: it ran in error mode, saw every worker fork, and
// judged each one `clean` (a hazard would have failed the fork, and the run).
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader/tfrecord.h"
#include "tests/support/runfiles.h"

extern char** environ;

namespace {

using forkguard::test_support::MakeTempDir;
using forkguard::test_support::Runfile;

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(dir + "/" + e->d_name);
    closedir(d);
  }
  return out;
}

bool Has(const std::string& line, const std::string& part) {
  return line.find(part) != std::string::npos;
}

// Runs argv with extra environment entries; returns the wait status, output in `out`.
int RunWithEnv(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
               const std::string& out) {
  std::vector<std::string> env_s(extra_env);
  for (char** e = environ; *e; e++) {
    std::string kv = *e;
    if (kv.rfind("LD_PRELOAD=", 0) == 0 || kv.rfind("FORKGUARD_", 0) == 0) continue;
    env_s.push_back(kv);
  }
  std::vector<char*> env, args;
  for (auto& s : env_s) env.push_back(s.data());
  env.push_back(nullptr);
  std::vector<std::string> argv_copy(argv);
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(LoaderUnderForkguard, EveryWorkerForkIsClean) {
  const std::string shim = Runfile("shim/libforkguard.so");
  const std::string refloader = Runfile("refloader/refloader");
  const std::string dir = MakeTempDir("fg_loader");
  const std::string data = dir + "/data", logs = dir + "/logs", out = dir + "/out.txt";
  ASSERT_EQ(mkdir(logs.c_str(), 0700), 0);
  forkguard::loader::MakeDataset({data, 500, "uniform:100:2K", 1, 2});

  int status =
      RunWithEnv({refloader, "run", "--data", data, "--workers", "4", "--epochs", "2", "--sampler",
                  "shuffle", "--check"},
                 {"LD_PRELOAD=" + shim, "FORKGUARD_MODE=error", "FORKGUARD_LOG=" + logs}, out);
  std::string output = Slurp(out);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << "\n"
                                                             << output;
  EXPECT_TRUE(Has(output, "check: epoch 1: 500 samples, exactly the sampler's order")) << output;

  int forks = 0, clean = 0, starts_in_error_mode = 0;
  std::vector<std::string> bad;
  for (const std::string& f : Files(logs)) {
    std::ifstream in(f);
    for (std::string line; std::getline(in, line);) {
      if (!Has(line, "\"event\":\"")) continue;  // /2: only the header has "schema"
      if (Has(line, "\"event\":\"process_start\"") && Has(line, "\"mode\":\"error\""))
        starts_in_error_mode++;
      if (!Has(line, "\"event\":\"fork\"")) continue;
      forks++;
      if (Has(line, "\"verdict\":\"clean\"") && Has(line, "\"action\":\"proceeded\""))
        clean++;
      else
        bad.push_back(line);
    }
  }
  printf("shim log: %d process_start in error mode, %d fork verdicts, %d clean\n",
         starts_in_error_mode, forks, clean);
  EXPECT_GE(starts_in_error_mode, 1)
      << "the shim did not run in error mode (logs in " << logs << ")";
  EXPECT_GE(forks, 4) << "the shim saw fewer forks than workers";
  EXPECT_EQ(clean, forks);
  for (const std::string& l : bad) ADD_FAILURE() << "not clean: " << l;
}

}  // namespace
