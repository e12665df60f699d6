// The refloader command line: demo, --help (every command's text, made from its rows), the
// defaults from loader/'s structs, make-dataset + run --check, resume from a printed state,
// errors.
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "flags/flags.h"
#include "gtest/gtest.h"
#include "loader/loader.h"
#include "loader/tfrecord.h"
#include "refloader/commands.h"
#include "tests/support/runfiles.h"

extern char** environ;

namespace {

using forkguard::test_support::MakeTempDir;
using forkguard::test_support::Runfile;

struct Result {
  int status = -1;
  std::string out;
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

Result Refloader(std::vector<std::string> args, const std::string& tmpdir = "") {
  static const std::string bin = Runfile("refloader/refloader");
  static const std::string scratch = MakeTempDir("cli_out");
  args.insert(args.begin(), bin);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; e++)
    if (tmpdir.empty() || std::string(*e).rfind("TMPDIR=", 0) != 0) env_s.push_back(*e);
  if (!tmpdir.empty()) env_s.push_back("TMPDIR=" + tmpdir);
  std::vector<char*> env;
  for (auto& s : env_s) env.push_back(s.data());
  env.push_back(nullptr);
  std::string out = scratch + "/out.txt";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  Result r;
  pid_t pid;
  if (posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), env.data()) == 0)
    waitpid(pid, &r.status, 0);
  posix_spawn_file_actions_destroy(&fa);
  std::ifstream f(out);
  r.out.assign(std::istreambuf_iterator<char>(f), {});
  return r;
}

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

int Count(const std::string& s, const std::string& part) {
  int n = 0;
  for (size_t p = s.find(part); p != std::string::npos; p = s.find(part, p + 1)) n++;
  return n;
}

TEST(RefloaderCli, NoArgumentsRunsTheDemoAndCleansUp) {
  std::string tmp = MakeTempDir("demo_tmp");
  Result r = Refloader({}, tmp);
  EXPECT_EQ(r.exit_code(), 0) << r.out;
  EXPECT_EQ(Count(r.out, "exactly the sampler's order"), 2) << r.out;
  EXPECT_TRUE(Has(r.out, "samples/s")) << r.out;
  EXPECT_TRUE(Has(r.out, "MB/s")) << r.out;
  DIR* d = opendir(tmp.c_str());
  ASSERT_NE(d, nullptr);
  int entries = 0;
  while (dirent* e = readdir(d)) entries += e->d_name[0] != '.';
  closedir(d);
  EXPECT_EQ(entries, 0) << "demo left files in TMPDIR";
}

std::vector<forkguard::refloader::Command> AllCommands() {
  auto all = forkguard::refloader::LoaderCommands();
  const auto& rdma = forkguard::refloader::RdmaCommands();
  all.insert(all.end(), rdma.begin(), rdma.end());
  return all;
}

TEST(RefloaderCli, HelpDocumentsEveryCommandIncludingRdma) {
  Result r = Refloader({"--help"});
  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_TRUE(Has(r.out, "refloader COMMAND --help")) << r.out;
  for (const auto& c : AllCommands()) {
    SCOPED_TRACE(c.name);
    std::string help = forkguard::refloader::Help(c);
    EXPECT_TRUE(Has(r.out, help)) << "refloader --help lacks the section of " << c.name;
    Result own = Refloader({c.name, "--help"});
    EXPECT_EQ(own.exit_code(), 0) << own.out;
    EXPECT_EQ(own.out, help);
    for (const auto& f : c.flags)  // every option is listed, but --help (the usage says it)
      EXPECT_TRUE(f.name == "help" || Has(help, "--" + f.name + " ")) << f.name;
  }
}

// An option not given has the default of the struct it sets, and --help says that value.
TEST(RefloaderCli, DefaultsAreTheLoadersStructs) {
  const forkguard::loader::DatasetSpec spec;
  std::string dir = MakeTempDir("cli_defaults");
  Result mk = Refloader({"make-dataset", "--out", dir});
  ASSERT_EQ(mk.exit_code(), 0) << mk.out;
  EXPECT_TRUE(Has(mk.out, "wrote " + std::to_string(spec.records) + " records in " +
                              std::to_string(spec.shards) + " shard(s)"))
      << mk.out;
  Result help = Refloader({"make-dataset", "--help"});
  EXPECT_TRUE(Has(help.out, "number of records (default " + std::to_string(spec.records) + ")"))
      << help.out;
  EXPECT_TRUE(Has(help.out, "(default " + spec.size_dist + ")")) << help.out;
  const forkguard::loader::LoaderOptions lo;
  Result run = Refloader({"run", "--data", dir, "--epochs", "1"});
  ASSERT_EQ(run.exit_code(), 0) << run.out;
  EXPECT_TRUE(Has(run.out, std::to_string(lo.num_workers) + " worker(s), batch " +
                               std::to_string(lo.batch_size) + " x " +
                               std::to_string(lo.sample_bytes) + " B"))
      << run.out;
}

// The loader's options are one set of rows: run, serve, consume and demo show them alike,
// and demo takes serve's but its address and ready fd.
TEST(RefloaderCli, TheLoadersOptionsAreDefinedOnce) {
  const auto& l = forkguard::refloader::TheLoaderFlags();
  const std::vector<forkguard::refloader::Command> all = AllCommands();
  std::map<std::string, const forkguard::refloader::Command*> by_name;
  for (const auto& c : all) by_name[c.name] = &c;
  auto row = [&](const char* cmd, const std::string& name) -> const forkguard::flags::Flag* {
    for (const auto& f : by_name.at(cmd)->flags)
      if (f.name == name) return &f;
    return nullptr;
  };
  for (const char* cmd : {"run", "serve", "consume", "demo"}) {
    SCOPED_TRACE(cmd);
    for (const auto* f : {&l.batch_size, &l.sample_bytes}) {
      ASSERT_NE(row(cmd, f->name), nullptr) << f->name;
      EXPECT_EQ(row(cmd, f->name)->def, f->def);
      EXPECT_EQ(row(cmd, f->name)->help, f->help);
    }
  }
  std::vector<std::string> serve, demo;
  for (const auto& f : by_name.at("serve")->flags)
    if (f.name != "listen" && f.name != "ready-fd") serve.push_back(f.name);
  for (const auto& f : by_name.at("demo")->flags)
    if (f.name != "ip" && f.name != "port") demo.push_back(f.name);
  EXPECT_EQ(demo, serve);
}

TEST(RefloaderCli, BadCommandLinesExitTwoWithOneLine) {
  Result bad = Refloader({"frobnicate"});
  EXPECT_EQ(bad.exit_code(), 2);
  EXPECT_EQ(bad.out, "refloader: unknown command 'frobnicate' (see refloader --help)\n");
  Result badopt = Refloader({"run", "--data", "/nonexistent", "--bogus", "1"});
  EXPECT_EQ(badopt.exit_code(), 2) << badopt.out;
  EXPECT_EQ(badopt.out, "refloader run: unknown option --bogus (see refloader run --help)\n");
  // The RDMA subcommands report the same way (parsed before any device is opened).
  Result serve = Refloader({"serve", "--listen"});
  EXPECT_EQ(serve.exit_code(), 2) << serve.out;
  EXPECT_EQ(serve.out, "refloader serve: --listen needs a value (see refloader serve --help)\n");
  Result consume = Refloader({"consume"});
  EXPECT_EQ(consume.exit_code(), 2) << consume.out;
  EXPECT_EQ(consume.out,
            "refloader consume: consume needs --connect IP:PORT (see refloader consume --help)\n");
  Result size = Refloader({"run", "--data", "/nonexistent", "--workers", "2Q"});
  EXPECT_EQ(size.exit_code(), 2) << size.out;
  EXPECT_TRUE(Has(size.out, "refloader run: --workers: bad size suffix in '2Q'")) << size.out;
}

TEST(RefloaderCli, MakeDatasetRunCheckAndResume) {
  std::string dir = MakeTempDir("cli_data");
  Result mk = Refloader({"make-dataset", "--out", dir, "--records", "300", "--size",
                         "uniform:10:300", "--seed", "5", "--shards", "3"});
  ASSERT_EQ(mk.exit_code(), 0) << mk.out;
  EXPECT_EQ(forkguard::loader::ListShards(dir).size(), 3u);

  for (const char* sampler : {"sequential", "shuffle", "distributed"}) {
    SCOPED_TRACE(sampler);
    std::vector<std::string> common = {
        "run", "--data",       dir,  "--sampler",      sampler, "--world",   "2", "--rank",
        "1",   "--batch-size", "16", "--sample-bytes", "64",    "--workers", "2", "--check"};
    std::vector<std::string> first = common;
    first.insert(first.end(), {"--epochs", "3", "--stop-after", "25"});  // mid epoch 1 or 2
    Result a = Refloader(first);
    ASSERT_EQ(a.exit_code(), 0) << a.out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(a.out, m, std::regex("--resume '([^']+)'"))) << a.out;
    std::string state = m[1];
    EXPECT_FALSE(Has(state, "epoch=0")) << state;
    EXPECT_FALSE(Has(state, "batch=0 ")) << state;
    std::vector<std::string> second = common;
    second.insert(second.end(), {"--resume", state, "--epochs", "2"});
    Result b = Refloader(second);
    ASSERT_EQ(b.exit_code(), 0) << b.out;
    EXPECT_EQ(Count(b.out, "exactly the sampler's order"), 2) << b.out;
  }
}

TEST(RefloaderCli, CorruptedRecordExitsWithFileAndOffset) {
  std::string dir = MakeTempDir("cli_bad");
  auto files = forkguard::loader::MakeDataset({dir, 20, "fixed:100", 1, 1});
  int fd = open(files[0].c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c = 0x55;
  ASSERT_EQ(pwrite(fd, &c, 1, 5 * 116 + 12 + 40), 1);
  close(fd);
  Result r = Refloader({"run", "--data", dir, "--workers", "2"});
  EXPECT_EQ(r.exit_code(), 1) << r.out;
  EXPECT_TRUE(Has(r.out, files[0] + ": record at offset " + std::to_string(5 * 116))) << r.out;
}

}  // namespace
