#include "cli/testdata/watch_rdma_support.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {

using test_support::ProgramResult;
using test_support::Runfile;
using test_support::RunProgram;

std::string Forkguard() { return Runfile("cli/forkguard"); }

Watcher::Watcher(const std::string& enforce, bool persist) {
  dir_ = test_support::MakeTempDir("watchlogs");
  std::string ready = dir_ + ".ready";
  std::string err = dir_ + ".err";
  std::vector<std::string> args = {Forkguard(), "watch", "--log",        dir_,
                                   "--enforce", enforce, "--ready-file", ready};
  if (persist) args.push_back("--persist");
  started_ = test_support::StartProgramToFiles(args, {}, dir_ + ".out", err);
  for (int i = 0; i < 600 && access(ready.c_str(), F_OK) != 0; ++i) {
    if (waitpid(started_.pid, nullptr, WNOHANG) == started_.pid) break;
    usleep(50 * 1000);
  }
  ready_ = access(ready.c_str(), F_OK) == 0;
  if (!ready_) startup_error_ = test_support::ReadFileOrEmpty(err);
}

Watcher::~Watcher() {
  if (!stopped_) Stop();
}

ProgramResult Watcher::Stop() {
  stopped_ = true;
  kill(started_.pid, SIGTERM);
  return test_support::WaitForFiles(started_, 60);
}

std::vector<Json> Events(const std::string& dir, const std::string& prefix) {
  std::vector<Json> out;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().filename().string().rfind(prefix, 0) != 0) continue;
    std::ifstream in(f.path());
    std::string line;
    int64_t pid = -1, start_ns = 0;
    while (std::getline(in, line)) {
      Json j;
      std::string error;
      if (!ParseJson(line, &j, &error) || !j.is_object()) {
        ADD_FAILURE() << f.path() << ": not a JSON object: " << line;
        continue;
      }
      if (GetString(j, "event") == "header") {
        pid = GetInt(j, "pid", -1);
        start_ns = GetInt(j, "start_ns", 0);
      }
      j["_pid"] = pid;
      j["_t"] = start_ns + GetInt(j, "ts", 0);
      j["_file"] = f.path().filename().string();
      out.push_back(std::move(j));
    }
  }
  return out;
}

std::vector<std::string> ForkReasons(const std::vector<Json>& events, const std::string& prog) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::map<int64_t, std::string> progs;
  for (const Json& e : events)
    if (GetString(e, "event") == "header") progs[GetInt(e, "_pid", -1)] = GetString(e, "prog");
  for (const Json& e : events) {
    if (GetString(e, "event") != "fork" || progs[GetInt(e, "_pid", -1)] != prog) continue;
    std::string r;
    for (const Json& x : *FindMember(e, "reasons"))
      r += (r.empty() ? "" : ",") + x.get<std::string>();
    found.emplace_back(GetInt(e, "_t", 0), GetString(e, "action") + ":" + r);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::string StaticProg() { return Runfile("cli/testdata/hazard_prog_static"); }
std::string DynamicProg() { return Runfile("cli/testdata/hazard_prog"); }

std::vector<std::string> ShimReasons(const std::string& dev, const std::string& fork_safe,
                                     std::string* dir) {
  std::string logs = test_support::MakeTempDir("shimlogs");
  if (dir != nullptr) *dir = logs;
  ProgramResult r = RunProgram(
      {Forkguard(), "run", "--no-audit", "--log", logs, "--", DynamicProg()},
      {"RXE_DEV=" + dev, "FORKGUARD_SHIM_DIR=", "RDMAV_FORK_SAFE=" + fork_safe, "IBV_FORK_SAFE="});
  EXPECT_EQ(r.status, 0) << r.Describe();
  return ForkReasons(Events(logs, "forkguard."), "hazard_prog");
}

}  // namespace forkguard::cli
