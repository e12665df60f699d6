#include "shim/verdict.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "shim/proc_facts.h"

namespace forkguard {
namespace {

MrRecord Mr(uintptr_t addr, uint64_t len) {
  MrRecord m;
  m.handle = addr + 1;
  m.addr = addr;
  m.len = len;
  return m;
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
  VerdictInput in;
  in.counts.contexts = 1;
  in.counts.pds = 1;
  in.counts.mrs = 2;
  in.mrs = mrs.data();
  in.mr_count = 2;
  in.dc_vmas = dc.data();
  in.dc_count = 1;
  in.kernel_cof = KernelCof::kYes;
  bool flags[2] = {false, false};
  ForkVerdict v = DecideVerdict(in, flags);
  EXPECT_TRUE(v.hazard());
  EXPECT_EQ(v.reasons, kChildSegv | kInheritedRdma);
  EXPECT_EQ(v.dontfork_mrs, 1);
  EXPECT_TRUE(flags[0]);
  EXPECT_FALSE(flags[1]);
}

TEST(VerdictTest, NoForkSupportOnOldKernelMeansParentCorruption) {
  std::vector<MrRecord> mrs = {Mr(0x10000, 0x4000)};
  VerdictInput in;
  in.counts.contexts = 1;
  in.counts.mrs = 1;
  in.mrs = mrs.data();
  in.mr_count = 1;
  in.kernel_cof = KernelCof::kNo;
  ForkVerdict v = DecideVerdict(in, nullptr);
  EXPECT_EQ(v.reasons, kParentCorruption | kInheritedRdma);
  EXPECT_EQ(v.corruptible_mrs, 1);
  // The same on a copy-on-fork kernel: only the inheritance remains.
  in.kernel_cof = KernelCof::kYes;
  EXPECT_EQ(DecideVerdict(in, nullptr).reasons, static_cast<unsigned>(kInheritedRdma));
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

// Issue 13: what librdmacm keeps after the program destroyed its ids and channels.
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

// Issue 13: a child that execs right away is judged by what it can touch before exec.
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

TEST(SmapsTest, FlagWordsOnlyMatchWhole) {
  std::string a = "VmFlags: rd wr dcx";
  std::string b = "VmFlags: rd wr xdc";
  std::string c = "VmFlags: dc";
  std::string d = "Size: dc";
  EXPECT_FALSE(VmFlagsHasDontCopy(a.data(), a.size()));
  EXPECT_FALSE(VmFlagsHasDontCopy(b.data(), b.size()));
  EXPECT_TRUE(VmFlagsHasDontCopy(c.data(), c.size()));
  EXPECT_FALSE(VmFlagsHasDontCopy(d.data(), d.size()));
}

TEST(SmapsTest, HeaderParsing) {
  uintptr_t s = 0;
  uintptr_t e = 0;
  std::string ok = "7f00-7f10 rw-p 0 0:0 0";
  std::string anon = "AnonHugePages:    0 kB";
  EXPECT_TRUE(ParseSmapsHeader(ok.data(), ok.size(), &s, &e));
  EXPECT_EQ(s, 0x7f00u);
  EXPECT_EQ(e, 0x7f10u);
  EXPECT_FALSE(ParseSmapsHeader(anon.data(), anon.size(), &s, &e));
}

TEST(SmapsTest, ReadsThisProcess) {
  Vma out[16];
  int stored = -1;
  int total = -1;
  int vmas = -1;
  ASSERT_TRUE(ReadDontforkVmas(out, 16, &stored, &total, &vmas));
  EXPECT_GT(vmas, 3);
}

TEST(ProcFactsTest, RdmaCoreVersionFromLibraryName) {
  EXPECT_EQ(44, RdmaCoreFromLibName(
                    "7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0"));
  EXPECT_EQ(51, RdmaCoreFromLibName("/usr/lib64/libibverbs.so.1.14.51.0"));
  EXPECT_EQ(-1, RdmaCoreFromLibName("/usr/lib/x86_64-linux-gnu/libibverbs.so.1"));
  EXPECT_EQ(-1, RdmaCoreFromLibName("/lib/libc.so.6"));
}

TEST(ProcFactsTest, KernelReleaseParsing) {
  EXPECT_EQ(CofFromRelease("6.1.0-18-amd64"), KernelCof::kYes);
  EXPECT_EQ(CofFromRelease("5.13.0"), KernelCof::kYes);
  EXPECT_EQ(CofFromRelease("5.12.19"), KernelCof::kNo);
  EXPECT_EQ(CofFromRelease("4.18.0-513.el8.x86_64"), KernelCof::kNo);
  EXPECT_EQ(CofFromRelease("garbage"), KernelCof::kUnknown);
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
