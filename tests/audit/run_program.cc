#include "tests/audit/run_program.h"

#include <optional>

#include "tests/support/event_v2.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

extern char** environ;

namespace forkguard::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

ProgramResult RunProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         int timeout_s) {
  ProgramResult result;
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const std::string& kv : env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    if (eq + 1 == kv.size()) {
      vars.erase(kv.substr(0, eq));
    } else {
      vars[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : vars) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  std::string dir = MakeTempDir("run");
  std::string out_path = dir + "/stdout", err_path = dir + "/stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn(" << argv[0] << "): " << strerror(rc);
    return result;
  }
  int status = 0;
  // Poll in 20 ms steps so that a hung program is killed after timeout_s.
  for (long waited_ms = 0;; waited_ms += 20) {
    pid_t got = waitpid(pid, &status, timeout_s > 0 ? WNOHANG : 0);
    if (got == pid) break;
    if (got < 0 && errno != EINTR) {
      ADD_FAILURE() << "waitpid: " << strerror(errno);
      return result;
    }
    if (timeout_s > 0 && got == 0) {
      if (waited_ms >= timeout_s * 1000L && !result.timed_out) {
        kill(pid, SIGKILL);
        result.timed_out = true;
      }
      usleep(20 * 1000);
    }
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadAll(out_path);
  result.err = ReadAll(err_path);
  return result;
}

int LineOf(const std::string& path, const std::string& marker) {
  std::ifstream in(path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find(marker) != std::string::npos) return n;
  }
  ADD_FAILURE() << "marker '" << marker << "' not found in " << path;
  return 0;
}

std::vector<std::string> ReadLogLines(const std::string& dir) {
  std::vector<std::string> lines;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    ADD_FAILURE() << "opendir(" << dir << "): " << strerror(errno);
    return lines;
  }
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(dir + "/" + e->d_name);
    // forkguard.event/2: each event with its header's fields and its stacks by value.
    testing_support::EventV2Expander v2;
    for (std::string line; std::getline(in, line);) {
      std::string problem;
      std::optional<std::string> expanded = v2.Expand(line, &problem);
      if (expanded) {
        lines.push_back(*expanded);
      } else if (problem == "not JSON") {
        lines.push_back(line);  // as it is (a truncated last line)
      }
    }
  }
  closedir(d);
  return lines;
}

std::vector<std::string> LinesWith(const std::vector<std::string>& lines,
                                   const std::vector<std::string>& needles) {
  std::vector<std::string> found;
  for (const std::string& line : lines) {
    bool all = true;
    for (const std::string& n : needles) all = all && line.find(n) != std::string::npos;
    if (all) found.push_back(line);
  }
  return found;
}

int CountOf(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

}  // namespace forkguard::testing
