#include "shim/verdict/proc_facts.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "facts/pin_probe.h"
#include "shim/base/sys.h"

namespace forkguard {

bool SmapsScanner::Kept(uintptr_t start, uintptr_t end) const {
  // First interval ending after `start`, then whether it begins before `end`.
  int lo = FirstEndingAfter(out_.keep, out_.keep_count, start);
  return lo < out_.keep_count && out_.keep[lo].start < end;
}

void SmapsScanner::Line(const char* s, size_t n) {
  facts::SmapsVma h;
  if (facts::ParseSmapsHeader(s, n, &h)) {
    ++vma_count_;
    have_vma_ = true;
    cur_ = h;
    return;
  }
  if (have_vma_ && facts::ApplySmapsAttribute(s, n, &cur_)) {
    if (cur_.dontfork) {
      ++dontfork_count_;
      if (stored_ < out_.dc_cap) out_.dc[stored_++] = Vma{cur_.start, cur_.end};
    }
    if (out_.keep_count > 0 && kinds_stored_ < out_.kinds_cap && Kept(cur_.start, cur_.end)) {
      out_.kinds[kinds_stored_++] =
          KindVma{cur_.start, cur_.end, cur_.Kind(), cur_.dontfork, cur_.page_size};
    }
    have_vma_ = false;
  }
}

void SmapsScanner::Feed(const char* data, size_t n) {
  // Line by line with memchr; only a line's beginning matters (long paths are cut).
  while (n > 0) {
    const char* nl = static_cast<const char*>(memchr(data, '\n', n));
    size_t len = nl != nullptr ? static_cast<size_t>(nl - data) : n;
    size_t room = sizeof(line_) - line_len_;
    size_t take = len < room ? len : room;
    memcpy(line_ + line_len_, data, take);
    line_len_ += take;
    if (nl == nullptr) return;
    Line(line_, line_len_);
    line_len_ = 0;
    data = nl + 1;
    n -= len + 1;
  }
}

void SmapsScanner::Finish() {
  if (line_len_ > 0) Line(line_, line_len_);
  line_len_ = 0;
}

bool ReadSmapsView(const SmapsOut& out, int* stored, int* kinds_stored, int* dontfork_count,
                   int* vma_count) {
  int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  SmapsScanner scanner(out);
  char buf[8192];
  for (;;) {
    ssize_t n = ReadNoEintr(fd, buf, sizeof(buf));
    if (n <= 0) break;
    scanner.Feed(buf, static_cast<size_t>(n));
  }
  close(fd);
  scanner.Finish();
  *stored = scanner.stored();
  *kinds_stored = scanner.kinds_stored();
  *dontfork_count = scanner.dontfork_count();
  *vma_count = scanner.vma_count();
  return true;
}

int ReadThreadCount() {
  char buf[4096];
  if (ReadSmallFile("/proc/self/status", buf, sizeof(buf)) < 0) return -1;
  const char* p = strstr(buf, "\nThreads:");
  if (p == nullptr) return -1;
  p += 9;
  while (*p == ' ' || *p == '\t') ++p;
  int v = 0;
  bool any = false;
  while (*p >= '0' && *p <= '9') {
    v = v * 10 + (*p++ - '0');
    any = true;
  }
  return any ? v : -1;
}

long ReadMaxMapCount() {
  char buf[64];
  if (ReadSmallFile("/proc/sys/vm/max_map_count", buf, sizeof(buf)) <= 0) return -1;
  long v = 0;
  bool any = false;
  for (const char* p = buf; *p >= '0' && *p <= '9'; ++p) {
    v = v * 10 + (*p - '0');
    any = true;
  }
  return any ? v : -1;
}

int CountMaps() {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[8192];
  int lines = 0;
  for (;;) {
    ssize_t n = ReadNoEintr(fd, buf, sizeof(buf));
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) lines += buf[i] == '\n';
  }
  close(fd);
  return lines;
}

namespace {

std::atomic<int> g_cof_state{0};                    // 0 unasked, 1 asking, 2 cached
KernelCofFact g_cof{KernelCof::kUnknown, nullptr};  // read once g_cof_state is 2
facts::PinProbe g_probe;                            // read once g_cof_state is 2

}  // namespace

facts::PinProbe CachedPinProbe() {
  if (g_cof_state.load(std::memory_order_acquire) == 2) return g_probe;
  return facts::PinProbe();
}

KernelCofFact CachedKernelCopyOnFork() {
  if (g_cof_state.load(std::memory_order_acquire) == 2) return g_cof;
  return KernelCofFact();
}

KernelCofFact KernelCopyOnFork() {
  if (g_cof_state.load(std::memory_order_acquire) == 2) return g_cof;
  int expected = 0;
  if (!g_cof_state.compare_exchange_strong(expected, 1)) {
    // Another thread is asking: do not wait for it.
    if (g_cof_state.load(std::memory_order_acquire) == 2) return g_cof;
    return KernelCofFact();
  }
  KernelCofFact fact;
  fact.value = facts::ReportedCopyOnFork(nullptr);
  fact.source = fact.value != KernelCof::kUnknown ? "netlink" : "unknown";
  g_cof = fact;
  if (!facts::ReadPinProbeCache(&g_probe)) g_probe = facts::PinProbe();
  g_cof_state.store(2, std::memory_order_release);
  return g_cof;
}

}  // namespace forkguard
