// The loader obeys forkguard's rule: run `refloader run` (4 workers, the
// exactly-once --check on) under LD_PRELOAD=libforkguard.so in error mode and
// check the shim's event log: it ran in error mode, saw every worker fork, and
// judged each one `clean` (a hazard would have failed the fork, and the run).
#include <sys/stat.h>

#include <dirent.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader/tfrecord.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::test_support {
namespace {

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

TEST(LoaderUnderForkguard, EveryWorkerForkIsClean) {
  const std::string shim = Runfile("shim/libforkguard.so");
  const std::string refloader = Runfile("refloader/refloader");
  const std::string dir = MakeTempDir("fg_loader");
  const std::string data = dir + "/data", logs = dir + "/logs";
  ASSERT_EQ(mkdir(logs.c_str(), 0700), 0);
  loader::MakeDataset({data, 500, "uniform:100:2K", 1, 2});

  // The test's environment without the shim's variables, then the run's own.
  RunOptions opt =
      WithoutShimEnv({"LD_PRELOAD=" + shim, "FORKGUARD_MODE=error", "FORKGUARD_LOG=" + logs});
  opt.stderr_to_stdout = true;
  ProgramResult r = RunProgram({refloader, "run", "--data", data, "--workers", "4", "--epochs", "2",
                                "--sampler", "shuffle", "--check"},
                               opt);
  const std::string& output = r.out;
  ASSERT_TRUE(r.Exited(0)) << r.Describe();
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
}  // namespace forkguard::test_support
