// The rule: from the machine's facts and one registered range's facts to what a fork does to
// that range. Pure (no I/O), malloc-free: the shim's fork path, `forkguard doctor` and the
// tests call the same function. Every answer carries its basis, so that a message can say
// why; where nothing can tell, the answer is "unknown" with the reason, never a guess from a
// version number.
#pragma once

namespace forkguard::facts {

// The kind of memory behind a registered range, as /proc/self/smaps shows its mapping.
enum class MemoryKind : unsigned char {
  kAnonymous,    // private anonymous, small pages
  kThp,          // private anonymous backed by transparent huge pages (AnonHugePages > 0)
  kHugetlb,      // private hugetlb (MAP_HUGETLB, hugetlbfs): VmFlags "ht"
  kShared,       // any MAP_SHARED mapping (shared anonymous, shmem, shared file, shared hugetlb)
  kPrivateFile,  // MAP_PRIVATE file mapping (its written pages are anonymous copies)
  kUnknown,      // not found in smaps (unmapped, or not read)
};
constexpr int kMemoryKinds = 6;
// "anonymous", "thp", "hugetlb", "shared", "private-file", "unknown".
const char* MemoryKindName(MemoryKind k);
// The inverse; false for anything else.
bool ParseMemoryKind(const char* name, MemoryKind* out);

enum class Tri : unsigned char { kUnknown, kNo, kYes };

// What the kernel did to a long-term pinned page (FOLL_LONGTERM, as ib_umem and io_uring pin)
// at fork while the child lives and the parent writes the page: measured by the pin probe
// (facts/pin_probe.h).
enum class PinFate : unsigned char {
  kUnknown,
  kIntact,  // copied for the child at fork: the pinned page is still the parent's
  kStale,   // shared copy-on-write: the parent's write went to a new page, the pin kept the old
};
const char* PinFateName(PinFate f);  // "unknown", "intact", "stale"

// Why a probe result is unknown.
// Zero is "not probed", so that a zero-filled PinProbe (the shim's globals start as zero
// bytes) means nothing is known.
enum class ProbeWhy : unsigned char {
  kNotProbed,        // no probe result for this boot (the shim never probes: see pin_probe.h)
  kNone,             // measured
  kNoIoUring,        // io_uring_setup: ENOSYS (kernel without io_uring, or a seccomp filter)
  kIoUringDisabled,  // io_uring_setup: EPERM (kernel.io_uring_disabled, or a seccomp filter)
  kMemlock,          // registering the buffer failed with ENOMEM (RLIMIT_MEMLOCK)
  kNoHugetlbPages,   // mmap(MAP_HUGETLB) failed: no free hugetlb pages (vm.nr_hugepages)
  kNoThp,            // the buffer did not get a transparent huge page (THP disabled)
  kNotProbeable,     // io_uring refuses to pin this kind (file-backed pages)
  kFailed,           // another error (the cache keeps its errno)
};
constexpr int kProbeWhys = 9;
const char* ProbeWhyName(ProbeWhy w);  // "not-probed", "none", "no-io_uring", ...
bool ParseProbeWhy(const char* name, ProbeWhy* out);
// A phrase for messages, e.g. "io_uring is disabled (kernel.io_uring_disabled)".
const char* ProbeWhyText(ProbeWhy w);

// The probe's answers, per memory kind (only anonymous, THP and hugetlb are probed: io_uring
// pins no file-backed pages, and MAP_SHARED needs no probe).
struct PinProbe {
  PinFate fate[kMemoryKinds] = {};
  ProbeWhy why[kMemoryKinds] = {ProbeWhy::kNotProbed, ProbeWhy::kNotProbed, ProbeWhy::kNotProbed,
                                ProbeWhy::kNotProbed, ProbeWhy::kNotProbed, ProbeWhy::kNotProbed};
  int err[kMemoryKinds] = {};  // errno of kFailed
};

// Who turned rdma-core's fork support on.
enum class ForkSupportBy : unsigned char {
  kOff,
  kEnvironment,  // RDMAV_FORK_SAFE / IBV_FORK_SAFE set (to any value)
  kForkInit,     // ibv_fork_init() returned 0
};

struct MachineFacts {
  Tri reported_cof = Tri::kUnknown;  // RDMA netlink RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK
  PinProbe probe;                    // measured, per memory kind
  int rdma_core = -1;                // rdma-core version, -1 unknown
  ForkSupportBy fork_support = ForkSupportBy::kOff;
  bool hugepages_safe = false;  // RDMAV_HUGEPAGES_SAFE set
};

// Whether rdma-core marks every registration MADV_DONTFORK (the "dc" flag): fork support on,
// and either rdma-core < 51 or a kernel that does not report copy-on-fork (rdma-core >= 51
// asks the same netlink attribute and then does nothing). Unknown when fork support is on,
// the kernel reports copy-on-fork and the rdma-core version is unknown.
Tri RegistrationMarksDontfork(const MachineFacts& m);

enum class ForkEffect : unsigned char {
  kNothing,           // the child gets its own copy or nothing; the parent's data stays right
  kChildSegv,         // the range is MADV_DONTFORK: a child that touches it dies of SIGSEGV
  kParentCorruption,  // the parent's next write goes to a new page, the device keeps the old
  kUnknown,
};
// "nothing", "child-segv", "parent-corruption", "unknown" (the first three are the fork
// event's reason names).
const char* ForkEffectName(ForkEffect e);

// What the effect was decided from.
enum class Basis : unsigned char {
  kDontfork,           // the kernel marks the range "dc" (/proc/self/smaps)
  kDontforkPredicted,  // fork support on and rdma-core marks registrations (no range to look at)
  kShared,             // MAP_SHARED: fork shares the page, copies nothing
  kProbeIntact,        // measured: the kernel copies pinned pages of this kind at fork
  kProbeStale,         // measured: the kernel leaves pinned pages of this kind to the child
  kReportedCof,        // the kernel reports copy-on-fork (RDMA netlink)
  kReportedNoCof,      // the kernel reports no copy-on-fork (RDMA netlink)
  kUnknownRdmaCore,    // fork support on, rdma-core version unknown on a reporting kernel
  kUnknownKind,        // the range's mapping was not found
  kUnknownKernel,      // the kernel reports nothing and the probe has no answer (see `why`)
};
// Short code for the event log: "dontfork", "dontfork-predicted", "shared", "probe-intact",
// "probe-stale", "reported-cof", "reported-no-cof", "unknown-rdma-core", "unknown-kind",
// "unknown-kernel".
const char* BasisName(Basis b);

struct RangeFacts {
  MemoryKind kind = MemoryKind::kUnknown;
  // The range overlaps a "dc" mapping. kUnknown: not looked at (doctor, before any
  // registration): predicted with RegistrationMarksDontfork.
  Tri dontfork = Tri::kUnknown;
};

struct RangeVerdict {
  ForkEffect effect = ForkEffect::kUnknown;
  Basis basis = Basis::kUnknownKernel;
  MemoryKind probed_as = MemoryKind::kUnknown;  // the probe's kind that answered (private-file:
                                                // anonymous)
  ProbeWhy why = ProbeWhy::kNone;               // for kUnknownKernel: why the probe cannot tell
};

// The rule. The kernel's behaviour is taken from what was measured (the pin probe) first,
// then from what the kernel reports; a release number is never used.
RangeVerdict DecideRange(const MachineFacts& m, const RangeFacts& r);

// One sentence for messages saying why (no trailing period), e.g. "measured: this kernel
// copies pinned anonymous pages at fork (io_uring probe)". Static storage or `buf`.
const char* BasisText(const RangeVerdict& v, char* buf, unsigned long cap);

// Registering hugetlb memory while rdma-core marks registrations MADV_DONTFORK without
// RDMAV_HUGEPAGES_SAFE: rdma-core advises in 4 KiB steps and ibv_reg_mr can fail (measured
// on Linux 5.10 with rdma-core 44). Yes/no/unknown like RegistrationMarksDontfork.
Tri HugetlbRegistrationMayFail(const MachineFacts& m);

}  // namespace forkguard::facts
