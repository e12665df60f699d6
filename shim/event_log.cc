#include "shim/event_log.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "shim/child_path.h"
#include "shim/log_dir.h"
#include "shim/stderr_line.h"

namespace forkguard {
namespace {

constinit EventLog g_log;

}  // namespace

FORKGUARD_CHILD_PATH EventLog& GlobalEventLog() { return g_log; }

void AppendJsonHex(TextBuffer& b, uint64_t v) { b.Char('"').Ptr(v).Char('"'); }

void AppendJsonStack(TextBuffer& b, const RawStack& stack, bool symbolize, const PythonStack* py) {
  b.Char('[');
  for (int i = 0; i < stack.depth; ++i) {
    if (i > 0) b.Char(',');
    b.Str("{\"ip\":");
    AppendJsonHex(b, stack.ips[i]);
    if (symbolize) {
      SymbolizedFrame f = Symbolize(stack.ips[i], i > 0);
      if (f.obj != nullptr) {
        b.Str(",\"obj\":").JsonStr(f.obj).Str(",\"off\":");
        AppendJsonHex(b, f.obj_off);
      }
      if (f.sym != nullptr) {
        b.Str(",\"sym\":").JsonStr(f.sym).Str(",\"symoff\":");
        AppendJsonHex(b, f.sym_off);
      }
    }
    b.Char('}');
  }
  if (py != nullptr) {
    for (int i = 0; i < py->depth; ++i) {
      if (i > 0 || stack.depth > 0) b.Char(',');
      const PythonStack::Frame& f = py->frames[i];
      b.Str("{\"py\":{\"file\":").JsonStr(f.file).Str(",\"line\":").Dec(f.line);
      b.Str(",\"func\":").JsonStr(f.func).Str("}}");
    }
  }
  b.Char(']');
}

void EventLog::Configure(const char* dir, const LogIdentity& id, WarningSink warn, void* warn_ctx,
                         bool quiet) {
  id_ = id;
  quiet_ = quiet;
  if (dir == nullptr || dir[0] == '\0') return;
  // Expanded here, once per process: a forked child keeps its parent's directory.
  char path[sizeof(dir_)];
  TextBuffer expanded(path, sizeof(path));
  char why_buf[600];
  TextBuffer why(why_buf, sizeof(why_buf));
  LogPathFields fields;
  fields.host = id.host;
  fields.pid = getpid();
  fields.rank = id.rank;
  fields.job = id.job;
  if (!ExpandLogPath(dir, fields, expanded, why) || !MakeLogDir(path, why)) {
    if (warn != nullptr) {
      char buf[1200];
      TextBuffer line(buf, sizeof(buf));
      line.Str("forkguard: ignoring FORKGUARD_LOG=");
      AppendShownValue(line, dir);
      line.Str(": ").Str(why.data());
      line.Str("; using no event log");
      warn(line.data(), warn_ctx);
    }
    return;
  }
  dir = path;
  size_t n = strnlen(dir, sizeof(dir_) - 1);
  memcpy(dir_, dir, n);
  dir_[n] = '\0';
  void* p =
      mmap(nullptr, kLargeLineBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  large_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  p = mmap(nullptr, kLargeLineBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  nested_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  start_ns_ = RealtimeNs();
  enabled_ = true;
}

int EventLog::OpenOwnFile() {
  pid_t pid = getpid();
  if (fd_ >= 0 && fd_pid_ == pid) return fd_;
  char path[1400];
  TextBuffer p(path, sizeof(path));
  p.Str(dir_).Str("/forkguard.").Str(id_.host).Char('.').Dec(pid).Char('.').Dec(start_ns_);
  p.Str(".jsonl");
  if (p.truncated()) return -1;
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return -1;
  fd_ = fd;
  fd_pid_ = pid;
  return fd_;
}

void EventLog::Begin(TextBuffer& b, const char* event) {
  b.Clear();
  b.Str("{\"schema\":\"").Str(kEventSchema).Str("\",\"event\":\"").Str(event).Str("\"");
  b.Str(",\"ts_ns\":").Dec(RealtimeNs());
  b.Str(",\"pid\":").Dec(getpid()).Str(",\"ppid\":").Dec(getppid());
  b.Str(",\"tid\":").Dec(CurrentTid());
  b.Str(",\"host\":").JsonStr(id_.host).Str(",\"prog\":").JsonStr(id_.prog);
  b.Str(",\"rank\":");
  if (id_.rank >= 0) {
    b.Dec(id_.rank);
  } else {
    b.Str("null");
  }
  b.Str(",\"local_rank\":");
  if (id_.local_rank >= 0) {
    b.Dec(id_.local_rank);
  } else {
    b.Str("null");
  }
  b.Str(",\"job\":");
  if (id_.job != nullptr && id_.job[0] != '\0') {
    b.JsonStr(id_.job);
  } else {
    b.Str("null");
  }
  b.Str(",\"seq\":").Dec(seq_.fetch_add(1, std::memory_order_relaxed));
}

namespace {

// strerror() may allocate (locale): the errors a log write can meet, by hand.
const char* WriteErrorText(int err) {
  switch (err) {
    case ENOSPC:
      return "No space left on device";
    case EDQUOT:
      return "Disk quota exceeded";
    case EFBIG:
      return "File too large";
    case EIO:
      return "Input/output error";
    case EROFS:
      return "Read-only file system";
    case EACCES:
      return "Permission denied";
    case ENOENT:
      return "No such file or directory";
    case EMFILE:
    case ENFILE:
      return "Too many open files";
    case EEXIST:
    case ELOOP:
      return "refusing a symlink or an existing non-file";
    default:
      return nullptr;
  }
}

}  // namespace

void EventLog::Fail(const char* what, int err) {
  if (broken_) return;
  broken_ = true;
  if (quiet_) return;
  char buf[1400];
  TextBuffer line(buf, sizeof(buf));
  line.Str("forkguard: event log: cannot ").Str(what).Str(" in ");
  AppendShownValue(line, dir_);
  line.Str(": ");
  if (const char* text = WriteErrorText(err); text != nullptr) {
    line.Str(text);
  } else {
    line.Str("errno ").Dec(err);
  }
  line.Str("; no more events are logged by pid ").Dec(getpid());
  WriteStderrLines(line.data(), line.size());
}

bool EventLog::WriteLine(const char* p, size_t n) {
  if (broken_) return false;
  int fd = OpenOwnFile();
  if (fd < 0) {
    Fail("create this process's file", errno);
    return false;
  }
  // One write(2): a line is never split between processes. A short or failed write (full
  // disk) ends logging for this process, so no later line lands after a torn one.
  for (;;) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w == static_cast<ssize_t>(n)) return true;
    Fail("write", w < 0 ? errno : ENOSPC);
    return false;
  }
}

void EventLog::End(TextBuffer& b) {
  if (!enabled_ || broken_) return;
  b.Str("}\n");
  if (b.truncated()) {
    // Keep the line valid JSON: replace it with a note that says what was lost.
    char small[512];
    TextBuffer n(small, sizeof(small));
    Begin(n, "note");
    n.Str(",\"text\":\"an event did not fit in ").UDec(kLargeLineBytes);
    n.Str(" bytes and was dropped\"}\n");
    WriteLine(n.data(), n.size());
    return;
  }
  WriteLine(b.data(), b.size());
}

FORKGUARD_CHILD_PATH void EventLog::ResetInChild(int64_t start_ns) {
  // Without a log nothing here is used: do not dirty the page (copy-on-write after fork).
  if (!enabled_) {
    lock_.ResetInChild();
    return;
  }
  nested_busy_.store(false, std::memory_order_relaxed);
  broken_ = false;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  fd_pid_ = 0;
  start_ns_ = start_ns;
  seq_.store(0, std::memory_order_relaxed);
  lock_.ResetInChild();
}

EventLog::LargeLine::LargeLine(EventLog& log) : log_(log) {
  if (!log.enabled_ || log.large_ == nullptr) return;
  if (log.lock_.HeldByThisThread()) {
    if (log.nested_ == nullptr || log.nested_busy_.exchange(true)) return;
    nested_ = true;
    buf_ = log.nested_;
  } else {
    if (!log.lock_.Lock()) return;  // given up on (a leak of ours): drop this event
    buf_ = log.large_;
  }
  text_ = TextBuffer(buf_, kLargeLineBytes);
}

EventLog::LargeLine::~LargeLine() {
  if (buf_ == nullptr) return;
  if (nested_) {
    log_.nested_busy_.store(false);
  } else {
    log_.lock_.Unlock();
  }
}

}  // namespace forkguard
