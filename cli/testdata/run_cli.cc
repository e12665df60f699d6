#include "cli/testdata/run_cli.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

extern char** environ;

namespace forkguard::cli::testdata {
namespace {

std::vector<std::string> MergedEnv(const std::vector<std::string>& extra) {
  std::vector<std::string> out;
  auto name_of = [](const std::string& kv) { return kv.substr(0, kv.find('=')); };
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    bool replaced = false;
    for (const auto& x : extra) replaced = replaced || name_of(x) == name_of(kv);
    if (!replaced) out.push_back(kv);
  }
  for (const auto& x : extra)
    if (x.size() > name_of(x).size() + 1) out.push_back(x);
  return out;
}

pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, int out_fd,
            int err_fd) {
  std::vector<std::string> e = MergedEnv(env);
  std::vector<char*> envp, args;
  for (auto& s : e) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> a = argv;
  for (auto& s : a) args.push_back(s.data());
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    execve(args[0], args.data(), envp.data());
    _exit(126);
  }
  return pid;
}

std::string TempPath(const char* what) {
  const char* base = getenv("TEST_TMPDIR");
  std::string p = std::string(base && *base ? base : "/tmp") + "/cli." + what + ".XXXXXX";
  int fd = mkstemp(p.data());
  if (fd >= 0) close(fd);
  return p;
}

}  // namespace

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

CliResult RunCli(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::string out_path = TempPath("out"), err_path = TempPath("err");
  int out_fd = open(out_path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  int err_fd = open(err_path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  pid_t pid = Spawn(argv, env, out_fd, err_fd);
  close(out_fd);
  close(err_fd);
  CliResult r;
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = ReadFileOrEmpty(out_path);
  r.err = ReadFileOrEmpty(err_path);
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  return r;
}

pid_t StartCli(const std::vector<std::string>& argv, const std::vector<std::string>& env,
               int* stdout_fd, const std::string& stderr_path) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  int err_fd = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  pid_t pid = Spawn(argv, env, p[1], err_fd);
  close(p[1]);
  close(err_fd);
  *stdout_fd = p[0];
  return pid;
}

std::string DoctorLine(const std::string& out, const std::string& name) {
  size_t p = out.find("  " + name + " ");
  if (p == std::string::npos) return "";
  size_t start = out.rfind('\n', p);
  start = start == std::string::npos ? 0 : start + 1;
  return out.substr(start, out.find('\n', p) - start);
}

std::string DoctorBlock(const std::string& out, const std::string& name) {
  std::string first = DoctorLine(out, name);
  if (first.empty()) return "";
  std::string b = first;
  size_t p = out.find(first) + first.size() + 1;
  while (p < out.size() && out.compare(p, 24, std::string(24, ' ')) == 0) {
    size_t e = out.find('\n', p);
    std::string l = out.substr(p, e - p);
    b += " " + l.substr(l.find_first_not_of(' '));
    p = e == std::string::npos ? out.size() : e + 1;
  }
  return b;
}

}  // namespace forkguard::cli::testdata
