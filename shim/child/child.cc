// ASYNC-SIGNAL-SAFE ONLY below this line, except PrepareChildSegvTable (parent side, marked).
// Runs in a forked child (possibly of a multi-threaded parent) or in a SIGSEGV handler.
#include "shim/child/child.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "formats/text_buffer.h"
#include "shim/base/child_path.h"
#include "shim/base/stderr_line.h"
#include "shim/base/sys.h"
#include "shim/log/event_log.h"
#include "shim/messages/message.h"

namespace forkguard {

volatile sig_atomic_t g_hazard_child = 0;
namespace {

constexpr uint32_t kTableMagic = 0x66676331;  // "fgc1"
constexpr int kMaxTableEntries = 1024;
constexpr size_t kTextPerEntry = 8192;
constexpr size_t kScratchBytes = 16384;

struct TableEntry {
  uintptr_t start;
  uintptr_t end;
  uintptr_t page_start;
  uintptr_t page_end;
  const char* call;  // static string in the shim
  bool withheld;     // fix mode made it MADV_DONTFORK for the fork
  int nips;
  uintptr_t ips[RawStack::kCapacity];
  size_t text_off;
  size_t text_len;
};

struct TableHeader {
  uint32_t magic;
  int count;
  bool quiet;
  size_t bytes;
  TableEntry* entries;
  char* text;
  char* scratch;
  std::atomic<int> scratch_busy;
};

std::atomic<TableHeader*> g_table{nullptr};
std::atomic<int> g_preparing{0};
struct sigaction g_prev_segv;
volatile sig_atomic_t g_handler_installed = 0;

// Lets the signal act as it would have without us. A previous handler function is called
// directly with its own mask (we stay installed, so a later fault in a registered range is
// still explained after the program handled an unrelated one). Default/ignore: reinstall
// it; a real fault then re-executes the instruction and faults again under it, a sent
// signal (kill/raise) is re-sent.
void ChainToPrevious(int sig, siginfo_t* info, void* uctx) {
  struct sigaction prev = g_prev_segv;
  bool is_function = (prev.sa_flags & SA_SIGINFO) != 0
                         ? prev.sa_sigaction != nullptr
                         : (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN &&
                            prev.sa_handler != nullptr);
  if (!is_function) {
    sigaction(SIGSEGV, &prev, nullptr);
    g_handler_installed = 0;
    if (info == nullptr || info->si_code <= 0) raise(sig);
    return;
  }
  if ((prev.sa_flags & SA_RESETHAND) != 0) {
    // One-shot handler: after this delivery the disposition is the default, as the kernel
    // would have left it.
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGSEGV, &dfl, nullptr);
    g_handler_installed = 0;
  }
  sigset_t old;
  sigset_t mask = prev.sa_mask;
  if ((prev.sa_flags & SA_NODEFER) == 0) sigaddset(&mask, sig);
  pthread_sigmask(SIG_BLOCK, &mask, &old);
  if ((prev.sa_flags & SA_SIGINFO) != 0) {
    prev.sa_sigaction(sig, info, uctx);
  } else {
    prev.sa_handler(sig);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void SegvHandler(int sig, siginfo_t* info, void* uctx) {
  int saved_errno = errno;
  TableHeader* t = g_table.load(std::memory_order_acquire);
  if (t != nullptr && t->magic == kTableMagic && info != nullptr && info->si_code > 0) {
    auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    for (int i = 0; i < t->count; ++i) {
      const TableEntry& e = t->entries[i];
      if (addr < e.page_start || addr >= e.page_end) continue;
      ChildSegvRange r{e.start, e.end, e.page_start, e.page_end, e.call, nullptr, e.nips, e.ips};
      if (!t->quiet) {
        char head[512];
        size_t n = FormatChildSegv(head, sizeof(head), static_cast<long>(getpid()), addr, r);
        // Line by line, each prefixed and in one write (shim/base/stderr_line.h).
        WriteStderrLines(head, n);
        WriteStderrLines(t->text + e.text_off, e.text_len);
        const char* tail = e.withheld ? ChildSegvTailWithheld() : ChildSegvTail();
        WriteStderrLines(tail);
      }
      EventLog& log = GlobalEventLog();
      int expected = 0;
      if (log.enabled() && t->scratch_busy.compare_exchange_strong(expected, 1)) {
        TextBuffer b(t->scratch, kScratchBytes);
        log.Begin(b, schema::kChildSegv);
        b.Key(schema::kKeyAddr).UDec(addr);
        b.Key(schema::kKeyRange)
            .FirstKey(schema::kKeyAddr)
            .UDec(e.start)
            .Key(schema::kKeyLen)
            .UDec(e.end - e.start);
        b.Char('}').Key(schema::kKeyCall).Quoted(e.call).Key(schema::kKeyRegStack);
        RawStack s;
        s.depth = e.nips;
        for (int k = 0; k < e.nips; ++k) s.ips[k] = e.ips[k];
        AppendJsonStack(b, s, false);
        b.Key(schema::kKeySignal).Dec(sig);
        log.End(b);
        t->scratch_busy.store(0);
      }
      break;
    }
  }
  errno = saved_errno;
  ChainToPrevious(sig, info, uctx);
}

}  // namespace

// ---- Parent side (not signal-safe: symbolizes with dladdr). ----
bool PrepareChildSegvTable(const StateSnapshot& snap, const bool* mr_dontfork, bool quiet,
                           const FixAction* mr_fix) {
  int count = 0;
  for (int i = 0; i < snap.mr_count; ++i) count += mr_dontfork[i] ? 1 : 0;
  if (count > kMaxTableEntries) count = kMaxTableEntries;
  size_t bytes = sizeof(TableHeader) + sizeof(TableEntry) * static_cast<size_t>(count) +
                 kTextPerEntry * static_cast<size_t>(count) + kScratchBytes;
  bytes = (bytes + PageSize() - 1) & ~(PageSize() - 1);
  g_preparing.fetch_add(1);
  void* p = MapAnonymous(bytes, MAP_NORESERVE);
  if (p == nullptr) {
    g_preparing.fetch_sub(1);
    return false;
  }
  auto* t = static_cast<TableHeader*>(p);
  t->bytes = bytes;
  t->entries = reinterpret_cast<TableEntry*>(static_cast<char*>(p) + sizeof(TableHeader));
  t->text = reinterpret_cast<char*>(t->entries + count);
  t->scratch = t->text + kTextPerEntry * static_cast<size_t>(count);
  t->scratch_busy.store(0);
  uintptr_t page = PageSize();
  int n = 0;
  size_t text_used = 0;
  for (int i = 0; i < snap.mr_count && n < count; ++i) {
    if (!mr_dontfork[i]) continue;
    const MrRecord& m = snap.mrs[i];
    TableEntry& e = t->entries[n++];
    e.start = m.addr;
    e.end = m.addr + m.len;
    e.page_start = m.addr & ~(page - 1);
    e.page_end = (m.addr + m.len + page - 1) & ~(page - 1);
    e.call = RdmaCallName(m.call);
    e.withheld = mr_fix != nullptr && mr_fix[i] == FixAction::kWithheld;
    e.nips = m.stack.depth;
    for (int k = 0; k < m.stack.depth; ++k) e.ips[k] = m.stack.ips[k];
    TextBuffer text(t->text + text_used, kTextPerEntry);
    FormatStackLines(text, m.stack, "    ", true);
    e.text_off = text_used;
    e.text_len = text.size();
    text_used += text.size();
  }
  t->count = n;
  t->quiet = quiet;
  t->magic = kTableMagic;
  TableHeader* old = g_table.exchange(t, std::memory_order_acq_rel);
  // Unmap the previous table only when no other thread is preparing a fork with it.
  if (old != nullptr && g_preparing.load() == 1) munmap(old, old->bytes);
  return true;
}

void ReleaseChildSegvTable() { g_preparing.fetch_sub(1); }

// ---- Child side: async-signal-safe. ----
FORKGUARD_CHILD_PATH void ChildAfterFork(bool hazardous, bool explain_segv) {
  EventLog& log = GlobalEventLog();
  log.ResetInChild(log.enabled() ? log.NowNs() : 0);
  // Only write what changes: untouched pages stay shared with the parent.
  if (g_hazard_child != (hazardous ? 1 : 0)) g_hazard_child = hazardous ? 1 : 0;
  if (g_preparing.load(std::memory_order_relaxed) != 0) g_preparing.store(0);
  if (!hazardous || !explain_segv || g_table.load() == nullptr || g_handler_installed) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = SegvHandler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &g_prev_segv) == 0) g_handler_installed = 1;
}

void LogExec(const char* path) {
  EventLog& log = GlobalEventLog();
  if (!log.enabled() || !log.HasOwnFile()) return;
  char buf[2048];
  TextBuffer b(buf, sizeof(buf));
  log.Begin(b, schema::kExec);
  b.Key(schema::kKeyPath).JsonStr(path);
  log.End(b);
}

void ChildNoteExec(const char* path) {
  WriteEvent<2048>(schema::kChildExec,
                   [&](TextBuffer& b) { b.Key(schema::kKeyPath).JsonStr(path); });
}

}  // namespace forkguard
