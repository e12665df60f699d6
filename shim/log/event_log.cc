#include "shim/log/event_log.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "shim/base/child_path.h"
#include "shim/base/start_path.h"
#include "shim/base/stderr_line.h"
#include "shim/base/sys.h"
#include "shim/log/log_dir.h"
#include "shim/messages/message.h"

namespace forkguard {
namespace {

FORKGUARD_START_DATA constinit EventLog g_log;

constexpr int kMaxModules = 512;
constexpr int kStackSlots = 8192;  // power of two
constexpr int kStackProbes = 32;
constexpr size_t kRecordBytes = 64 * 1024;
// Registration sites counted per file: at most kMaxRegSites (a registration at a site past
// that keeps its line), in a table twice as large.
constexpr int kRegSlots = 2048;  // power of two
constexpr int kRegProbes = 16;
constexpr int kMaxRegSites = 1024;
// An mr_counts line: at most this many sites (a longest entry is ~120 bytes), so that its
// buffer can live on the stack of a signal handler's line.
constexpr int kCountSitesPerLine = 8;
constexpr size_t kCountLineBytes = 1280;
// Counts with no line to go with wait at most this long for a later count, deregistration
// or line to write them.
constexpr int64_t kCountsFlushNs = 100 * 1000 * 1000;

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

uint64_t MixStr(uint64_t h, const char* s) { return Mix(Fnv1aStr(h, s), 0xff); }

uint64_t HashStack(const RawStack& stack, const PythonStack* py) {
  uint64_t h = Mix(kFnv1aBasis, static_cast<uint64_t>(stack.depth));
  for (int i = 0; i < stack.depth; ++i) h = Mix(h, stack.ips[i]);
  if (py != nullptr) {
    for (int i = 0; i < py->depth; ++i) {
      h = MixStr(h, py->frames[i].file);
      h = MixStr(h, py->frames[i].func);
      h = Mix(h, static_cast<uint64_t>(py->frames[i].line));
    }
  }
  return h == 0 ? 1 : h;
}

// This thread's id, for the `tid` field, valid in process `pid` (a forked child's thread has
// its parent's copy, keyed by the parent's pid: asked again there).
struct LogThread {
  pid_t pid;
  pid_t tid;
};
__thread LogThread t_log_thread __attribute__((tls_model("initial-exec"))) = {0, 0};

// Whether CLOCK_REALTIME is a system call here: the vDSO reads the clocksources with a
// user-space counter (tsc, kvm-clock, arch_sys_counter, ...), not these. In a TCG guest
// (hpet: the TSC is "unstable") a CLOCK_REALTIME read cost 0.6 us plus the soft-TLB refill
// after it, CLOCK_REALTIME_COARSE 0.03 us.
bool RealtimeIsSyscall() {
  int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char name[64];
  ssize_t n = read(fd, name, sizeof(name) - 1);
  close(fd);
  if (n <= 0) return false;
  name[n] = '\0';
  if (name[n - 1] == '\n') name[n - 1] = '\0';
  for (const char* slow : {"hpet", "acpi_pm", "jiffies", "refined-jiffies", "pit"}) {
    if (strcmp(name, slow) == 0) return true;
  }
  return false;
}

}  // namespace

// One loaded object, as the loader's program headers describe it (dl_iterate_phdr: no file
// is read; the build-id note is in a loaded segment).
struct EventLog::Module {
  uintptr_t lo = 0;  // [lo, hi): its PT_LOAD segments
  uintptr_t hi = 0;
  uintptr_t base = 0;  // its first mapped byte (dladdr's dli_fbase): offsets are from here
  uint32_t epoch = 0;  // the file epoch its record was written in (0: never)
  int id = -1;
  int build_id_len = 0;
  uint8_t build_id[40] = {};
  char path[472] = {};
};

struct EventLog::StackSlot {
  uint64_t hash;
  uint32_t epoch;
  int32_t id;
};

// A registration site of this file: written by AddRegistrationSite under the lock (epoch
// last, with release), read and counted without it. `n` and `bytes` are taken by the flush
// with exchange: a count is written once or, when the process dies first, not at all.
struct EventLog::RegSite {
  std::atomic<uint64_t> key;
  std::atomic<uint32_t> epoch;  // the file's epoch once filled (0: never)
  int32_t stack_id;
  const char* call;  // nullptr: ibv_reg_mr
  bool dontfork;
  std::atomic<uint64_t> n;
  std::atomic<uint64_t> bytes;
};

FORKGUARD_CHILD_PATH EventLog& GlobalEventLog() { return g_log; }

void AppendJsonHex(TextBuffer& b, uint64_t v) { b.Char('"').Ptr(v).Char('"'); }

namespace {

// A stack's Python frames as {"py":{...}} elements, after the native ones when `after_native`.
void AppendPythonFrames(TextBuffer& b, const PythonStack* py, bool after_native) {
  if (py == nullptr) return;
  for (int i = 0; i < py->depth; ++i) {
    if (i > 0 || after_native) b.Char(',');
    const PythonStack::Frame& f = py->frames[i];
    b.FirstKey(schema::kKeyPy)
        .FirstKey(schema::kKeyFile)
        .JsonStr(f.file)
        .Key(schema::kKeyLine)
        .Dec(f.line);
    b.Key(schema::kKeyFunc).JsonStr(f.func).Str("}}");
  }
}

}  // namespace

void AppendJsonStack(TextBuffer& b, const RawStack& stack, bool symbolize, const PythonStack* py) {
  b.Char('[');
  for (int i = 0; i < stack.depth; ++i) {
    if (i > 0) b.Char(',');
    b.FirstKey(schema::kKeyIp);
    AppendJsonHex(b, stack.ips[i]);
    if (symbolize) {
      SymbolizedFrame f = Symbolize(stack.ips[i], i > 0);
      if (f.obj != nullptr) {
        b.Key(schema::kKeyObj).JsonStr(f.obj).Key(schema::kKeyOff);
        AppendJsonHex(b, f.obj_off);
      }
      if (f.sym != nullptr) {
        b.Key(schema::kKeySym).JsonStr(f.sym).Key(schema::kKeySymoff);
        AppendJsonHex(b, f.sym_off);
      }
    }
    b.Char('}');
  }
  AppendPythonFrames(b, py, stack.depth > 0);
  b.Char(']');
}

void AppendStackRef(TextBuffer& b, EventLog& log, const char* key, const RawStack& stack,
                    const PythonStack* py, bool locked) {
  int id = locked ? log.StackIdLocked(stack, py) : log.StackId(stack, py);
  b.Key(key);
  if (id >= 0) {
    b.Dec(id);
    return;
  }
  b.Char('[');
  for (int i = 0; i < stack.depth; ++i) {
    if (i > 0) b.Char(',');
    AppendJsonHex(b, stack.ips[i]);
  }
  b.Char(']');
}

void EventLog::ScanModules() {
  struct Cb {
    static int Visit(dl_phdr_info* info, size_t, void* data) {
      auto* ctx = static_cast<std::pair<Module*, int*>*>(data);
      Module m;
      bool any = false;
      for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
        uintptr_t hi = lo + ph.p_memsz;
        if (!any || lo < m.lo) m.lo = lo;
        if (!any || hi > m.hi) m.hi = hi;
        any = true;
      }
      if (!any) return 0;
      uintptr_t page = PageSize();
      m.base = m.lo & ~(page - 1);
      int n = *ctx->second;
      for (int i = 0; i < n; ++i) {
        if (ctx->first[i].lo == m.lo && ctx->first[i].hi == m.hi) return 0;  // known
      }
      if (n >= kMaxModules) return 1;
      for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
        const char* end = p + ph.p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
          const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
          const char* name = p + sizeof(ElfW(Nhdr));
          const char* desc = name + ((nh->n_namesz + 3) & ~3u);
          const char* next = desc + ((nh->n_descsz + 3) & ~3u);
          if (next > end) break;
          if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
              nh->n_descsz <= sizeof(m.build_id)) {
            memcpy(m.build_id, desc, nh->n_descsz);
            m.build_id_len = static_cast<int>(nh->n_descsz);
            break;
          }
          p = next;
        }
        if (m.build_id_len > 0) break;
      }
      const char* path = info->dlpi_name;
      if (path == nullptr || path[0] == '\0') path = n == 0 ? MainExecutableFile() : "";
      CopyCString(m.path, sizeof(m.path), path);
      ctx->first[n] = m;
      ++*ctx->second;
      return 0;
    }
  };
  std::pair<Module*, int*> ctx{modules_, &module_count_};
  dl_iterate_phdr(Cb::Visit, &ctx);
}

int EventLog::ModuleOf(uintptr_t ip, bool* rescanned) {
  for (;;) {
    // Newest first: an address reused after a dlclose belongs to the object loaded last.
    for (int i = module_count_ - 1; i >= 0; --i) {
      if (ip >= modules_[i].lo && ip < modules_[i].hi) return i;
    }
    if (*rescanned) return -1;
    *rescanned = true;
    ScanModules();
  }
}

bool EventLog::EnsureModuleWritten(int m) {
  Module& mod = modules_[m];
  if (mod.epoch == epoch_.get()) return true;
  TextBuffer b(record_, kRecordBytes);
  b.FirstKey(schema::kKeyEvent).Quoted(schema::kModule).Key(schema::kKeyId).Dec(next_module_id_);
  b.Key(schema::kKeyPath).JsonStr(mod.path).Key(schema::kKeyBase);
  AppendJsonHex(b, mod.base);
  b.Key(schema::kKeyBuildId);
  if (mod.build_id_len > 0) {
    b.Char('"');
    b.HexBytes(mod.build_id, static_cast<size_t>(mod.build_id_len));
    b.Char('"');
  } else {
    b.Str("null");
  }
  b.Str("}\n");
  if (b.truncated() || !WriteLine(b.data(), b.size())) return false;
  mod.id = next_module_id_++;
  mod.epoch = epoch_.get();
  return true;
}

int EventLog::StackId(const RawStack& stack, const PythonStack* py) {
  if (!enabled_ || broken_ || lock_.HeldByThisThread()) return -1;
  if (!lock_.Lock()) return -1;
  int id = StackIdLocked(stack, py);
  lock_.Unlock();
  return id;
}

int EventLog::StackIdLocked(const RawStack& stack, const PythonStack* py) {
  if (!enabled_ || broken_ || stacks_ == nullptr || modules_ == nullptr || record_ == nullptr) {
    return -1;
  }
  Claim();  // a child's ids are of its own file
  uint64_t h = HashStack(stack, py);
  StackSlot* slot = nullptr;
  for (int i = 0; i < kStackProbes; ++i) {
    StackSlot& s = stacks_[(h + static_cast<uint64_t>(i)) & (kStackSlots - 1)];
    if (s.epoch == epoch_.get() && s.hash == h) return s.id;
    if (s.epoch != epoch_.get()) {  // empty, or of an older file (a parent's)
      slot = &s;
      break;
    }
  }
  if (slot == nullptr) return -1;  // full around here: inline
  // Module records first, then the stack record, then the table entry: an id is only ever
  // handed out once the lines it needs are in the file.
  int mods[RawStack::kCapacity];
  bool rescanned = false;
  for (int i = 0; i < stack.depth; ++i) {
    mods[i] = ModuleOf(stack.ips[i], &rescanned);
    if (mods[i] >= 0 && !EnsureModuleWritten(mods[i])) return -1;
  }
  TextBuffer b(record_, kRecordBytes);
  int id = next_stack_id_;
  b.FirstKey(schema::kKeyEvent).Quoted(schema::kStackRecord).Key(schema::kKeyId).Dec(id);
  b.Key(schema::kKeyFrames).Char('[');
  for (int i = 0; i < stack.depth; ++i) {
    if (i > 0) b.Char(',');
    if (mods[i] >= 0) {
      b.Char('[').Dec(modules_[mods[i]].id).Char(',').UDec(stack.ips[i] - modules_[mods[i]].base);
    } else {
      b.Str("[-1,").UDec(stack.ips[i]);
    }
    b.Char(']');
  }
  AppendPythonFrames(b, py, stack.depth > 0);
  b.Str("]}\n");
  if (b.truncated() || !WriteLine(b.data(), b.size())) return -1;
  ++next_stack_id_;
  slot->hash = h;
  slot->id = id;
  slot->epoch = epoch_.get();
  return id;
}

uint64_t EventLog::RegistrationKey(const RawStack& stack, const char* call, bool dontfork) {
  uint64_t h = HashStack(stack, nullptr);
  h = Mix(h, reinterpret_cast<uintptr_t>(call));  // a name of the shim's own rodata
  return Mix(h, dontfork ? 1 : 2);
}

bool EventLog::CountRegistration(uint64_t key, uint64_t bytes) {
  if (!enabled_ || broken_ || reg_sites_ == nullptr) return false;
  Claim();  // a child's sites are of its own file
  const uint32_t epoch = epoch_.get();
  for (int i = 0; i < kRegProbes; ++i) {
    RegSite& s = reg_sites_[(key + static_cast<uint64_t>(i)) & (kRegSlots - 1)];
    // A slot of another epoch is empty here: this file's entries never have holes before them.
    if (s.epoch.load(std::memory_order_acquire) != epoch) return false;
    if (s.key.load(std::memory_order_relaxed) != key) continue;
    s.n.fetch_add(1);
    s.bytes.fetch_add(bytes);
    // After the counts (seq_cst): a flush that cleared the flag before this load takes them.
    if (!counts_dirty_.load()) counts_dirty_.store(true);
    FlushByClock();
    return true;
  }
  return false;
}

void EventLog::AddRegistrationSite(uint64_t key, int stack_id, const char* call, bool dontfork,
                                   uint32_t epoch) {
  if (stack_id < 0 || !enabled_ || broken_ || reg_sites_ == nullptr) return;
  if (lock_.HeldByThisThread() || !lock_.Lock()) return;
  int count = reg_count_.load(std::memory_order_relaxed);
  if (epoch == epoch_.get() && count < kMaxRegSites) {
    for (int i = 0; i < kRegProbes; ++i) {
      int idx = static_cast<int>((key + static_cast<uint64_t>(i)) & (kRegSlots - 1));
      RegSite& s = reg_sites_[idx];
      if (s.epoch.load(std::memory_order_relaxed) == epoch) {
        if (s.key.load(std::memory_order_relaxed) == key) break;  // another thread's line
        continue;
      }
      s.key.store(key, std::memory_order_relaxed);
      s.stack_id = stack_id;
      s.call = call;
      s.dontfork = dontfork;
      s.n.store(0, std::memory_order_relaxed);
      s.bytes.store(0, std::memory_order_relaxed);
      // In the flush's list before anyone can count here (the epoch): a count is never made
      // where no flush looks (this thread may stop for long between the two stores, and a
      // line in flight would then carry every count made meanwhile).
      reg_order_[count] = idx;
      reg_count_.store(count + 1, std::memory_order_release);
      s.epoch.store(epoch, std::memory_order_release);
      break;
    }
  }
  lock_.Unlock();
}

void EventLog::CountDeregistration() {
  if (!enabled_ || broken_ || reg_sites_ == nullptr) return;
  Claim();
  deregs_.fetch_add(1);
  if (!counts_dirty_.load()) counts_dirty_.store(true);
  FlushByClock();
}

// One flush per kCountsFlushNs at most, by the thread that moves the mark.
void EventLog::FlushByClock() {
  int64_t now = NowNs();
  int64_t last = last_flush_ns_.load(std::memory_order_relaxed);
  if (last != 0 && now - last < kCountsFlushNs) return;
  if (!last_flush_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) return;
  if (last != 0) FlushCounts();  // the first count starts the clock
}

size_t EventLog::TakeCounts(char* buf, size_t cap) {
  if (reg_sites_ == nullptr || !counts_dirty_.load(std::memory_order_relaxed)) return 0;
  if (!counts_dirty_.exchange(false)) return 0;
  struct Taken {
    int slot;
    uint64_t n;
    uint64_t bytes;
  };
  Taken taken[kCountSitesPerLine];
  int k = 0;
  bool more = false;
  const uint32_t epoch = epoch_.get();
  const int count = reg_count_.load(std::memory_order_acquire);
  for (int i = 0; i < count; ++i) {
    int idx = reg_order_[i];
    RegSite& s = reg_sites_[idx];
    if (s.epoch.load(std::memory_order_acquire) != epoch) continue;  // not counted in yet
    if (s.n.load() == 0 && s.bytes.load() == 0) continue;
    if (k == kCountSitesPerLine) {
      more = true;  // for the next line
      break;
    }
    uint64_t n = s.n.exchange(0);
    uint64_t bytes = s.bytes.exchange(0);
    if (n != 0 || bytes != 0) taken[k++] = Taken{idx, n, bytes};
  }
  uint64_t deregs = deregs_.exchange(0);
  if (more) counts_dirty_.store(true);
  if (k == 0 && deregs == 0) return 0;
  TextBuffer b(buf, cap);
  Begin(b, schema::kMrCounts);
  b.Key(schema::kKeySites).Char('[');
  for (int j = 0; j < k; ++j) {
    const RegSite& s = reg_sites_[taken[j].slot];
    if (j > 0) b.Char(',');
    b.FirstKey(schema::kKeyStack).Dec(s.stack_id);
    if (s.call != nullptr) b.Key(schema::kKeyCall).Quoted(s.call);
    if (s.dontfork) b.Key(schema::kKeyDontfork).Str("true");
    b.Key(schema::kKeyN).UDec(taken[j].n);
    b.Key(schema::kKeyBytes).UDec(taken[j].bytes).Char('}');
  }
  b.Char(']');
  if (deregs != 0) b.Key(schema::kKeyDeregs).UDec(deregs);
  b.Str("}\n");
  return b.truncated() ? 0 : b.size();  // sized for the longest: never truncated
}

void EventLog::FlushCounts() {
  if (!enabled_ || broken_) return;
  // Each line takes up to kCountSitesPerLine sites: as many lines as there are sites, at most.
  for (int i = 0; i <= kMaxRegSites / kCountSitesPerLine; ++i) {
    char buf[kCountLineBytes];
    size_t n = TakeCounts(buf, sizeof(buf));
    if (n == 0 || !WriteLine(buf, n)) return;
  }
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
  int dir_fd = -1;
  if (ExpandLogPath(dir, fields, expanded, why)) {
    dir_fd = OpenLogDir(path, LogDirFixedPrefix(dir), &why);
  }
  if (dir_fd < 0) {
    if (warn != nullptr) {
      char buf[1200];
      TextBuffer line(buf, sizeof(buf));
      FormatIgnoredVariable(line, "FORKGUARD_LOG", dir, why.data(), "no event log");
      warn(line.data(), warn_ctx);
    }
    return;
  }
  CopyCString(dir_, sizeof(dir_), path);
  dir_fixed_len_ = LogDirFixedPrefix(dir);
  struct stat st;
  if (fstat(dir_fd, &st) == 0) {
    dir_dev_ = st.st_dev;
    dir_ino_ = st.st_ino;
  }
  dir_fd_.set(dir_fd);
  large_ = static_cast<char*>(MapAnonymous(kLargeLineBytes));
  nested_ = static_cast<char*>(MapAnonymous(kLargeLineBytes));
  stacks_ = static_cast<StackSlot*>(MapAnonymous(sizeof(StackSlot) * kStackSlots));
  modules_ = static_cast<Module*>(MapAnonymous(sizeof(Module) * kMaxModules));
  record_ = static_cast<char*>(MapAnonymous(kRecordBytes));
  reg_sites_ = static_cast<RegSite*>(MapAnonymous(sizeof(RegSite) * kRegSlots));
  reg_order_ = static_cast<int32_t*>(MapAnonymous(sizeof(int32_t) * kMaxRegSites));
  if (reg_order_ == nullptr) reg_sites_ = nullptr;  // no counting: every registration a line
  // The pid, cached where every kind of child sees 0 (raw clone() and syscall(SYS_fork) run
  // no atfork handler): a line asks the kernel nothing but its write (Linux >= 4.14).
  size_t page = static_cast<size_t>(PageSize());
  void* p = MapAnonymous(page);
  if (p != nullptr && madvise(p, page, MADV_WIPEONFORK) == 0) {
    pid_word_ = new (p) std::atomic<pid_t>(0);
  } else if (p != nullptr) {
    munmap(p, page);
  }
  owner_pid_.store(Pid(), std::memory_order_relaxed);
  // One clock per process, for start_ns and every ts (never mixed: ts stays monotonic).
  clock_ = RealtimeIsSyscall() ? CLOCK_REALTIME_COARSE : CLOCK_REALTIME;
  start_ns_ = NowNs();
  enabled_ = true;
}

int64_t EventLog::NowNs() const {
  timespec ts;
  clock_gettime(clock_, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool EventLog::HasOwnFile() {
  return enabled_ && !broken_ && fd_.get() >= 0 &&
         owner_pid_.load(std::memory_order_relaxed) == Pid();
}

pid_t EventLog::Pid() {
  if (pid_word_ == nullptr) return getpid();
  pid_t pid = pid_word_->load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = getpid();
    pid_word_->store(pid, std::memory_order_relaxed);
  }
  return pid;
}

// Before every line: this process owns the file state. A forked child's ResetInChild left it
// unowned; a child no fork wrapper or atfork handler saw (raw clone(), clone3(),
// syscall(SYS_fork)) finds its parent's, and starts its own file and tables here as
// ResetInChild would (it used to go on with the parent's seq and stack ids in a file of its
// own). Async-signal-safe.
pid_t EventLog::Claim() {
  pid_t pid = Pid();
  pid_t owner = owner_pid_.load(std::memory_order_relaxed);
  if (owner == pid) return pid;
  // The parent's descriptor is left open, not closed: a clone(CLONE_FILES) child shares it.
  if (owner_pid_.compare_exchange_strong(owner, pid) && owner != 0) StartOwnFile(NowNs(), false);
  return pid;
}

// What a child's file starts with: no descriptor, seq 0, empty tables.
FORKGUARD_CHILD_PATH void EventLog::StartOwnFile(int64_t start_ns, bool close_fd) {
  broken_ = false;
  if (fd_.get() >= 0 && close_fd) close(fd_.get());
  fd_.set(-1);
  start_ns_ = start_ns;
  seq_.store(0, std::memory_order_relaxed);
  // The parent's stack and module records are in the parent's file: this file starts its
  // own tables (entries of the old epoch count as empty; nothing is cleared here).
  epoch_.set(epoch_.get() + 1);
  next_stack_id_ = 0;
  next_module_id_ = 0;
  // The parent's counts are the parent's to write; this file counts at its own sites.
  if (reg_sites_ != nullptr) {
    reg_count_.store(0, std::memory_order_relaxed);
    deregs_.store(0, std::memory_order_relaxed);
    counts_dirty_.store(false, std::memory_order_relaxed);
    last_flush_ns_.store(0, std::memory_order_relaxed);
  }
  if (t_log_thread.pid != 0) t_log_thread = LogThread{0, 0};
}

// Creates `name` in the log directory through its descriptor: the one Configure opened when
// it is still that directory, else the path walked again with the same checks (the program
// closed or reused the descriptor: a child of `subprocess` after close_fds). No component is
// resolved by path after the checks. Async-signal-safe.
int EventLog::OpenInDir(const char* name, int flags) {
  int dir = dir_fd_.get();
  struct stat st;
  bool ours = dir >= 0 && fstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev == dir_dev_ &&
              st.st_ino == dir_ino_;
  int walked = -1;
  if (!ours) {
    walked = OpenLogDir(dir_, dir_fixed_len_, nullptr);
    if (walked < 0) return -1;
    dir = walked;
  }
  int fd = openat(dir, name, flags | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (walked >= 0) {
    int saved = errno;
    close(walked);
    errno = saved;
  }
  return fd;
}

int EventLog::OpenOwnFile() {
  pid_t pid = Claim();
  if (fd_.get() >= 0) return fd_.get();
  char name[512];
  TextBuffer p(name, sizeof(name));
  p.Str("forkguard.").Str(id_.host).Char('.').Dec(pid).Char('.').Dec(start_ns_).Str(".jsonl");
  if (p.truncated()) return -1;
  int fd = OpenInDir(name, O_CREAT | O_APPEND);
  if (fd < 0) return -1;
  if (!WriteHeader(fd, pid)) {
    close(fd);
    return -1;
  }
  fd_.set(fd);
  return fd;
}

namespace {

void AppendDecOrNull(TextBuffer& b, long v) {
  if (v >= 0) {
    b.Dec(v);
  } else {
    b.Str("null");
  }
}

// A file's first line: the schema and the process's identity (what /1 repeated on every
// line). rank, local_rank, step: -1 when unknown (step is then left out); job: "" or null.
void AppendHeader(TextBuffer& b, const char* host, pid_t pid, pid_t ppid, const char* prog,
                  long rank, long local_rank, const char* job, long step, int64_t start_ns) {
  b.FirstKey(schema::kKeySchema).Quoted(schema::kEventV2);
  b.Key(schema::kKeyEvent).Quoted(schema::kHeader);
  b.Key(schema::kKeyHost).JsonStr(host).Key(schema::kKeyPid).Dec(pid);
  b.Key(schema::kKeyPpid).Dec(ppid).Key(schema::kKeyProg).JsonStr(prog);
  b.Key(schema::kKeyRank);
  AppendDecOrNull(b, rank);
  b.Key(schema::kKeyLocalRank);
  AppendDecOrNull(b, local_rank);
  b.Key(schema::kKeyJob);
  if (job != nullptr && job[0] != '\0') {
    b.JsonStr(job);
  } else {
    b.Str("null");
  }
  if (step >= 0) b.Key(schema::kKeyStep).Dec(step);
  b.Key(schema::kKeyStartNs).Dec(start_ns).Str("}\n");
}

}  // namespace

bool EventLog::WriteHeader(int fd, pid_t pid) {
  char buf[1024];
  TextBuffer b(buf, sizeof(buf));
  AppendHeader(b, id_.host, pid, getppid(), id_.prog, id_.rank, id_.local_rank, id_.job, id_.step,
               start_ns_);
  if (b.truncated()) return false;
  return WriteNoEintr(fd, b.data(), b.size()) == static_cast<ssize_t>(b.size());
}

bool EventLog::WriteForeignFile(pid_t pid, pid_t ppid, const char* prog, const char* event,
                                const char* fields) {
  if (!enabled_) return false;
  int64_t start = NowNs();
  char name[512];
  TextBuffer p(name, sizeof(name));
  p.Str("forkguard.").Str(id_.host).Char('.').Dec(pid).Char('.').Dec(start).Str(".jsonl");
  if (p.truncated()) return false;
  char buf[3072];
  TextBuffer b(buf, sizeof(buf));
  // Another program's file: this process's rank and step are not its.
  AppendHeader(b, id_.host, pid, ppid, prog, -1, -1, id_.job, -1, start);
  b.FirstKey(schema::kKeyEvent)
      .Quoted(event)
      .Key(schema::kKeyTs)
      .Char('0')
      .Key(schema::kKeySeq)
      .Char('0')
      .Str(fields)
      .Str("}\n");
  if (b.truncated()) return false;
  int fd = OpenInDir(name, O_CREAT | O_EXCL);
  if (fd < 0) return false;
  bool ok = WriteNoEintr(fd, b.data(), b.size()) == static_cast<ssize_t>(b.size());
  close(fd);
  return ok;
}

void EventLog::Begin(TextBuffer& b, const char* event) {
  b.Clear();
  pid_t pid = Claim();  // first: a child's seq and ts start from its own file
  b.FirstKey(schema::kKeyEvent).Quoted(event).Key(schema::kKeyTs).Dec(NowNs() - start_ns_);
  b.Key(schema::kKeySeq).Dec(seq_.fetch_add(1, std::memory_order_relaxed));
  if (t_log_thread.pid != pid)
    t_log_thread = LogThread{pid, static_cast<pid_t>(syscall(SYS_gettid))};
  if (t_log_thread.tid != pid) b.Key(schema::kKeyTid).Dec(t_log_thread.tid);
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
  FormatEventLogFailed(line, what, dir_, WriteErrorText(err), err, getpid());
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
  ssize_t w = WriteNoEintr(fd, p, n);
  if (w == static_cast<ssize_t>(n)) return true;
  Fail("write", w < 0 ? errno : ENOSPC);
  return false;
}

bool EventLog::WriteLines(const char* p, size_t n, const char* q, size_t m) {
  if (broken_) return false;
  int fd = OpenOwnFile();
  if (fd < 0) {
    Fail("create this process's file", errno);
    return false;
  }
  // One writev(2) on the O_APPEND descriptor: both lines land together, as one write would.
  iovec iov[2] = {{const_cast<char*>(p), n}, {const_cast<char*>(q), m}};
  ssize_t w;
  do {
    w = writev(fd, iov, 2);
  } while (w < 0 && errno == EINTR);
  if (w == static_cast<ssize_t>(n + m)) return true;
  Fail("write", w < 0 ? errno : ENOSPC);
  return false;
}

// Out of line: its buffer is on the stack only when counts are pending.
__attribute__((noinline)) void EventLog::WriteLineAndCounts(const char* p, size_t n) {
  char buf[kCountLineBytes];
  size_t m = TakeCounts(buf, sizeof(buf));
  if (m == 0) {
    WriteLine(p, n);
  } else {
    WriteLines(p, n, buf, m);
  }
}

void EventLog::End(TextBuffer& b) {
  if (!enabled_ || broken_) return;
  b.Str("}\n");
  if (b.truncated()) {
    // Keep the line valid JSON: replace it with a note that says what was lost.
    char small[512];
    TextBuffer n(small, sizeof(small));
    Begin(n, schema::kNote);
    n.Key(schema::kKeyText).Str("\"an event did not fit in ").UDec(kLargeLineBytes);
    n.Str(" bytes and was dropped\"}\n");
    WriteLine(n.data(), n.size());
    return;
  }
  // What was counted since the last line goes out with this one (formats/EVENT_LOG.md, mr_counts).
  if (counts_dirty_.load(std::memory_order_relaxed)) {
    WriteLineAndCounts(b.data(), b.size());
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
  // A child we are told about late (a raw clone that CheckUnseenChild found) may have
  // started its own file already (Claim): keep it. In the child of a fork the page is zero.
  pid_t cached = pid_word_ != nullptr ? pid_word_->load(std::memory_order_relaxed) : 0;
  if (cached != 0 && cached == owner_pid_.load(std::memory_order_relaxed)) {
    lock_.ResetInChild();
    return;
  }
  StartOwnFile(start_ns, true);
  owner_pid_.store(0, std::memory_order_relaxed);  // claimed by this child's first line
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
