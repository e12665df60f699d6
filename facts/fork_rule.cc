#include "facts/fork_rule.h"

#include <initializer_list>
#include <iterator>

#include "names/name_table.h"

namespace forkguard::facts {
namespace {

constexpr char kKindNames[][13] = {"anonymous", "thp",          "hugetlb",
                                   "shared",    "private-file", "unknown"};
static_assert(std::size(kKindNames) == kMemoryKinds);
// The words for a kind inside a sentence ("pinned hugetlb pages").
constexpr char kKindWords[][17] = {"anonymous", "transparent huge", "hugetlb",
                                   "shared",    "private file",     ""};
static_assert(std::size(kKindWords) == kMemoryKinds);
constexpr char kPinFateNames[][8] = {"unknown", "intact", "stale"};
static_assert(std::size(kPinFateNames) == CountThrough(PinFate::kStale));
constexpr char kWhyNames[][18] = {"not-probed",  "none",
                                  "no-io_uring", "io_uring-disabled",
                                  "memlock",     "no-hugetlb-pages",
                                  "no-thp",      "not-probeable",
                                  "failed"};
static_assert(std::size(kWhyNames) == kProbeWhys);
constexpr char kWhyTexts[][103] = {
    "no probe result for this boot (run `forkguard doctor` to probe)",
    "measured",
    "the probe needs io_uring, which this kernel or a seccomp filter refuses (ENOSYS)",
    "the probe needs io_uring, which is disabled here (kernel.io_uring_disabled or a "
    "seccomp filter: EPERM)",
    "the probe could not pin its buffer (RLIMIT_MEMLOCK too low)",
    "the probe found fewer than two free hugetlb pages (vm.nr_hugepages)",
    "the probe's buffer got no transparent huge page (THP disabled)",
    "the probe cannot pin this kind of memory",
    "the probe failed",
};
static_assert(std::size(kWhyTexts) == kProbeWhys);
constexpr char kEffectNames[][18] = {"nothing", "child-segv", "parent-corruption", "unknown"};
static_assert(std::size(kEffectNames) == CountThrough(ForkEffect::kUnknown));
constexpr char kBasisNames[][19] = {"dontfork",        "dontfork-predicted", "shared",
                                    "probe-intact",    "probe-stale",        "reported-cof",
                                    "reported-no-cof", "unknown-rdma-core",  "unknown-kind",
                                    "unknown-kernel"};
static_assert(std::size(kBasisNames) == CountThrough(Basis::kUnknownKernel));

const char* KindWords(MemoryKind k) { return NameOf(kKindWords, k, ""); }

// Joins the parts into buf (cut to cap); no printf: the shim formats this on its fork path.
const char* Join(char* buf, unsigned long cap, std::initializer_list<const char*> parts) {
  unsigned long used = 0;
  for (const char* p : parts) {
    for (; *p != '\0' && used + 1 < cap; ++p) buf[used++] = *p;
  }
  if (cap > 0) buf[used] = '\0';
  return buf;
}

}  // namespace

const char* MemoryKindName(MemoryKind k) { return NameOf(kKindNames, k, "unknown"); }

bool ParseMemoryKind(const char* name, MemoryKind* out) { return ValueOf(kKindNames, name, out); }

const char* PinFateName(PinFate f) { return NameOf(kPinFateNames, f, "unknown"); }

const char* ProbeWhyName(ProbeWhy w) { return NameOf(kWhyNames, w, "failed"); }

bool ParseProbeWhy(const char* name, ProbeWhy* out) { return ValueOf(kWhyNames, name, out); }

const char* ProbeWhyText(ProbeWhy w) { return NameOf(kWhyTexts, w, "the probe failed"); }

Tri RegistrationMarksDontfork(const MachineFacts& m) {
  if (m.fork_support == ForkSupportBy::kOff) return Tri::kNo;
  // rdma-core >= 51 asks the kernel (RDMA netlink) and does nothing when it reports
  // copy-on-fork; older ones mark every registration (measured with 33 and 44).
  if (m.reported_cof != Tri::kYes) return Tri::kYes;
  if (m.rdma_core < 0) return Tri::kUnknown;
  return m.rdma_core < 51 ? Tri::kYes : Tri::kNo;
}

Tri HugetlbRegistrationMayFail(const MachineFacts& m) {
  if (m.hugepages_safe) return Tri::kNo;
  return RegistrationMarksDontfork(m);
}

const char* ForkEffectName(ForkEffect e) { return NameOf(kEffectNames, e, "unknown"); }

const char* BasisName(Basis b) { return NameOf(kBasisNames, b, "unknown-kernel"); }

namespace {

// `v` with the rule's answer: the effect of a fork on the range, and what it rests on.
RangeVerdict Decided(RangeVerdict v, ForkEffect effect, Basis basis) {
  v.effect = effect;
  v.basis = basis;
  return v;
}

}  // namespace

RangeVerdict DecideRange(const MachineFacts& m, const RangeFacts& r) {
  RangeVerdict v;
  // MADV_DONTFORK first: the child gets no mapping there, whatever the kernel does with
  // pinned pages, and the parent keeps its pages.
  Tri dc = r.dontfork;
  bool predicted = false;
  if (dc == Tri::kUnknown) {
    dc = RegistrationMarksDontfork(m);
    predicted = true;
  }
  if (dc == Tri::kYes)
    return Decided(v, ForkEffect::kChildSegv,
                   predicted ? Basis::kDontforkPredicted : Basis::kDontfork);
  if (dc == Tri::kUnknown) return Decided(v, ForkEffect::kUnknown, Basis::kUnknownRdmaCore);
  // A shared mapping is shared with the child, never copied: the pinned page stays the one
  // both processes write.
  if (r.kind == MemoryKind::kShared) return Decided(v, ForkEffect::kNothing, Basis::kShared);
  if (r.kind == MemoryKind::kUnknown) {
    if (m.reported_cof == Tri::kYes) return Decided(v, ForkEffect::kNothing, Basis::kReportedCof);
    return Decided(v, ForkEffect::kUnknown, Basis::kUnknownKind);
  }
  // A private file mapping's pages that fork could share copy-on-write are its anonymous
  // copies (a page-cache page is never copied for the child): the anonymous answer holds.
  MemoryKind probed = r.kind == MemoryKind::kPrivateFile ? MemoryKind::kAnonymous : r.kind;
  v.probed_as = probed;
  int k = static_cast<int>(probed);
  // Measured first: the kernel's behaviour, not its version or its report.
  if (m.probe.fate[k] == PinFate::kIntact)
    return Decided(v, ForkEffect::kNothing, Basis::kProbeIntact);
  if (m.probe.fate[k] == PinFate::kStale)
    return Decided(v, ForkEffect::kParentCorruption, Basis::kProbeStale);
  if (m.reported_cof == Tri::kYes) return Decided(v, ForkEffect::kNothing, Basis::kReportedCof);
  if (m.reported_cof == Tri::kNo)
    return Decided(v, ForkEffect::kParentCorruption, Basis::kReportedNoCof);
  v.why = m.probe.why[k] == ProbeWhy::kNone ? ProbeWhy::kNotProbed : m.probe.why[k];
  return Decided(v, ForkEffect::kUnknown, Basis::kUnknownKernel);
}

const char* BasisText(const RangeVerdict& v, char* buf, unsigned long cap) {
  switch (v.basis) {
    case Basis::kDontfork:
      return "the range is MADV_DONTFORK (\"dc\" in /proc/self/smaps): the child gets no "
             "mapping there";
    case Basis::kDontforkPredicted:
      return "with fork support on, this rdma-core marks every registration MADV_DONTFORK: "
             "the child gets no mapping there";
    case Basis::kShared:
      return "MAP_SHARED memory is shared with the child at fork, never copied";
    case Basis::kProbeIntact:
      return Join(buf, cap,
                  {"measured: this kernel copies pinned ", KindWords(v.probed_as),
                   " pages for the child at fork (io_uring probe)"});
    case Basis::kProbeStale:
      return Join(buf, cap,
                  {"measured: this kernel does not copy pinned ", KindWords(v.probed_as),
                   " pages at fork (io_uring probe)"});
    case Basis::kReportedCof:
      return "the kernel reports copy-on-fork for pinned pages (RDMA netlink)";
    case Basis::kReportedNoCof:
      return "the kernel reports no copy-on-fork for pinned pages (RDMA netlink)";
    case Basis::kUnknownRdmaCore:
      return "fork support is on and the rdma-core version is unknown: whether it marks "
             "registrations MADV_DONTFORK on this copy-on-fork kernel is not known";
    case Basis::kUnknownKind:
      return "the range's mapping was not found in /proc/self/smaps and the kernel does not "
             "report copy-on-fork";
    case Basis::kUnknownKernel:
      return Join(buf, cap,
                  {"the kernel does not report copy-on-fork (RDMA netlink) and for pinned ",
                   KindWords(v.probed_as), " pages ", ProbeWhyText(v.why)});
  }
  return "";
}

}  // namespace forkguard::facts
