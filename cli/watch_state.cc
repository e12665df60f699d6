#include "cli/watch_state.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/json.h"

namespace forkguard::cli {

Json WatchStateJson(const WatchState& s) {
  Json j = Json::object();
  j["pid"] = s.pid;
  j["enforce"] = s.enforce;
  j["hook"] = s.hook;
  j["log"] = s.log;
  j["lost"] = s.lost;
  Json procs = Json::object();
  for (const auto& [pid, p] : s.processes) {
    Json x = Json::object();
    x["forks"] = p.forks;
    x["refused"] = p.refused;
    x["last"] = p.last;
    procs[std::to_string(pid)] = std::move(x);
  }
  j["processes"] = std::move(procs);
  return j;
}

namespace {

// Writes `text` to DIR/NAME (DIR made 0755 if missing; a temporary file renamed into place,
// no symbolic link followed); false with *error.
bool WriteRootFile(const std::string& dir, const char* name, const std::string& text,
                   std::string* error) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    *error = "cannot create " + dir + ": " + strerror(errno);
    return false;
  }
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) {
    *error = "cannot open " + dir + ": " + strerror(errno);
    return false;
  }
  std::string tmp = std::string(name) + ".tmp." + std::to_string(getpid());
  int fd = openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) ok = close(fd) == 0 && ok;
  ok = ok && renameat(dfd, tmp.c_str(), dfd, name) == 0;
  if (!ok) {
    *error = "cannot write " + dir + "/" + name + ": " + strerror(errno);
    unlinkat(dfd, tmp.c_str(), 0);
  }
  close(dfd);
  return ok;
}

// DIR/NAME as a JSON object, when it is a regular file owned by root and writable by no one
// else.
std::optional<Json> ReadRootFile(const std::string& dir, const char* name) {
  int fd = open((dir + "/" + name).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::string text;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
      (st.st_mode & (S_IWGRP | S_IWOTH)) == 0 && st.st_size < (1 << 24)) {
    text.resize(static_cast<size_t>(st.st_size));
    ssize_t n = read(fd, text.data(), text.size());
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  close(fd);
  Json j;
  std::string error;
  if (text.empty() || !ParseJson(text, &j, &error) || !j.is_object()) return std::nullopt;
  return j;
}

}  // namespace

bool WriteWatchState(const WatchState& s, const std::string& dir, std::string* error) {
  Json j = WatchStateJson(s);
  j["schema"] = "forkguard.watch-state/1";
  return WriteRootFile(dir, kWatchStateFile, WriteJson(j, -1) + "\n", error);
}

bool WritePinnedWatch(const std::string& enforce, const std::string& hook, const std::string& dir,
                      std::string* error) {
  Json j = Json::object();
  j["schema"] = "forkguard.watch-pinned/1";
  j["enforce"] = enforce;
  j["hook"] = hook;
  return WriteRootFile(dir, kWatchPinnedFile, WriteJson(j, -1) + "\n", error);
}

void RemovePinnedWatch(const std::string& dir) { unlink((dir + "/" + kWatchPinnedFile).c_str()); }

int64_t CountPinnedLinks(const std::string& pin_dir) {
  DIR* d = opendir(pin_dir.c_str());
  if (d == nullptr) return errno == ENOENT ? 0 : -1;
  int64_t n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

std::optional<PinnedWatch> ReadPinnedWatch(const std::string& dir, const std::string& pin_dir) {
  PinnedWatch p;
  p.links = CountPinnedLinks(pin_dir);
  std::optional<Json> j = ReadRootFile(dir, kWatchPinnedFile);
  if (p.links == 0 || (p.links < 0 && !j)) return std::nullopt;
  if (j) {
    p.enforce = GetString(*j, "enforce");
    p.hook = GetString(*j, "hook");
  }
  return p;
}

void RemoveWatchState(const std::string& dir) { unlink((dir + "/" + kWatchStateFile).c_str()); }

std::optional<WatchState> ReadWatchState(const std::string& dir) {
  std::optional<Json> file = ReadRootFile(dir, kWatchStateFile);
  if (!file) return std::nullopt;
  const Json& j = *file;
  WatchState s;
  s.pid = GetInt(j, "pid", 0);
  if (s.pid <= 0 || (kill(static_cast<pid_t>(s.pid), 0) != 0 && errno == ESRCH))
    return std::nullopt;
  s.enforce = GetString(j, "enforce");
  s.hook = GetString(j, "hook");
  s.log = GetString(j, "log");
  s.lost = GetInt(j, "lost", 0);
  if (const Json* procs = FindMember(j, "processes"); procs != nullptr && procs->is_object()) {
    for (const auto& [key, x] : procs->items()) {
      WatchState::Proc p;
      p.forks = GetInt(x, "forks", 0);
      p.refused = GetInt(x, "refused", 0);
      p.last = GetString(x, "last");
      char* end = nullptr;
      long long pid = strtoll(key.c_str(), &end, 10);
      if (end != nullptr && *end == '\0' && pid > 0) s.processes[pid] = p;
    }
  }
  return s;
}

}  // namespace forkguard::cli
