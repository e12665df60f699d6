// Facts about this process and kernel read at fork decision time: the kernel's view of
// MADV_DONTFORK ranges (/proc/self/smaps "dc"), RDMA descriptors (the backstop), thread and
// map counts, and whether the kernel copies pinned pages on fork.
//
// Everything here reads into stack buffers: no malloc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace forkguard {

struct Vma {
  uintptr_t start = 0;
  uintptr_t end = 0;
};

// Streaming parser of /proc/<pid>/smaps: feed it arbitrary chunks.
class SmapsScanner {
 public:
  // Records up to `cap` VMAs that carry the "dc" (VM_DONTCOPY) flag into `out`.
  SmapsScanner(Vma* out, int cap) : out_(out), cap_(cap) {}
  void Feed(const char* data, size_t n);
  void Finish();

  int vma_count() const { return vma_count_; }
  int dontfork_count() const { return dontfork_count_; }  // may exceed cap
  int stored() const { return stored_; }

 private:
  void Line(const char* s, size_t n);

  Vma* out_;
  int cap_;
  int stored_ = 0;
  int vma_count_ = 0;
  int dontfork_count_ = 0;
  bool have_vma_ = false;
  Vma cur_;
  char line_[256];
  size_t line_len_ = 0;
};

// Parses "start-end ..." header lines; false for anything else.
bool ParseSmapsHeader(const char* s, size_t n, uintptr_t* start, uintptr_t* end);
// True when a "VmFlags:" line contains the "dc" flag.
bool VmFlagsHasDontCopy(const char* s, size_t n);

// Reads /proc/self/smaps. Returns false when it cannot be read.
bool ReadDontforkVmas(Vma* out, int cap, int* stored, int* dontfork_count, int* vma_count);

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

enum class KernelCof { kUnknown, kNo, kYes };
struct KernelCofFact {
  KernelCof value = KernelCof::kUnknown;
  const char* source = "unknown";  // "netlink", "uname", "unknown"
};
// Asked once and cached; never call it first from an atfork handler or the child.
KernelCofFact KernelCopyOnFork();
// The cached answer, or unknown when nobody asked yet (safe in atfork handlers).
KernelCofFact CachedKernelCopyOnFork();
// Kernel release "5.13.0-..." >= 5.13 ?
KernelCof CofFromRelease(const char* release);

// rdma-core's version from libibverbs' real file name ("libibverbs.so.1.14.44.0" -> 44), or -1.
int RdmaCoreFromLibName(const char* name);
// The same for the libibverbs mapped in this process (/proc/self/maps), or -1.
int RdmaCoreVersionFromMaps();

}  // namespace forkguard
