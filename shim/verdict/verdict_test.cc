#include "shim/verdict/verdict.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "shim/verdict/proc_facts.h"

namespace forkguard {
namespace {

MrRecord Mr(uintptr_t addr, uint64_t len) {
  MrRecord m;
  m.handle = addr + 1;
  m.addr = addr;
  m.len = len;
  return m;
}

// One device context with `mrs` registered, over the given `dc` and per-kind VMAs (the
// vectors must outlive the input).
VerdictInput OneContext(const std::vector<MrRecord>& mrs, const std::vector<Vma>& dc,
                        const std::vector<KindVma>& kinds, const facts::MachineFacts* machine) {
  VerdictInput in;
  in.counts.contexts = 1;
  in.counts.mrs = static_cast<int>(mrs.size());
  in.mrs = mrs.data();
  in.mr_count = static_cast<int>(mrs.size());
  if (!dc.empty()) {
    in.dc_vmas = dc.data();
    in.dc_count = static_cast<int>(dc.size());
  }
  if (!kinds.empty()) {
    in.kind_vmas = kinds.data();
    in.kind_count = static_cast<int>(kinds.size());
  }
  in.machine = machine;
  return in;
}

TEST(VerdictTest, NothingLiveIsClean) {
  VerdictInput in;
  ForkVerdict v = DecideVerdict(in, nullptr);
  EXPECT_FALSE(v.hazard());
  EXPECT_EQ(v.reasons, 0u);
}

TEST(VerdictTest, DontforkRangeMeansChildSegv) {
  std::vector<MrRecord> mrs = {Mr(0x10000, 0x4000), Mr(0x40000, 0x1000)};
  std::vector<Vma> dc = {{0x10000, 0x14000}};
  facts::MachineFacts m;
  m.reported_cof = KernelCof::kYes;
  VerdictInput in = OneContext(mrs, dc, {}, &m);
  in.counts.pds = 1;
  bool flags[2] = {false, false};
  ForkVerdict v = DecideVerdict(in, flags);
  EXPECT_TRUE(v.hazard());
  EXPECT_EQ(v.reasons, kChildSegv | kInheritedRdma);
  EXPECT_EQ(v.dontfork_mrs, 1);
  EXPECT_TRUE(flags[0]);
  EXPECT_FALSE(flags[1]);
}

// Linux 5.10 as measured: no netlink report; pinned anonymous pages copied at fork, pinned
// hugetlb pages not. Per range, by the memory kind of the mapping under it.
facts::MachineFacts Kernel510() {
  facts::MachineFacts m;
  int anon = static_cast<int>(facts::MemoryKind::kAnonymous);
  int huge = static_cast<int>(facts::MemoryKind::kHugetlb);
  m.probe.fate[anon] = facts::PinFate::kIntact;
  m.probe.why[anon] = facts::ProbeWhy::kNone;
  m.probe.fate[huge] = facts::PinFate::kStale;
  m.probe.why[huge] = facts::ProbeWhy::kNone;
  m.rdma_core = 44;
  return m;
}

TEST(VerdictTest, ParentCorruptionPerRangeByMemoryKind) {
  std::vector<MrRecord> mrs = {Mr(0x10000, 0x4000), Mr(0x200000, 0x200000)};
  std::vector<KindVma> kinds = {{0x10000, 0x20000, facts::MemoryKind::kAnonymous, false},
                                {0x200000, 0x400000, facts::MemoryKind::kHugetlb, false}};
  facts::MachineFacts m = Kernel510();
  VerdictInput in = OneContext(mrs, {}, kinds, &m);
  MrFate fate[2];
  ForkVerdict v = DecideVerdict(in, nullptr, fate);
  EXPECT_EQ(v.reasons, kParentCorruption | kInheritedRdma);
  EXPECT_EQ(v.corruptible_mrs, 1);
  EXPECT_EQ(v.unknown_mrs, 0);
  EXPECT_EQ(fate[0].kind, facts::MemoryKind::kAnonymous);
  EXPECT_EQ(fate[0].verdict.effect, facts::ForkEffect::kNothing);
  EXPECT_EQ(fate[1].kind, facts::MemoryKind::kHugetlb);
  EXPECT_EQ(fate[1].verdict.effect, facts::ForkEffect::kParentCorruption);
  EXPECT_EQ(fate[1].verdict.basis, facts::Basis::kProbeStale);
  // A range over both kinds takes the worse.
  std::vector<MrRecord> both = {Mr(0x1f000, 0x1e2000)};
  std::vector<KindVma> k2 = {{0x10000, 0x20000, facts::MemoryKind::kAnonymous, false},
                             {0x200000, 0x400000, facts::MemoryKind::kHugetlb, false}};
  in.mrs = both.data();
  in.mr_count = 1;
  v = DecideVerdict(in, nullptr, fate);
  EXPECT_EQ(fate[0].kind, facts::MemoryKind::kHugetlb);
  EXPECT_EQ(v.corruptible_mrs, 1);
  // Before any probe on a kernel that reports nothing: unknown, not corruption.
  facts::MachineFacts unprobed;
  in.machine = &unprobed;
  in.mrs = mrs.data();
  in.mr_count = 2;
  v = DecideVerdict(in, nullptr, fate);
  EXPECT_EQ(v.reasons, static_cast<unsigned>(kInheritedRdma));
  EXPECT_EQ(v.unknown_mrs, 2);
  EXPECT_EQ(fate[1].verdict.why, facts::ProbeWhy::kNotProbed);
  // A kernel that reports copy-on-fork: only the inheritance remains.
  unprobed.reported_cof = KernelCof::kYes;
  v = DecideVerdict(in, nullptr, fate);
  EXPECT_EQ(v.reasons, static_cast<unsigned>(kInheritedRdma));
  EXPECT_EQ(v.unknown_mrs, 0);
}

// Fork support marked an anonymous range on 5.10: the kernel would have copied it, so the
// marking is needless (and the UCX advice applies); a marked hugetlb range is not.
TEST(VerdictTest, DontforkNeedlessWhereTheKernelCopies) {
  std::vector<MrRecord> mrs = {Mr(0x10000, 0x4000)};
  std::vector<Vma> dc = {{0x10000, 0x20000}};
  std::vector<KindVma> kinds = {{0x10000, 0x20000, facts::MemoryKind::kAnonymous, true}};
  facts::MachineFacts m = Kernel510();
  m.fork_support = facts::ForkSupportBy::kEnvironment;
  VerdictInput in = OneContext(mrs, dc, kinds, &m);
  ForkVerdict v = DecideVerdict(in, nullptr);
  EXPECT_EQ(v.reasons, kChildSegv | kInheritedRdma);
  EXPECT_TRUE(v.dontfork_needless);
  kinds[0].kind = facts::MemoryKind::kHugetlb;
  v = DecideVerdict(in, nullptr);
  EXPECT_EQ(v.reasons, kChildSegv | kInheritedRdma);
  EXPECT_FALSE(v.dontfork_needless);
}

TEST(VerdictTest, RdmaCmOnlyIsInheritedRdma) {
  VerdictInput in;
  in.counts.cm_channels = 1;
  in.counts.cm_ids = 1;
  EXPECT_EQ(DecideVerdict(in, nullptr).reasons, static_cast<unsigned>(kInheritedRdma));
}

TEST(VerdictTest, BackstopDescriptorsAloneAreAHazard) {
  VerdictInput in;
  in.counts.rdma_cm_fds = 1;
  EXPECT_EQ(DecideVerdict(in, nullptr).reasons, static_cast<unsigned>(kInheritedRdma));
}

TEST(VerdictTest, UntrackedDeviceWithDontforkVmasIsChildSegv) {
  std::vector<Vma> dc = {{0x10000, 0x20000}};
  VerdictInput in;
  in.counts.uverbs_fds = 1;  // e.g. static libibverbs: no context seen
  in.dc_vmas = dc.data();
  in.dc_count = 1;
  ForkVerdict v = DecideVerdict(in, nullptr);
  EXPECT_EQ(v.reasons, kChildSegv | kInheritedRdma);
  EXPECT_EQ(v.unattributed_dc, 1);
  // With a tracked context and no MR, dc VMAs are provider queues, not user buffers.
  in.counts.contexts = 1;
  EXPECT_EQ(DecideVerdict(in, nullptr).reasons, static_cast<unsigned>(kInheritedRdma));
}

// What librdmacm keeps after the program destroyed its ids and channels.
TEST(VerdictTest, OnlyLibrdmacmsOwnContextIsAWarningNotEnforced) {
  VerdictInput in;
  in.counts.contexts = 1;
  in.counts.library_contexts = 1;
  in.counts.uverbs_fds = 1;
  ForkVerdict v = DecideVerdict(in, nullptr);
  EXPECT_EQ(v.reasons, kInheritedRdma);
  EXPECT_TRUE(v.library_cache_only);
  EXPECT_FALSE(v.enforceable());
  // One context of the program's own as well: an ordinary hazard.
  in.counts.contexts = 2;
  v = DecideVerdict(in, nullptr);
  EXPECT_FALSE(v.library_cache_only);
  EXPECT_TRUE(v.enforceable());
  // A live cm id: the program still holds something.
  in.counts.contexts = 1;
  in.counts.cm_ids = 1;
  EXPECT_FALSE(DecideVerdict(in, nullptr).library_cache_only);
}

// A child that execs right away is judged by what it can touch before exec.
TEST(VerdictTest, ExecingChildInheritsNothingThatMatters) {
  VerdictInput in;
  in.counts.contexts = 1;
  in.counts.pds = 1;
  in.counts.uverbs_fds = 1;
  in.child_execs = true;
  ForkVerdict v = DecideVerdict(in, nullptr);
  EXPECT_FALSE(v.hazard());
  // DONTFORK ranges: preexec_fn may touch them - a warning, never enforced.
  std::vector<MrRecord> mrs = {Mr(0x10000, 0x1000)};
  std::vector<Vma> dc = {{0x10000, 0x11000}};
  in.counts.mrs = 1;
  in.mrs = mrs.data();
  in.mr_count = 1;
  in.dc_vmas = dc.data();
  in.dc_count = 1;
  v = DecideVerdict(in, nullptr);
  EXPECT_EQ(v.reasons, kChildSegv);
  EXPECT_TRUE(v.child_execs);
  EXPECT_FALSE(v.enforceable());
}

TEST(VerdictTest, RangeOverlap) {
  Vma v[] = {{0x1000, 0x2000}};
  EXPECT_TRUE(RangeOverlapsAny(0x1800, 0x10, v, 1));
  EXPECT_TRUE(RangeOverlapsAny(0x0800, 0x1000, v, 1));
  EXPECT_FALSE(RangeOverlapsAny(0x2000, 0x1000, v, 1));
  EXPECT_FALSE(RangeOverlapsAny(0x0000, 0x1000, v, 1));
  EXPECT_FALSE(RangeOverlapsAny(0x1800, 0, v, 1));
}

constexpr char kSmaps[] =
    "55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]\n"
    "Size:                132 kB\n"
    "AnonHugePages:         0 kB\n"
    "VmFlags: rd wr mr mw me ac sd \n"
    "7f0480800000-7f0480c7e000 rw-p 00000000 00:00 0 \n"
    "Size:               4600 kB\n"
    "VmFlags: rd wr mr mw me dc ac sd \n"
    "7f0481000000-7f0481001000 r--p 00000000 08:01 123  /usr/lib/dcfoo.so\n"
    "VmFlags: rd mr mw me dd sd \n"
    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n"
    "VmFlags: rd wr mr mw me gd ac dc\n";

TEST(SmapsTest, FindsDontCopyVmasInAnyChunking) {
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{64}, sizeof(kSmaps)}) {
    Vma out[8];
    SmapsScanner s(out, 8);
    for (size_t i = 0; i < sizeof(kSmaps) - 1; i += chunk) {
      size_t n = std::min(chunk, sizeof(kSmaps) - 1 - i);
      s.Feed(kSmaps + i, n);
    }
    s.Finish();
    EXPECT_EQ(s.vma_count(), 4) << chunk;
    ASSERT_EQ(s.dontfork_count(), 2) << chunk;
    EXPECT_EQ(out[0].start, 0x7f0480800000u);
    EXPECT_EQ(out[0].end, 0x7f0480c7e000u);
    EXPECT_EQ(out[1].start, 0x7ffd00000000u);
  }
}

TEST(SmapsTest, CapacityIsRespected) {
  Vma out[1];
  SmapsScanner s(out, 1);
  s.Feed(kSmaps, sizeof(kSmaps) - 1);
  s.Finish();
  EXPECT_EQ(s.stored(), 1);
  EXPECT_EQ(s.dontfork_count(), 2);
}

// The kinds of the mappings under the registered ranges, from the same scan.
TEST(SmapsTest, RecordsTheKindsUnderTheKeptRanges) {
  Vma dc[8];
  KindVma kinds[8];
  Vma keep[] = {{0x7f0480900000, 0x7f0480901000}, {0x7f0481000000, 0x7f0481000800}};
  SmapsOut o;
  o.dc = dc;
  o.dc_cap = 8;
  o.kinds = kinds;
  o.kinds_cap = 8;
  o.keep = keep;
  o.keep_count = 2;
  SmapsScanner s(o);
  s.Feed(kSmaps, sizeof(kSmaps) - 1);
  s.Finish();
  EXPECT_EQ(s.dontfork_count(), 2);
  ASSERT_EQ(s.kinds_stored(), 2);
  EXPECT_EQ(kinds[0].start, 0x7f0480800000u);
  EXPECT_EQ(kinds[0].kind, facts::MemoryKind::kAnonymous);
  EXPECT_TRUE(kinds[0].dontfork);
  EXPECT_EQ(kinds[1].kind, facts::MemoryKind::kPrivateFile);
  EXPECT_FALSE(kinds[1].dontfork);
}

TEST(SmapsTest, ReadsThisProcess) {
  Vma out[16];
  int stored = -1;
  int total = -1;
  int vmas = -1;
  SmapsOut o;
  o.dc = out;
  o.dc_cap = 16;
  int kinds = 0;
  ASSERT_TRUE(ReadSmapsView(o, &stored, &kinds, &total, &vmas));
  EXPECT_GT(vmas, 3);
}

TEST(ProcFactsTest, FdTargetsAreClassified) {
  RdmaFds f;
  ClassifyFdTarget("/dev/infiniband/uverbs0", &f);
  ClassifyFdTarget("/dev/infiniband/uverbs12", &f);
  ClassifyFdTarget("/dev/infiniband/rdma_cm", &f);
  ClassifyFdTarget("/dev/null", &f);
  ClassifyFdTarget("/dev/infiniband/issm0", &f);
  EXPECT_EQ(f.uverbs, 2);
  EXPECT_EQ(f.rdma_cm, 1);
}

TEST(ProcFactsTest, DeviceNumbersFromProcFiles) {
  const char* devices =
      "Character devices:\n  1 mem\n  4 /dev/vc/0\n 10 misc\n231 infiniband_verbs\n"
      "\nBlock devices:\n  8 sd\n231 infiniband_verbs_blk\n";
  EXPECT_EQ(FindNumberForName(devices, "Character devices:", "infiniband_verbs"), 231);
  EXPECT_EQ(FindNumberForName(devices, "Character devices:", "sd"), -1);  // block section
  EXPECT_EQ(FindNumberForName(devices, "Character devices:", "infiniband"), -1);
  const char* misc = " 58 rdma_cm\n183 hw_random\n";
  EXPECT_EQ(FindNumberForName(misc, nullptr, "rdma_cm"), 58);
  EXPECT_EQ(FindNumberForName(misc, nullptr, "hw_random"), 183);
  EXPECT_EQ(FindNumberForName(misc, nullptr, "fuse"), -1);
}

TEST(ProcFactsTest, BackstopSeesNoRdmaDescriptorsHere) {
  LearnRdmaDeviceNumbers();
  RdmaFds f = ScanRdmaFds();
  EXPECT_EQ(f.uverbs, 0);
  EXPECT_EQ(f.rdma_cm, 0);
  EXPECT_GE(ReadThreadCount(), 1);
  EXPECT_GT(CountMaps(), 3);
}

}  // namespace
}  // namespace forkguard
