// Facts about this process read at fork decision time: the kernel's view of MADV_DONTFORK
// ranges (/proc/self/smaps "dc") and the memory kind of registered ranges, RDMA descriptors
// (the backstop), thread and map counts; and the machine facts (facts/machine_facts.h,
// facts/pin_probe.h) asked once per process and cached for the fork path.
//
// Everything here reads into stack buffers: no malloc.
#pragma once

#include <cstddef>
#include <cstdint>

#include "facts/fork_rule.h"
#include "facts/machine_facts.h"

namespace forkguard {

struct Vma {
  uintptr_t start = 0;
  uintptr_t end = 0;
};

// A mapping that overlaps a registered range: its memory kind and "dc" flag.
struct KindVma {
  uintptr_t start = 0;
  uintptr_t end = 0;
  facts::MemoryKind kind = facts::MemoryKind::kUnknown;
  bool dontfork = false;
  uint64_t page_size = 0;  // the kernel's page size for it (huge pages: their size); 0 unknown
};

// The first of `n` ranges in address order (Vma, KindVma) that ends after `addr`, by binary
// search; `n` when none does.
template <typename Range>
int FirstEndingAfter(const Range* ranges, int n, uintptr_t addr) {
  int lo = 0;
  int hi = n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (ranges[mid].end <= addr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Where to put what the smaps scan finds. `dc` gets the mappings with the "dc"
// (VM_DONTCOPY) flag; `kinds` the mappings that overlap one of `keep` (sorted, disjoint
// intervals: the registered ranges), in address order.
struct SmapsOut {
  Vma* dc = nullptr;
  int dc_cap = 0;
  KindVma* kinds = nullptr;
  int kinds_cap = 0;
  const Vma* keep = nullptr;
  int keep_count = 0;
};

// Streaming parser of /proc/<pid>/smaps: feed it arbitrary chunks.
class SmapsScanner {
 public:
  explicit SmapsScanner(const SmapsOut& out) : out_(out) {}
  // Only the "dc" mappings, up to `cap`.
  SmapsScanner(Vma* out, int cap) { out_.dc = out, out_.dc_cap = cap; }
  void Feed(const char* data, size_t n);
  void Finish();

  int vma_count() const { return vma_count_; }
  int dontfork_count() const { return dontfork_count_; }  // may exceed cap
  int stored() const { return stored_; }
  int kinds_stored() const { return kinds_stored_; }

 private:
  void Line(const char* s, size_t n);
  bool Kept(uintptr_t start, uintptr_t end) const;

  SmapsOut out_;
  int stored_ = 0;
  int kinds_stored_ = 0;
  int vma_count_ = 0;
  int dontfork_count_ = 0;
  bool have_vma_ = false;
  facts::SmapsVma cur_;
  char line_[256];
  size_t line_len_ = 0;
};

// Reads /proc/self/smaps: the MADV_DONTFORK ranges into `out.dc` and the kinds of the
// mappings under `out.keep`. Returns false when it cannot be read.
bool ReadSmapsView(const SmapsOut& out, int* stored, int* kinds_stored, int* dontfork_count,
                   int* vma_count);

// Descriptor backstop: counts open descriptors on /dev/infiniband/uverbs* and
// /dev/infiniband/rdma_cm (raw getdents64 + readlink). Async-signal-safe.
struct RdmaFds {
  int uverbs = 0;
  int rdma_cm = 0;
};
RdmaFds ScanRdmaFds();
// Learns the uverbs character major (/proc/devices "infiniband_verbs") and the rdma_cm misc
// minor (/proc/misc) so that the scan needs one fstat per descriptor and no readlink. Call
// outside the fork path (constructor, first RDMA call); safe to call again.
void LearnRdmaDeviceNumbers();
// The same with the caller's buffer (async-signal-safe: open/read/close only).
void LearnRdmaDeviceNumbers(char* buf, size_t cap);
// True when this kernel has the RDMA user-space devices (ib_uverbs or rdma_ucm loaded when
// we looked): only then can a descriptor on them exist without any call we saw.
bool RdmaDevicesExist();
// "231 infiniband_verbs" -> 231: the number on the line naming `name`, within `section`
// (up to the next line that does not start with a digit or space) when given; -1 if absent.
int FindNumberForName(const char* text, const char* section, const char* name);
// Classifies one readlink() target.
void ClassifyFdTarget(const char* target, RdmaFds* fds);

int ReadThreadCount();   // -1 when unknown
long ReadMaxMapCount();  // -1 when unknown
int CountMaps();         // /proc/self/maps lines, -1 when unknown

// What the kernel reports about copy-on-fork for pinned pages (RDMA netlink; a release
// number is never taken for it).
using KernelCof = facts::Tri;
struct KernelCofFact {
  KernelCof value = KernelCof::kUnknown;
  const char* source = "unknown";  // "netlink", "unknown"
};
// The kernel facts - its copy-on-fork report and this boot's pin probe result (read from the
// cache `forkguard doctor`/`run` write; the shim never probes) - asked once and cached; never
// call it first from an atfork handler or the child.
KernelCofFact KernelCopyOnFork();
// The cached answer, or unknown when nobody asked yet (safe in atfork handlers).
KernelCofFact CachedKernelCopyOnFork();
// This boot's pin probe as cached by KernelCopyOnFork(); "not probed" before.
facts::PinProbe CachedPinProbe();

}  // namespace forkguard
