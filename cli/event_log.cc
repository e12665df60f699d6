#include "cli/event_log.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

namespace forkguard::cli {
namespace {

// Longest line the reader accepts; the shim writes lines of a few KiB.
constexpr size_t kMaxLineBytes = 1 << 20;
// Largest file read (a log file this big is not something the shim wrote).
constexpr size_t kMaxFileBytes = size_t{1} << 30;
// Per file and kind of problem, this many notes name their line; the rest are counted.
constexpr int kNotesPerKind = 3;

// Collects notes for one file, naming the first few lines of each kind of
// problem and counting the rest, so a file of junk gives a short report.
class FileNotes {
 public:
  FileNotes(std::string_view file, LogSet* out) : file_(file), out_(out) {}
  ~FileNotes() {
    for (const auto& [kind, n] : extra_)
      if (n > 0)
        out_->notes.push_back({file_, "… and " + std::to_string(n) + " more line(s): " + kind});
  }
  void Add(int line, const std::string& kind, const std::string& detail) {
    ++out_->lines_skipped;
    int& seen = seen_[kind];
    if (seen++ < kNotesPerKind) {
      out_->notes.push_back(
          {file_ + ":" + std::to_string(line), kind + (detail.empty() ? "" : ": " + detail)});
    } else {
      ++extra_[kind];
    }
  }

 private:
  std::string file_;
  LogSet* out_;
  std::map<std::string, int> seen_;
  std::map<std::string, int> extra_;
};

bool LooksBinary(std::string_view line) {
  for (char c : line)
    if (c == '\0') return true;
  return false;
}

// "forkguard.event/1" or "forkguard.event/1.3" -> 1; -1 when not ours.
int SchemaMajor(const std::string& schema) {
  constexpr std::string_view kPrefix = "forkguard.event/";
  if (schema.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  int major = 0;
  size_t i = kPrefix.size();
  if (i >= schema.size()) return -1;
  for (; i < schema.size() && schema[i] != '.'; ++i) {
    if (schema[i] < '0' || schema[i] > '9' || major > 100000) return -1;
    major = major * 10 + (schema[i] - '0');
  }
  return major;
}

void ParseLine(std::string_view line, int lineno, bool last_unterminated, FileNotes* notes,
               std::map<std::pair<std::string, int64_t>, size_t>* by_proc,
               std::string_view file_name, LogSet* out) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  bool blank = std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t'; });
  if (blank) return;
  if (line.size() > kMaxLineBytes) {
    notes->Add(lineno, "line too long", std::to_string(line.size()) + " bytes, skipped");
    return;
  }
  if (LooksBinary(line)) {
    notes->Add(lineno, "binary data, not a JSON line", "");
    return;
  }
  JsonValue v;
  std::string err;
  if (!ParseJson(line, &v, &err)) {
    if (last_unterminated)
      notes->Add(lineno, "truncated last line (the process died while writing?)", err);
    else
      notes->Add(lineno, "not JSON", err);
    return;
  }
  if (!v.is_object()) {
    notes->Add(lineno, "not a JSON object", "");
    return;
  }
  const JsonValue* schema = v.Find("schema");
  if (!schema || !schema->is_string()) {
    notes->Add(lineno, "no \"schema\" field, not a forkguard event", "");
    return;
  }
  int major = SchemaMajor(schema->string_value());
  if (major != 1) {
    if (major < 0)
      notes->Add(lineno, "unknown schema, skipped", JsonQuote(schema->string_value()));
    else
      notes->Add(lineno,
                 "schema " + JsonQuote(schema->string_value()) +
                     " is a major version this forkguard does not read (it reads " +
                     std::string(kEventSchema) + "), skipped",
                 "");
    return;
  }
  const JsonValue* type = v.Find("event");
  if (!type || !type->is_string() || type->string_value().empty()) {
    notes->Add(lineno, "no \"event\" field, skipped", "");
    return;
  }
  int64_t pid = v.GetInt("pid", -1);
  if (pid <= 0) {
    notes->Add(lineno, "no valid \"pid\", skipped", "");
    return;
  }
  std::string host = v.GetString("host", "?");
  // Two jobs' processes on one host may have the same pid: never one process.
  auto key = std::make_pair(host + '\x1f' + v.GetString("job"), pid);
  auto it = by_proc->find(key);
  if (it == by_proc->end()) {
    ProcessLog p;
    p.file = std::string(file_name);
    p.host = host;
    p.pid = pid;
    out->processes.push_back(std::move(p));
    it = by_proc->emplace(key, out->processes.size() - 1).first;
  }
  ProcessLog& p = out->processes[it->second];
  Event e;
  e.type = type->string_value();
  e.ts_ns = v.GetInt("ts_ns", 0);
  e.seq = v.GetInt("seq", -1);
  e.tid = v.GetInt("tid", 0);
  e.line = lineno;
  if (p.ppid <= 0) p.ppid = v.GetInt("ppid", -1);
  if (p.prog.empty()) p.prog = v.GetString("prog");
  if (!p.rank) {
    const JsonValue* r = v.Find("rank");
    if (r && r->is_int()) p.rank = r->int_value();
  }
  if (!p.local_rank) {
    const JsonValue* r = v.Find("local_rank");
    if (r && r->is_int()) p.local_rank = r->int_value();
  }
  if (p.job.empty()) p.job = v.GetString("job");
  if (e.ts_ns > 0 && (p.first_ts_ns == 0 || e.ts_ns < p.first_ts_ns)) p.first_ts_ns = e.ts_ns;
  e.body = std::move(v);
  p.events.push_back(std::move(e));
  ++out->lines_used;
}

void ReadFile(const std::string& path, LogSet* out) {
  bool is_stdin = path == "-";  // `forkguard report -`: a stream of lines
  int fd = is_stdin ? dup(STDIN_FILENO)
                    : open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    out->notes.push_back({path, std::string("cannot open: ") + strerror(errno)});
    return;
  }
  struct stat st;
  if (!is_stdin && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    out->notes.push_back({path, "not a regular file, skipped"});
    close(fd);
    return;
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      out->notes.push_back(
          {path, std::string("read error: ") + strerror(errno) + " (using what was read)"});
      break;
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > kMaxFileBytes) {
      out->notes.push_back({path, "larger than 1 GiB, only the first 1 GiB is read"});
      break;
    }
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  ++out->files_read;
  if (text.empty()) {
    out->notes.push_back({path, "empty file"});
    return;
  }
  ParseLogText(path, text, out);
}

void Walk(const std::string& dir, int depth, int* found, LogSet* out) {
  DIR* d = opendir(dir.c_str());
  if (!d) {
    out->notes.push_back({dir, std::string("cannot read directory: ") + strerror(errno)});
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
    if (lstat(p.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (depth < 8) Walk(p, depth + 1, found, out);
    } else if (S_ISREG(st.st_mode) && n.size() > 6 && n.compare(n.size() - 6, 6, ".jsonl") == 0) {
      ++*found;
      ReadFile(p, out);
    }
  }
}

}  // namespace

std::optional<uint64_t> ParseAddress(const JsonValue* v) {
  if (!v) return std::nullopt;
  if (v->is_int() && v->int_value() >= 0) return static_cast<uint64_t>(v->int_value());
  if (!v->is_string()) return std::nullopt;
  const std::string& s = v->string_value();
  size_t i = 0;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    i = 2;
    base = 16;
  }
  if (i >= s.size() || s.size() - i > 16 + (base == 10 ? 4 : 0)) return std::nullopt;
  uint64_t r = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return std::nullopt;
    if (r > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base))
      return std::nullopt;
    r = r * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  return r;
}

Stack ParseStack(const JsonValue* v) {
  Stack out;
  if (!v || !v->is_array()) return out;
  for (const auto& f : v->array()) {
    Frame fr;
    if (f.is_object()) {
      if (const JsonValue* py = f.Find("py"); py && py->is_object()) {
        fr.python = true;
        fr.py_file = py->GetString("file");
        fr.py_line = py->GetInt("line", 0);
        fr.py_func = py->GetString("func");
      } else {
        fr.ip = ParseAddress(f.Find("ip")).value_or(0);
        fr.obj = f.GetString("obj");
        fr.off = ParseAddress(f.Find("off"));
        fr.sym = f.GetString("sym");
        fr.symoff = f.GetString("symoff");
      }
    } else if (auto ip = ParseAddress(&f)) {
      fr.ip = *ip;  // raw ips (child_segv reg_stack)
    } else {
      continue;
    }
    out.push_back(std::move(fr));
    if (out.size() >= 256) break;
  }
  return out;
}

void ParseLogText(std::string_view file_name, std::string_view text, LogSet* out) {
  FileNotes notes(file_name, out);
  std::map<std::pair<std::string, int64_t>, size_t> by_proc;
  int lineno = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    ++lineno;
    size_t nl = text.find('\n', pos);
    bool unterminated = nl == std::string_view::npos;
    size_t end = unterminated ? text.size() : nl;
    ParseLine(text.substr(pos, end - pos), lineno, unterminated, &notes, &by_proc, file_name, out);
    pos = unterminated ? text.size() : nl + 1;
  }
}

void ReadLogs(const std::vector<std::string>& paths, LogSet* out) {
  for (const auto& p : paths) {
    if (p == "-") {
      ReadFile(p, out);
      continue;
    }
    struct stat st;
    if (stat(p.c_str(), &st) != 0) {
      out->notes.push_back({p, std::string("cannot read: ") + strerror(errno)});
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      int found = 0;
      Walk(p, 0, &found, out);
      if (found == 0) out->notes.push_back({p, "no event logs (*.jsonl) in this directory"});
    } else {
      ReadFile(p, out);
    }
  }
}

}  // namespace forkguard::cli
