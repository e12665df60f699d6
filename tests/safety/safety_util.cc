#include "tests/safety/safety_util.h"

#include <dirent.h>
#include <fcntl.h>
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

#include "cli/event_log.h"
#include "tests/support/event_records.h"
#include "tests/support/runfiles.h"

namespace forkguard::safety {

RunOptions SafetyRunOptions() {
  RunOptions opt = test_support::WithoutShimEnv({});
  opt.timeout_s = 120;
  return opt;
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
    std::string text = ReadFileOrEmpty(dir + "/" + n);
    size_t end = text.rfind('\n') + 1;  // 0 when there is no newline at all
    if (end < text.size() && !allow_truncated_last) {
      int line_no = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
      d.problems.push_back(n + ":" + std::to_string(line_no) +
                           ": unterminated last line: " + text.substr(end, 200));
    }
    // Every complete line, through the product's reader: each event with its header's
    // fields and its stacks as frames.
    std::vector<cli::Note> notes;
    for (test_support::EventRecord& r :
         test_support::DecodeEventRecords(n, std::string_view(text).substr(0, end), {}, &notes))
      d.lines.push_back({n, r.line, std::move(r.json)});
    for (const cli::Note& note : notes) d.problems.push_back(note.where + ": " + note.text);
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

std::string CopyInto(const std::string& src, const std::string& dir) {
  std::string base = src.substr(src.rfind('/') + 1);
  std::string dst = dir + "/" + base;
  std::string data = ReadFileOrEmpty(src);
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
    if (test_support::StripShimLinePrefix(line).rfind(prefix, 0) == 0) ++n;
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
  static std::string p = CopyInto(test_support::Runfile("shim/libforkguard.so"), PrivateDir());
  return p;
}

std::string Preload() {
  // A sanitizer-built shim must come after its sanitizer runtime in the search order
  // (ASan checks that its runtime is first; TSan's interceptors must see the calls the
  // shim forwards): preload the runtime this test process itself uses, then the shim.
  static std::string v = [] {
    std::string maps = ReadFileOrEmpty("/proc/self/maps");
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
    CopyInto(test_support::Runfile("tests/stub_ibverbs/lib/libibverbs.so.1"), lib);
    CopyInto(test_support::Runfile("tests/stub_ibverbs/lib/librdmacm.so.1"), lib);
    return lib;
  }();
  return d;
}

std::string Program(const std::string& rel) {
  return CopyInto(test_support::Runfile(rel), PrivateDir());
}

}  // namespace forkguard::safety
