#include "tests/support/run_program.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace forkguard::test_support {
namespace {

std::string NameOf(const std::string& kv) { return kv.substr(0, kv.find('=')); }

bool ChangesTheShim(const std::string& kv) {
  auto starts = [&kv](const char* p) { return kv.rfind(p, 0) == 0; };
  return starts("FORKGUARD_") || starts("LD_PRELOAD=") || starts("LD_LIBRARY_PATH=") ||
         starts("RDMAV_FORK_SAFE=") || starts("IBV_FORK_SAFE=");
}

std::vector<std::string> BuildEnv(const RunOptions& opt) {
  std::vector<std::string> out;
  if (opt.base_env != RunOptions::BaseEnv::kEmpty) {
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv = *e;
      if (opt.base_env == RunOptions::BaseEnv::kTestWithoutShim && ChangesTheShim(kv)) continue;
      bool replaced = false;
      for (const std::string& x : opt.env) replaced = replaced || NameOf(x) == NameOf(kv);
      if (!replaced) out.push_back(kv);
    }
  }
  for (const std::string& x : opt.env)
    if (x.size() > NameOf(x).size() + 1) out.push_back(x);
  return out;
}

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

void KillGroup(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

// waitpid until `deadline_ms` (< 0: no deadline); false when it passed.
bool WaitUntil(pid_t pid, int* status, int64_t deadline_ms) {
  for (;;) {
    pid_t r = waitpid(pid, status, deadline_ms < 0 ? 0 : WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return true;
    if (deadline_ms >= 0 && NowMs() > deadline_ms) return false;
    if (r == 0) usleep(2000);
  }
}

void Finish(ProgramResult* r) {
  if (r->wait_status < 0) return;
  if (WIFEXITED(r->wait_status)) {
    r->status = WEXITSTATUS(r->wait_status);
  } else if (WIFSIGNALED(r->wait_status)) {
    r->status = 128 + WTERMSIG(r->wait_status);
  }
}

// Waits for pid; after timeout_s (> 0) kills its group, and after the program's end, on a
// timeout, whatever it left behind in its group (children of a hang).
void Reap(pid_t pid, int timeout_s, int64_t deadline_ms, ProgramResult* r) {
  if (r->timed_out) deadline_ms = NowMs() + 5000;
  if (!WaitUntil(pid, &r->wait_status, timeout_s > 0 || r->timed_out ? deadline_ms : -1)) {
    r->timed_out = true;
    KillGroup(pid);
    while (waitpid(pid, &r->wait_status, 0) < 0 && errno == EINTR) {
    }
  }
  if (r->timed_out) KillGroup(pid);
  Finish(r);
}

}  // namespace

RunOptions WithoutShimEnv(std::vector<std::string> env) {
  RunOptions opt;
  opt.env = std::move(env);
  opt.base_env = RunOptions::BaseEnv::kTestWithoutShim;
  return opt;
}

bool ProgramResult::Exited(int code) const {
  return !timed_out && wait_status >= 0 && WIFEXITED(wait_status) &&
         WEXITSTATUS(wait_status) == code;
}

bool ProgramResult::KilledBy(int sig) const {
  return wait_status >= 0 && WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == sig;
}

std::string ProgramResult::Describe() const {
  std::ostringstream s;
  if (timed_out) {
    s << "TIMED OUT (killed after the timeout: a hang)";
  } else if (wait_status < 0) {
    s << "did not start";
  } else if (WIFEXITED(wait_status)) {
    s << "exit " << WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    s << "killed by signal " << WTERMSIG(wait_status);
  }
  auto cap = [](const std::string& t) {
    return t.size() > 6000 ? t.substr(0, 3000) + "\n...\n" + t.substr(t.size() - 3000) : t;
  };
  s << "\n--- stdout ---\n" << cap(out) << "\n--- stderr ---\n" << cap(err) << "\n--- end ---";
  return s.str();
}

pid_t StartProgram(const std::vector<std::string>& argv, const RunOptions& opt, int in_fd,
                   int out_fd, int err_fd, std::string* error) {
  std::vector<std::string> envs = BuildEnv(opt);
  std::vector<char*> cargv, cenv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const std::string& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  int fds[3] = {in_fd >= 0 ? in_fd : null, out_fd >= 0 ? out_fd : null,
                err_fd >= 0 ? err_fd : null};
  pid_t pid = -1;
  if (opt.run_as) {
    // posix_spawn cannot change credentials. The child only sets up and execs.
    pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      for (int i = 0; i < 3; ++i) dup2(fds[i], i);
      if (setgroups(0, nullptr) != 0 || setgid(opt.gid) != 0 || setuid(opt.uid) != 0) _exit(126);
      execve(cargv[0], cargv.data(), cenv.data());
      _exit(127);
    }
    if (pid < 0 && error) *error = std::string("fork: ") + strerror(errno);
  } else {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    for (int i = 0; i < 3; ++i) posix_spawn_file_actions_adddup2(&fa, fds[i], i);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    int rc = posix_spawn(&pid, cargv[0], &fa, &attr, cargv.data(), cenv.data());
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      pid = -1;
      if (error) *error = "posix_spawn " + argv[0] + ": " + strerror(rc);
    }
  }
  if (null >= 0) close(null);
  return pid;
}

ProgramResult WaitProgram(pid_t pid, int timeout_s) {
  ProgramResult r;
  r.pid = pid;
  if (pid < 0) return r;
  Reap(pid, timeout_s, NowMs() + timeout_s * 1000LL, &r);
  return r;
}

ProgramResult RunProgram(const std::vector<std::string>& argv, const RunOptions& opt) {
  ProgramResult r;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    r.err = std::string("pipe: ") + strerror(errno);
    return r;
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.err = std::string("pipe: ") + strerror(errno);
    close(out_pipe[0]);
    close(out_pipe[1]);
    return r;
  }
  r.pid = StartProgram(argv, opt, -1, out_pipe[1], opt.stderr_to_stdout ? out_pipe[1] : err_pipe[1],
                       &r.err);
  close(out_pipe[1]);
  close(err_pipe[1]);
  int64_t deadline = NowMs() + opt.timeout_s * 1000LL;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = r.pid < 0 ? 0 : 2;
  while (open_fds > 0) {
    int wait_ms = -1;
    if (opt.timeout_s > 0) {
      int64_t left = deadline - NowMs();
      if (left <= 0) {
        r.timed_out = true;
        KillGroup(r.pid);
        break;
      }
      wait_ms = static_cast<int>(left > 1000 ? 1000 : left);
    }
    if (poll(fds, 2, wait_ms) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& f : fds)
    if (f.fd >= 0) close(f.fd);
  if (r.pid >= 0) Reap(r.pid, opt.timeout_s, deadline, &r);
  return r;
}

ProgramResult RunProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         int timeout_s) {
  RunOptions opt;
  opt.env = env;
  opt.timeout_s = timeout_s;
  return RunProgram(argv, opt);
}

StartedProgram StartProgramToFiles(const std::vector<std::string>& argv, const RunOptions& opt,
                                   const std::string& out_path, const std::string& err_path) {
  StartedProgram s;
  s.out_path = out_path;
  s.err_path = err_path;
  int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (o >= 0 && e >= 0) s.pid = StartProgram(argv, opt, -1, o, e);
  if (o >= 0) close(o);
  if (e >= 0) close(e);
  return s;
}

ProgramResult WaitForFiles(const StartedProgram& s, int timeout_s) {
  ProgramResult r = WaitProgram(s.pid, timeout_s);
  r.out = ReadFileOrEmpty(s.out_path);
  r.err = ReadFileOrEmpty(s.err_path);
  return r;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace forkguard::test_support
