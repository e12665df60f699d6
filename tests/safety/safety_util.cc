#include "tests/safety/safety_util.h"

#include "tests/support/event_v2.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tests/support/runfiles.h"

extern char** environ;

namespace forkguard::safety {
namespace {

std::vector<std::string> BuildEnv(const RunOptions& opt) {
  std::vector<std::string> envs;
  if (opt.keep_env) {
    for (char** e = environ; *e; ++e) {
      std::string v = *e;
      auto starts = [&v](const std::string& p) { return v.rfind(p, 0) == 0; };
      if (starts("FORKGUARD_") || starts("LD_PRELOAD=") || starts("LD_LIBRARY_PATH=") ||
          starts("RDMAV_FORK_SAFE=") || starts("IBV_FORK_SAFE=")) {
        continue;
      }
      // A variable given in opt.env replaces the inherited one (getenv takes the first).
      bool overridden = false;
      for (const std::string& o : opt.env) {
        overridden |= starts(o.substr(0, o.find('=') + 1));
      }
      if (!overridden) envs.push_back(v);
    }
  }
  for (const std::string& e : opt.env) envs.push_back(e);
  return envs;
}

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

// fork+exec from the test (never under the shim: the test binary is not preloaded).
pid_t Spawn(const std::vector<std::string>& argv, const RunOptions& opt, int out_fd, int err_fd) {
  std::vector<std::string> envs = BuildEnv(opt);
  std::vector<char*> cargv, cenv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const std::string& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  pid_t pid = fork();
  if (pid != 0) return pid;
  setpgid(0, 0);
  int devnull = open("/dev/null", O_RDONLY);
  dup2(devnull, 0);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  if (opt.run_as) {
    if (setgroups(0, nullptr) != 0 || setgid(opt.gid) != 0 || setuid(opt.uid) != 0) _exit(126);
  }
  execve(cargv[0], cargv.data(), cenv.data());
  _exit(127);
}

void KillGroup(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

bool WaitWithDeadline(pid_t pid, int* status, int64_t deadline_ms) {
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return true;
    if (NowMs() > deadline_ms) return false;
    usleep(2000);
  }
}

}  // namespace

bool Run::Exited(int code) const {
  return !timed_out && status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == code;
}

std::string Run::Describe() const {
  std::ostringstream s;
  if (timed_out) {
    s << "TIMED OUT (watchdog killed it: a hang)";
  } else if (status < 0) {
    s << "did not start";
  } else if (WIFEXITED(status)) {
    s << "exit " << WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    s << "killed by signal " << WTERMSIG(status);
  }
  auto cap = [](const std::string& t) {
    return t.size() > 6000 ? t.substr(0, 3000) + "\n...\n" + t.substr(t.size() - 3000) : t;
  };
  s << "\n--- stdout ---\n" << cap(out) << "\n--- stderr ---\n" << cap(err);
  return s.str();
}

Run RunProgram(const std::vector<std::string>& argv, const RunOptions& opt) {
  Run run;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) return run;
  run.pid = Spawn(argv, opt, out_pipe[1], err_pipe[1]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (run.pid < 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return run;
  }
  int64_t deadline = NowMs() + opt.watchdog_seconds * 1000LL;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&run.out, &run.err};
  int open_fds = 2;
  while (open_fds > 0) {
    int64_t left = deadline - NowMs();
    if (left <= 0) {
      run.timed_out = true;
      KillGroup(run.pid);
      break;
    }
    int pr = poll(fds, 2, static_cast<int>(left > 1000 ? 1000 : left));
    if (pr < 0 && errno != EINTR) break;
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
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  if (!WaitWithDeadline(run.pid, &run.status, run.timed_out ? NowMs() + 5000 : deadline)) {
    run.timed_out = true;
    KillGroup(run.pid);
    waitpid(run.pid, &run.status, 0);
  }
  // Whatever the program left behind in its group (children of a hang) goes too.
  if (run.timed_out) KillGroup(run.pid);
  return run;
}

Started Start(const std::vector<std::string>& argv, const RunOptions& opt, const std::string& tag,
              const std::string& dir) {
  Started s;
  s.out_path = dir + "/" + tag + ".out";
  s.err_path = dir + "/" + tag + ".err";
  int o = open(s.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int e = open(s.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (o >= 0 && e >= 0) s.pid = Spawn(argv, opt, o, e);
  if (o >= 0) close(o);
  if (e >= 0) close(e);
  return s;
}

Run Wait(const Started& s, int watchdog_seconds) {
  Run run;
  run.pid = s.pid;
  if (s.pid < 0) return run;
  if (!WaitWithDeadline(s.pid, &run.status, NowMs() + watchdog_seconds * 1000LL)) {
    run.timed_out = true;
    KillGroup(s.pid);
    waitpid(s.pid, &run.status, 0);
  }
  run.out = ReadFile(s.out_path);
  run.err = ReadFile(s.err_path);
  return run;
}

std::vector<LogLine> LogDir::Of(const std::string& event) const {
  std::vector<LogLine> r;
  for (const LogLine& l : lines) {
    if (l.Event() == event) r.push_back(l);
  }
  return r;
}

LogDir ReadLogDir(const std::string& dir, bool allow_truncated_last) {
  LogDir d;
  DIR* dp = opendir(dir.c_str());
  if (dp == nullptr) {
    d.problems.push_back("cannot open " + dir);
    return d;
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(dp)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    names.push_back(n);
  }
  closedir(dp);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    struct stat st;
    if (lstat((dir + "/" + n).c_str(), &st) == 0) d.file_modes[n] = st.st_mode & 07777;
    if (n.size() < 6 || n.substr(n.size() - 6) != ".jsonl") {
      d.other_files.push_back(n);
      continue;
    }
    d.files.push_back(n);
    std::string text = ReadFile(dir + "/" + n);
    size_t pos = 0;
    int line_no = 0;
    testing_support::EventV2Expander v2;  // /2: header, modules and stacks folded in
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      ++line_no;
      bool last = nl == std::string::npos;
      std::string line = text.substr(pos, last ? std::string::npos : nl - pos);
      pos = last ? text.size() : nl + 1;
      if (last) {
        if (!allow_truncated_last) {
          d.problems.push_back(n + ":" + std::to_string(line_no) +
                               ": unterminated last line: " + line.substr(0, 200));
        }
        break;
      }
      std::string v2_problem;
      std::optional<std::string> expanded = v2.Expand(line, &v2_problem);
      if (!v2_problem.empty()) {
        d.problems.push_back(n + ":" + std::to_string(line_no) + ": " + v2_problem);
      }
      if (!expanded) continue;
      line = *expanded;
      LogLine l;
      l.file = n;
      l.line_no = line_no;
      std::string error;
      if (!cli::ParseJson(line, &l.json, &error) || !l.json.is_object()) {
        d.problems.push_back(n + ":" + std::to_string(line_no) + ": " + error + ": " +
                             line.substr(0, 200));
        continue;
      }
      d.lines.push_back(std::move(l));
    }
  }
  return d;
}

std::string MakeDir(const std::string& prefix, bool world_readable) {
  std::string base = world_readable ? "/tmp" : "";
  if (base.empty()) {
    const char* t = getenv("TEST_TMPDIR");
    base = t && *t ? t : "/tmp";
  }
  std::string tmpl = base + "/" + prefix + ".XXXXXX";
  if (!mkdtemp(tmpl.data())) {
    perror("mkdtemp");
    abort();
  }
  if (world_readable) chmod(tmpl.c_str(), 0755);
  return tmpl;
}

void RemoveTree(const std::string& path) {
  if (path.empty() || path == "/") return;
  std::string cmd = "rm -rf '" + path + "'";
  if (system(cmd.c_str()) != 0) fprintf(stderr, "could not remove %s\n", path.c_str());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string CopyInto(const std::string& src, const std::string& dir) {
  std::string base = src.substr(src.rfind('/') + 1);
  std::string dst = dir + "/" + base;
  std::string data = ReadFile(src);
  struct stat st;
  mode_t mode = stat(src.c_str(), &st) == 0 ? (st.st_mode & 0777) : 0755;
  int fd = open(dst.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode | 0444);
  if (fd < 0 || write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
    fprintf(stderr, "copy %s -> %s failed\n", src.c_str(), dst.c_str());
    abort();
  }
  fchmod(fd, mode | 0444);
  close(fd);
  return dst;
}

int CountLines(const std::string& text, const std::string& prefix) {
  int n = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (testing_support::StripShimLinePrefix(line).rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

namespace {
std::string PrivateDir() {
  static std::string dir = [] {
    std::string d = MakeDir("fg-safety-bin", /*world_readable=*/true);
    mkdir((d + "/lib").c_str(), 0755);
    static std::string to_remove = d;
    atexit([] { RemoveTree(to_remove); });
    return d;
  }();
  return dir;
}
}  // namespace

std::string Shim() {
  static std::string p = CopyInto(testing::Runfile("shim/libforkguard.so"), PrivateDir());
  return p;
}

std::string Preload() {
  // A sanitizer-built shim must come after its sanitizer runtime in the search order
  // (ASan checks that its runtime is first; TSan's interceptors must see the calls the
  // shim forwards): preload the runtime this test process itself uses, then the shim.
  static std::string v = [] {
    std::string maps = ReadFile("/proc/self/maps");
    std::istringstream in(maps);
    std::string line;
    while (std::getline(in, line)) {
      size_t slash = line.find('/');
      if (slash == std::string::npos) continue;
      std::string path = line.substr(slash);
      std::string base = path.substr(path.rfind('/') + 1);
      if (base.rfind("libasan.so", 0) == 0 || base.rfind("libtsan.so", 0) == 0) {
        return path + ":" + Shim();
      }
    }
    return Shim();
  }();
  return v;
}

std::string StubLibDir() {
  static std::string d = [] {
    std::string lib = PrivateDir() + "/lib";
    CopyInto(testing::Runfile("tests/stub_ibverbs/lib/libibverbs.so.1"), lib);
    CopyInto(testing::Runfile("tests/stub_ibverbs/lib/librdmacm.so.1"), lib);
    return lib;
  }();
  return d;
}

std::string Program(const std::string& rel) {
  return CopyInto(testing::Runfile(rel), PrivateDir());
}

}  // namespace forkguard::safety
