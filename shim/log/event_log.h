// EventLog: the FORKGUARD_LOG=DIR JSON-lines writer (schema: formats/EVENT_LOG.md).
//
// One file per process; a forked child opens its own on its first event. Each line is
// formatted into a preallocated buffer and written with one write(2) on an O_APPEND
// descriptor, so lines from many processes never interleave. No malloc on any path that
// can run at fork time, in the child, or in a signal handler.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <atomic>
#include <cstdint>

#include "formats/event_schema.h"
#include "formats/text_buffer.h"
#include "shim/base/config.h"
#include "shim/base/sys.h"
#include "shim/stack/python_stack.h"
#include "shim/stack/stack.h"
#include "shim/state/state.h"

namespace forkguard {

constexpr const char* kEventSchema = schema::kEventV2;

struct LogIdentity {
  const char* host = "";
  const char* prog = "";
  long rank = -1;
  long local_rank = -1;
  const char* job = "";  // "" when unknown
  long step = -1;        // Slurm job step; -1: none (no "step" in the header)
};

class EventLog {
 public:
  // Expands DIR's templates (%h %p %r %j %%) and makes it a directory we can log into,
  // creating what is missing (shim/log/log_dir.h). On failure `warn` gets one line and the log
  // stays disabled.
  void Configure(const char* dir, const LogIdentity& id, WarningSink warn, void* warn_ctx,
                 bool quiet = false);
  bool enabled() const { return enabled_; }
  // This process has written a line into a file of its own (not a forked child that has
  // logged nothing yet). Async-signal-safe.
  bool HasOwnFile();

  // Common fields: `{"event":..,"ts":..,"seq":N` (+ `"tid"` off the main thread; no
  // closing brace). The file's header record (written when the file is opened) carries the
  // schema and the process's identity.
  void Begin(TextBuffer& b, const char* event);

  // The id of `stack` (+ `py`) in this process's file, writing its module and stack records
  // first when it is new there: a reader never meets an id before its record. -1 when the
  // table cannot be used now (this thread holds the log's lock: a signal handler interrupted
  // a log write; the table is full; the log is off): write the stack inline then.
  int StackId(const RawStack& stack, const PythonStack* py);
  // As StackId, for a caller that holds lock() (a LargeLine that owns it).
  int StackIdLocked(const RawStack& stack, const PythonStack* py);
  // Closes the object and writes the line. A line that did not fit is replaced by a short
  // `note` so every line stays valid JSON. Async-signal-safe.
  void End(TextBuffer& b);
  // A file of its own for another process: one that exec'd a program which runs without the
  // shim (shim/base/exec_watch.h). Its header names `pid`, `ppid` and `prog`; then one line,
  // `{"event":EVENT,"ts":0,"seq":0` + `fields` + `}`. Written and closed at once; nothing of
  // this process's own log changes (a vforked child shares it). Async-signal-safe.
  bool WriteForeignFile(pid_t pid, pid_t ppid, const char* prog, const char* event,
                        const char* fields);

  // In a forked child: the parent's descriptor and counter are not ours. Async-signal-safe.
  void ResetInChild(int64_t start_ns);

  // Registrations at a site this file already has an mr_register line for are counted, not
  // written (formats/EVENT_LOG.md, `mr_counts`). A site is a registration stack with its call
  // (nullptr: ibv_reg_mr) and dontfork. Counting is lock-free (per-site atomics); the counts
  // go out with the next line this process writes (End) and, when no line comes, with the
  // first count or deregistration 100 ms or more after the last such flush. All of these are
  // async-signal-safe.
  static uint64_t RegistrationKey(const RawStack& stack, const char* call, bool dontfork);
  // True: counted. False: the site has no line in this file yet (or the log is off): the
  // caller writes the mr_register line, then calls AddRegistrationSite.
  bool CountRegistration(uint64_t key, uint64_t bytes);
  // After the site's mr_register line, whose stack id is `stack_id`, was written in the file of
  // `epoch` (file_epoch() before the line): later registrations there are counted.
  void AddRegistrationSite(uint64_t key, int stack_id, const char* call, bool dontfork,
                           uint32_t epoch);
  // A deregistration of a tracked MR: counted, never a line of its own.
  void CountDeregistration();
  // Writes everything counted and not yet written, as lines of their own (exec, exit).
  void FlushCounts();
  // Which file the tables describe (changes when a forked child starts its own).
  uint32_t file_epoch() const { return epoch_.get(); }

  // The clock of `ts` and `start_ns` (ns since the epoch): CLOCK_REALTIME, or
  // CLOCK_REALTIME_COARSE on a kernel whose clocksource the vDSO cannot read (see Configure).
  // Async-signal-safe.
  int64_t NowNs() const;

  // A large preallocated buffer for events with stacks, guarded by a lock. When this thread
  // already holds it (a fork from a signal handler that interrupted a log write), a second
  // buffer reserved for that case is used. `ok()` is false when the log is disabled, a
  // buffer could not be mapped, or both are in use by this thread.
  class LargeLine {
   public:
    explicit LargeLine(EventLog& log);
    ~LargeLine();
    bool ok() const { return buf_ != nullptr; }
    // The log's lock is held by this line (not the nested buffer): StackIdLocked may run.
    bool owns_lock() const { return buf_ != nullptr && !nested_; }
    TextBuffer& text() { return text_; }

   private:
    EventLog& log_;
    bool nested_ = false;
    char* buf_ = nullptr;
    TextBuffer text_{nullptr, 0};
  };

  StateLock& lock() { return lock_; }

 private:
  pid_t Pid();
  pid_t Claim();
  void StartOwnFile(int64_t start_ns, bool close_fd);
  int OpenOwnFile();
  int OpenInDir(const char* name, int flags);
  bool WriteHeader(int fd, pid_t pid);
  struct Module;
  struct StackSlot;
  int ModuleOf(uintptr_t ip, bool* rescanned);
  bool EnsureModuleWritten(int m);
  void ScanModules();
  bool WriteLine(const char* p, size_t n);
  // Both in one writev(2): a line and the mr_counts line that goes out with it.
  bool WriteLines(const char* p, size_t n, const char* q, size_t m);
  void WriteLineAndCounts(const char* p, size_t n);
  struct RegSite;
  // Formats an mr_counts line of what is pending (at most kCountSitesPerLine sites, the
  // rest stays pending) into buf; its length, 0 when nothing was pending.
  size_t TakeCounts(char* buf, size_t cap);
  void FlushByClock();
  void Fail(const char* what, int err);

  bool enabled_ = false;
  char dir_[1024] = {};
  // The directory, opened by Configure (shim/log/log_dir.h): files are created in it with openat.
  // Its identity tells a descriptor the program closed or reused; dir_ and the template's
  // fixed prefix are for walking the path again then.
  ZeroFilled<int, -1> dir_fd_;
  dev_t dir_dev_ = 0;
  ino_t dir_ino_ = 0;
  size_t dir_fixed_len_ = 0;
  // Every member starts as zero bytes (sys.h, ZeroFilled): the global log is .bss.
  LogIdentity id_{nullptr, nullptr, 0, 0, nullptr, 0};  // set by Configure (zeros: .bss)
  ZeroFilled<int, -1> fd_;                              // -1: not open
  // The process whose file fd_, seq_ and the tables are (0: a forked child's, not claimed
  // yet). Claim() compares it with Pid() before every line.
  std::atomic<pid_t> owner_pid_{0};
  // getpid(), cached in a page the kernel zeroes in the child of every fork (MADV_WIPEONFORK);
  // null when that is not available (then Pid() asks the kernel every time).
  std::atomic<pid_t>* pid_word_ = nullptr;
  clockid_t clock_ = CLOCK_REALTIME;
  int64_t start_ns_ = 0;
  std::atomic<long> seq_{0};
  StateLock lock_;
  char* large_ = nullptr;
  char* nested_ = nullptr;
  std::atomic<bool> nested_busy_{false};
  // A write failed (full disk...): said once, nothing more is written by this process.
  bool broken_ = false;
  bool quiet_ = false;
  // Stack and module tables (mmap'd at Configure; entries of an older epoch are not in this
  // file: a forked child bumps the epoch, one word, and re-emits what it uses).
  ZeroFilled<uint32_t, 1> epoch_;
  int next_stack_id_ = 0;
  int next_module_id_ = 0;
  StackSlot* stacks_ = nullptr;
  Module* modules_ = nullptr;
  int module_count_ = 0;
  char* record_ = nullptr;  // buffer for module/stack records, under lock_
  // Registration sites of this file (mmap'd at Configure): open addressing by key, entries of
  // an older epoch count as empty; reg_order_ lists this file's in the order they were added
  // (reg_count_ of them, published with release), for the flush to walk.
  RegSite* reg_sites_ = nullptr;
  int32_t* reg_order_ = nullptr;
  std::atomic<int> reg_count_{0};
  // Some count may be pending (set after a count is bumped, cleared by the flush that takes
  // them: seq_cst on both sides, so no count is left behind unflagged).
  std::atomic<bool> counts_dirty_{false};
  std::atomic<uint64_t> deregs_{0};        // tracked deregistrations not written yet
  std::atomic<int64_t> last_flush_ns_{0};  // of the clock's last flush (0: not started)
};

constexpr size_t kLargeLineBytes = 256 * 1024;

EventLog& GlobalEventLog();

// One line of `type` in a stack buffer of `Bytes`: nothing when the log is off, else Begin,
// `fields(b)` (the event's own keys), End. Malloc-free: the fork path writes events.
template <size_t Bytes, typename Fields>
void WriteEvent(const char* type, Fields&& fields) {
  EventLog& log = GlobalEventLog();
  if (!log.enabled()) return;
  char buf[Bytes];
  TextBuffer b(buf, sizeof(buf));
  log.Begin(b, type);
  fields(b);
  log.End(b);
}

// JSON helpers shared by the writers.
// `[{"ip":"0x..","obj":"..","off":"0x..","sym":"..","symoff":"0x.."},...]`; with
// `symbolize` false (child, signal handler) only "ip".
// Python frames (`py`, innermost first) follow the native frames as
// {"py":{"file","line","func"}}.
void AppendJsonStack(TextBuffer& b, const RawStack& stack, bool symbolize,
                     const PythonStack* py = nullptr);
// `,"<key>":<id>` from log.StackId, or an inline array of raw addresses when that is -1.
// `locked`: the caller holds the log's lock (a LargeLine that owns it).
void AppendStackRef(TextBuffer& b, EventLog& log, const char* key, const RawStack& stack,
                    const PythonStack* py, bool locked);
void AppendJsonHex(TextBuffer& b, uint64_t v);  // "0x.." as a string

}  // namespace forkguard
