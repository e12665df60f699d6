// Reading log files and directories into a LogSet, in parallel.
#include "cli/log_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "cli/exec_join.h"
#include "cli/fork_tally.h"
#include "cli/process_fold.h"

namespace forkguard::cli {
namespace {

// (host, pid) from a name the shim gives a log, "DIR/forkguard.HOST.PID.START_NS.jsonl"
// (HOST may hold dots); nullopt for any other name.
std::optional<std::pair<std::string, int64_t>> ShimFileIdentity(std::string_view path) {
  size_t slash = path.rfind('/');
  std::string_view n = slash == std::string_view::npos ? path : path.substr(slash + 1);
  // The shim's files, and forkguard watch's (forkguard-watch.HOST.PID.START_NS.jsonl).
  constexpr std::string_view kSuffix = ".jsonl";
  std::string_view prefix =
      n.substr(0, 16) == "forkguard-watch." ? "forkguard-watch." : "forkguard.";
  if (n.size() <= prefix.size() + kSuffix.size() || n.substr(0, prefix.size()) != prefix ||
      n.substr(n.size() - kSuffix.size()) != kSuffix)
    return std::nullopt;
  n = n.substr(prefix.size(), n.size() - prefix.size() - kSuffix.size());
  size_t dot2 = n.rfind('.');
  if (dot2 == std::string_view::npos || dot2 == 0) return std::nullopt;
  size_t dot1 = n.rfind('.', dot2 - 1);
  if (dot1 == std::string_view::npos || dot1 == 0) return std::nullopt;
  auto digits = [](std::string_view d) {
    return !d.empty() && d.size() <= 19 && d.find_first_not_of("0123456789") == d.npos;
  };
  std::string_view pid_text = n.substr(dot1 + 1, dot2 - dot1 - 1);
  if (!digits(pid_text) || !digits(n.substr(dot2 + 1))) return std::nullopt;
  // A name is as hostile as a line: a pid the kernel cannot give is no shim's name.
  int64_t pid = 0;
  auto [end, ec] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
  if (ec != std::errc() || end != pid_text.data() + pid_text.size() || pid <= 0 ||
      pid > limits::kMaxPid)
    return std::nullopt;
  return std::make_pair(std::string(n.substr(0, dot1)), pid);
}

// The note for a file or directory `st` that `policy` does not take ("" when it does).
std::string NotTaken(const struct stat& st, const ReadPolicy& policy) {
  if (!policy.owner) return "";
  if (S_ISLNK(st.st_mode)) return "a symbolic link, not followed (--owner)";
  if (st.st_uid != *policy.owner)
    return "owned by uid " + std::to_string(st.st_uid) + ", not " + std::to_string(*policy.owner) +
           ": skipped (--owner)";
  return "";
}

void ReadFile(const std::string& path, const WithLogs* with_logs, const ReadPolicy& policy,
              LogSet* out) {
  bool is_stdin = path == "-";  // `forkguard report -`: a stream of lines
  int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (policy.owner ? O_NOFOLLOW : 0);
  int fd = is_stdin ? dup(STDIN_FILENO) : open(path.c_str(), flags);
  if (fd < 0) {
    out->notes.push_back({path, errno == ELOOP && policy.owner
                                    ? "a symbolic link, not followed (--owner)"
                                    : std::string("cannot open: ") + strerror(errno)});
    return;
  }
  struct stat st;
  if (!is_stdin && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    out->notes.push_back({path, "not a regular file, skipped"});
    close(fd);
    return;
  }
  // Checked on the open file: what was read is what was checked.
  if (std::string why = is_stdin ? "" : NotTaken(st, policy); !why.empty()) {
    out->notes.push_back({path, why});
    close(fd);
    return;
  }
  ++out->files_read;
  FoldStream(fd, path, with_logs, out);
  close(fd);
}

// What ReadLogs does, in order: read a file, or say something about a path.
struct Item {
  std::string file;  // empty: a note only
  Note note;
};

// Files and directories already taken, by (device, inode): a log reached twice through
// symlinks (a job directory of links to per-host directories, a link loop) is read once.
struct Seen {
  std::set<std::pair<dev_t, ino_t>> dirs, files;
  bool First(std::set<std::pair<dev_t, ino_t>>& set, const struct stat& st) {
    return set.insert({st.st_dev, st.st_ino}).second;
  }
};

bool IsLogName(const std::string& n) {
  return n.size() > 6 && n.compare(n.size() - 6, 6, ".jsonl") == 0;
}

// Symlinks are followed, to files and to directories (collected logs are often links),
// unless `policy` says otherwise; each directory and each file is taken once, so a link
// loop ends.
void Walk(const std::string& dir, int depth, const ReadPolicy& policy, int* found,
          std::vector<Item>* items, Seen* seen) {
  DIR* d = opendir(dir.c_str());
  if (!d) {
    items->push_back({"", {dir, std::string("cannot read directory: ") + strerror(errno)}});
    return;
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    std::string p = dir + (dir.empty() || dir.back() == '/' ? "" : "/") + n;
    struct stat st;
    if ((policy.owner ? lstat(p.c_str(), &st) : stat(p.c_str(), &st)) != 0) {
      if (IsLogName(n)) items->push_back({"", {p, std::string("cannot read: ") + strerror(errno)}});
      continue;
    }
    if (std::string why = NotTaken(st, policy); !why.empty()) {
      if (S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode) || IsLogName(n))
        items->push_back({"", {p, why}});
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      if (depth < 8 && seen->First(seen->dirs, st)) Walk(p, depth + 1, policy, found, items, seen);
    } else if (S_ISREG(st.st_mode) && IsLogName(n)) {
      if (!seen->First(seen->files, st)) continue;  // the same file through another link
      ++*found;
      items->push_back({p, {}});
    }
  }
}

void Merge(LogSet&& part, LogSet* out) {
  for (auto& p : part.processes) out->processes.push_back(std::move(p));
  for (auto& n : part.notes) out->notes.push_back(std::move(n));
  out->files_read += part.files_read;
  out->lines_used += part.lines_used;
  out->lines_skipped += part.lines_skipped;
}

}  // namespace

bool ReadInputFile(const std::string& path, size_t max_bytes, std::string* text,
                   std::string* error) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    *error = strerror(errno);
    return false;
  }
  struct stat st;
  bool ok = fstat(fd, &st) == 0;
  if (!ok) {
    *error = strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    *error = "not a regular file";
    ok = false;
  } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    *error = "larger than " + std::to_string(max_bytes >> 20) + " MiB";
    ok = false;
  }
  text->clear();
  char buf[65536];
  while (ok) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = strerror(errno);
      ok = false;
    } else if (n == 0) {
      break;
    } else if (text->size() + static_cast<size_t>(n) > max_bytes) {
      *error = "larger than " + std::to_string(max_bytes >> 20) + " MiB";
      ok = false;
    } else {
      text->append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return ok;
}

void ReadLogs(const std::vector<std::string>& paths, LogSet* out, int threads,
              const ReadPolicy& policy) {
  std::vector<Item> items;
  Seen seen;
  for (const auto& p : paths) {
    if (p == "-") {
      items.push_back({p, {}});
      continue;
    }
    struct stat st;
    if ((policy.owner ? lstat(p.c_str(), &st) : stat(p.c_str(), &st)) != 0) {
      items.push_back({"", {p, std::string("cannot read: ") + strerror(errno)}});
      continue;
    }
    if (std::string why = NotTaken(st, policy); !why.empty()) {
      items.push_back({"", {p, why}});
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      int found = 0;
      seen.First(seen.dirs, st);
      Walk(p, 0, policy, &found, &items, &seen);
      if (found == 0) items.push_back({"", {p, "no event logs (*.jsonl) in this directory"}});
    } else if (!S_ISREG(st.st_mode) || seen.First(seen.files, st)) {
      items.push_back({p, {}});
    }
  }
  // The processes that have a log of their own, from the names the shim gives its files.
  WithLogs with_logs;
  bool with_logs_known = true;
  for (const Item& it : items) {
    if (it.file.empty()) continue;
    auto id = ShimFileIdentity(it.file);
    if (!id) {
      with_logs_known = false;
      break;
    }
    with_logs.insert(std::move(*id));
  }
  // Each file into its own LogSet, merged in order: the same result for any
  // number of threads.
  std::vector<LogSet> parts(items.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < items.size();) {
      if (items[i].file.empty())
        parts[i].notes.push_back(items[i].note);
      else
        ReadFile(items[i].file, with_logs_known ? &with_logs : nullptr, policy, &parts[i]);
    }
  };
  if (threads <= 0)
    threads = static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  threads = std::min<int>(threads, static_cast<int>(items.size()));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (auto& part : parts) Merge(std::move(part), out);
  JoinExecs(out);
  PreferShimRecords(out);
}

void PreferShimRecords(LogSet* out) {
  // The shim's records by host and pid: their program and the span of their events.
  struct Shim {
    std::string prog;
    int64_t first_ns, last_ns;
  };
  std::multimap<std::pair<std::string, int64_t>, Shim> shim;
  for (const ProcessLog& p : out->processes)
    if (!p.watcher) shim.insert({{p.host, p.pid}, {p.prog, p.first_ts_ns, p.summary.last_ts_ns}});
  // `p` is the process of a shim record of `key`; `during`: one whose events began before the
  // watcher first saw `p` and ended after (a container's pid 1 and host name recur: one
  // container after another), within 100 ms (the two clocks: the shim's may be coarse).
  auto logged_by_shim = [&](const ProcessLog& p, const std::pair<std::string, int64_t>& key,
                            bool during) {
    constexpr int64_t kSlackNs = 100'000'000;
    auto [from, to] = shim.equal_range(key);
    for (auto it = from; it != to; ++it) {
      const Shim& s = it->second;
      // The watcher names a program as /proc/PID/comm does: its first 15 bytes.
      if (!p.prog.empty() && !s.prog.empty() && s.prog.compare(0, 15, p.prog, 0, 15) != 0) continue;
      if (during && (p.first_ts_ns < s.first_ns - kSlackNs || p.first_ts_ns > s.last_ns + kSlackNs))
        continue;
      return true;
    }
    return false;
  };
  auto both = [&](const ProcessLog& p) {
    if (!p.watcher) return false;
    if (logged_by_shim(p, {p.host, p.pid}, false)) return true;
    // In a container with namespaces of its own, the shim logs the pid and host name the
    // process sees there.
    return p.ns_pid > 0 &&
           logged_by_shim(p, {p.ns_host.empty() ? p.host : p.ns_host, p.ns_pid}, true);
  };
  size_t before = out->processes.size();
  out->processes.erase(std::remove_if(out->processes.begin(), out->processes.end(), both),
                       out->processes.end());
  size_t n = before - out->processes.size();
  if (n > 0) {
    out->notes.push_back(
        {"forkguard watch", std::to_string(n) + " process" + (n == 1 ? "" : "es") +
                                " logged by both the shim and forkguard watch: the shim's " +
                                (n == 1 ? "record is" : "records are") +
                                " reported (it has the stacks)"});
  }
}

}  // namespace forkguard::cli
