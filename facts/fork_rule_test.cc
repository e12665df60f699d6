// The rule over the cells measured on rxe0 (kernels 5.10.223 and 6.1, rdma-core 33, 44, 56):
// one row per cell, the facts as the machine gives them, the effect the device showed.
#include "facts/fork_rule.h"

#include <gtest/gtest.h>

#include <string>

namespace forkguard::facts {
namespace {

using K = MemoryKind;
using E = ForkEffect;
using B = Basis;
using By = ForkSupportBy;

// Debian 11's 5.10.223: no netlink attribute; the probe finds pinned anonymous pages copied
// at fork and pinned hugetlb pages left to the child.
MachineFacts Kernel510(int rdma_core, By by) {
  MachineFacts m;
  m.reported_cof = Tri::kUnknown;
  m.probe.fate[static_cast<int>(K::kAnonymous)] = PinFate::kIntact;
  m.probe.why[static_cast<int>(K::kAnonymous)] = ProbeWhy::kNone;
  m.probe.fate[static_cast<int>(K::kHugetlb)] = PinFate::kStale;
  m.probe.why[static_cast<int>(K::kHugetlb)] = ProbeWhy::kNone;
  m.rdma_core = rdma_core;
  m.fork_support = by;
  return m;
}

// Debian 12's 6.1: reports copy-on-fork; the probe agrees for every kind.
MachineFacts Kernel61(int rdma_core, By by) {
  MachineFacts m;
  m.reported_cof = Tri::kYes;
  for (K k : {K::kAnonymous, K::kThp, K::kHugetlb}) {
    m.probe.fate[static_cast<int>(k)] = PinFate::kIntact;
    m.probe.why[static_cast<int>(k)] = ProbeWhy::kNone;
  }
  m.rdma_core = rdma_core;
  m.fork_support = by;
  return m;
}

struct Cell {
  const char* name;
  MachineFacts machine;
  RangeFacts range;
  E effect;
  B basis;
};

RangeFacts Range(K kind, Tri dc) {
  RangeFacts r;
  r.kind = kind;
  r.dontfork = dc;
  return r;
}

TEST(ForkRule, MeasuredCells) {
  const Cell cells[] = {
      // 5.10: the anonymous buffer stayed intact with fork support off; hugetlb went stale.
      {"5.10 rc44 off anonymous", Kernel510(44, By::kOff), Range(K::kAnonymous, Tri::kNo),
       E::kNothing, B::kProbeIntact},
      {"5.10 rc44 off hugetlb", Kernel510(44, By::kOff), Range(K::kHugetlb, Tri::kNo),
       E::kParentCorruption, B::kProbeStale},
      {"5.10 rc33 off hugetlb", Kernel510(33, By::kOff), Range(K::kHugetlb, Tri::kNo),
       E::kParentCorruption, B::kProbeStale},
      // RDMAV_FORK_SAFE=1: the range is dc and a child that touches it dies.
      {"5.10 rc44 env anonymous (smaps dc)", Kernel510(44, By::kEnvironment),
       Range(K::kAnonymous, Tri::kYes), E::kChildSegv, B::kDontfork},
      {"5.10 rc44 env anonymous (predicted)", Kernel510(44, By::kEnvironment),
       Range(K::kAnonymous, Tri::kUnknown), E::kChildSegv, B::kDontforkPredicted},
      // rdma-core >= 51 asks the kernel, which does not report copy-on-fork on 5.10: it marks.
      {"5.10 rc56 env anonymous (predicted)", Kernel510(56, By::kEnvironment),
       Range(K::kAnonymous, Tri::kUnknown), E::kChildSegv, B::kDontforkPredicted},
      // 6.1: both kinds intact with fork support off.
      {"6.1 rc44 off anonymous", Kernel61(44, By::kOff), Range(K::kAnonymous, Tri::kNo),
       E::kNothing, B::kProbeIntact},
      {"6.1 rc44 off hugetlb", Kernel61(44, By::kOff), Range(K::kHugetlb, Tri::kNo), E::kNothing,
       B::kProbeIntact},
      // rdma-core < 51 marks every registration even on a copy-on-fork kernel.
      {"6.1 rc33 env anonymous", Kernel61(33, By::kEnvironment),
       Range(K::kAnonymous, Tri::kUnknown), E::kChildSegv, B::kDontforkPredicted},
      {"6.1 rc44 ibv_fork_init anonymous", Kernel61(44, By::kForkInit),
       Range(K::kAnonymous, Tri::kUnknown), E::kChildSegv, B::kDontforkPredicted},
      // rdma-core 56 on 6.1: RDMAV_FORK_SAFE=1 and ibv_fork_init() leave the buffer without dc.
      {"6.1 rc56 env anonymous (predicted)", Kernel61(56, By::kEnvironment),
       Range(K::kAnonymous, Tri::kUnknown), E::kNothing, B::kProbeIntact},
      {"6.1 rc56 ibv_fork_init anonymous (smaps)", Kernel61(56, By::kForkInit),
       Range(K::kAnonymous, Tri::kNo), E::kNothing, B::kProbeIntact},
      {"6.1 rc56 env hugetlb (predicted)", Kernel61(56, By::kEnvironment),
       Range(K::kHugetlb, Tri::kUnknown), E::kNothing, B::kProbeIntact},
  };
  for (const Cell& c : cells) {
    RangeVerdict v = DecideRange(c.machine, c.range);
    EXPECT_EQ(ForkEffectName(v.effect), std::string(ForkEffectName(c.effect))) << c.name;
    EXPECT_EQ(BasisName(v.basis), std::string(BasisName(c.basis))) << c.name;
  }
}

// The smaps view wins over the prediction: what the kernel marks is what the child gets.
TEST(ForkRule, SmapsDcOverridesThePrediction) {
  EXPECT_EQ(E::kChildSegv,
            DecideRange(Kernel61(56, By::kEnvironment), Range(K::kAnonymous, Tri::kYes)).effect);
  EXPECT_EQ(E::kNothing,
            DecideRange(Kernel61(44, By::kEnvironment), Range(K::kAnonymous, Tri::kNo)).effect);
}

// No probe and no report: unknown, with the reason - never a guess from the release.
TEST(ForkRule, NothingToTellIsUnknownWithTheReason) {
  MachineFacts m;  // 5.10 before anyone probed: not reported, not probed
  m.rdma_core = 44;
  RangeVerdict v = DecideRange(m, Range(K::kHugetlb, Tri::kNo));
  EXPECT_EQ(E::kUnknown, v.effect);
  EXPECT_EQ(B::kUnknownKernel, v.basis);
  EXPECT_EQ(ProbeWhy::kNotProbed, v.why);
  char buf[512];
  std::string text = BasisText(v, buf, sizeof(buf));
  EXPECT_NE(text.find("pinned hugetlb pages"), std::string::npos) << text;
  EXPECT_NE(text.find("run `forkguard doctor` to probe"), std::string::npos) << text;

  m.probe.why[static_cast<int>(K::kAnonymous)] = ProbeWhy::kIoUringDisabled;
  v = DecideRange(m, Range(K::kAnonymous, Tri::kNo));
  EXPECT_EQ(E::kUnknown, v.effect);
  EXPECT_EQ(ProbeWhy::kIoUringDisabled, v.why);
  text = BasisText(v, buf, sizeof(buf));
  EXPECT_NE(text.find("io_uring_disabled"), std::string::npos) << text;

  // The same machine where the kernel reports copy-on-fork: nothing, from its report.
  m.reported_cof = Tri::kYes;
  v = DecideRange(m, Range(K::kAnonymous, Tri::kNo));
  EXPECT_EQ(E::kNothing, v.effect);
  EXPECT_EQ(B::kReportedCof, v.basis);
  // ... and where it reports none.
  m.reported_cof = Tri::kNo;
  EXPECT_EQ(E::kParentCorruption, DecideRange(m, Range(K::kAnonymous, Tri::kNo)).effect);
}

// What was measured beats what is reported.
TEST(ForkRule, MeasuredBeatsReported) {
  MachineFacts m = Kernel61(44, By::kOff);
  m.probe.fate[static_cast<int>(K::kHugetlb)] = PinFate::kStale;
  RangeVerdict v = DecideRange(m, Range(K::kHugetlb, Tri::kNo));
  EXPECT_EQ(E::kParentCorruption, v.effect);
  EXPECT_EQ(B::kProbeStale, v.basis);
  char buf[512];
  EXPECT_NE(std::string(BasisText(v, buf, sizeof(buf))).find("does not copy pinned hugetlb"),
            std::string::npos);
}

TEST(ForkRule, SharedPrivateFileAndUnknownKinds) {
  MachineFacts none;  // nothing reported or probed
  // MAP_SHARED: fork shares the page; nothing to measure.
  EXPECT_EQ(E::kNothing, DecideRange(none, Range(K::kShared, Tri::kNo)).effect);
  EXPECT_EQ(B::kShared, DecideRange(none, Range(K::kShared, Tri::kNo)).basis);
  // A private file mapping answers as anonymous memory.
  RangeVerdict v = DecideRange(Kernel510(44, By::kOff), Range(K::kPrivateFile, Tri::kNo));
  EXPECT_EQ(E::kNothing, v.effect);
  EXPECT_EQ(K::kAnonymous, v.probed_as);
  // A range whose mapping was not found.
  EXPECT_EQ(B::kUnknownKind,
            DecideRange(Kernel510(44, By::kOff), Range(K::kUnknown, Tri::kNo)).basis);
  EXPECT_EQ(E::kNothing, DecideRange(Kernel61(44, By::kOff), Range(K::kUnknown, Tri::kNo)).effect);
}

TEST(ForkRule, RegistrationMarksDontfork) {
  EXPECT_EQ(Tri::kNo, RegistrationMarksDontfork(Kernel510(44, By::kOff)));
  EXPECT_EQ(Tri::kYes, RegistrationMarksDontfork(Kernel510(56, By::kEnvironment)));
  EXPECT_EQ(Tri::kYes, RegistrationMarksDontfork(Kernel61(44, By::kForkInit)));
  EXPECT_EQ(Tri::kYes, RegistrationMarksDontfork(Kernel61(50, By::kEnvironment)));
  EXPECT_EQ(Tri::kNo, RegistrationMarksDontfork(Kernel61(51, By::kEnvironment)));
  EXPECT_EQ(Tri::kUnknown, RegistrationMarksDontfork(Kernel61(-1, By::kEnvironment)));
  EXPECT_EQ(Tri::kYes, RegistrationMarksDontfork(Kernel510(-1, By::kEnvironment)));
  RangeVerdict v = DecideRange(Kernel61(-1, By::kEnvironment), Range(K::kAnonymous, Tri::kUnknown));
  EXPECT_EQ(E::kUnknown, v.effect);
  EXPECT_EQ(B::kUnknownRdmaCore, v.basis);
  // hugetlb with RDMAV_FORK_SAFE=1 on 5.10 (rdma-core 44): ibv_reg_mr failed.
  MachineFacts h = Kernel510(44, By::kEnvironment);
  EXPECT_EQ(Tri::kYes, HugetlbRegistrationMayFail(h));
  h.hugepages_safe = true;
  EXPECT_EQ(Tri::kNo, HugetlbRegistrationMayFail(h));
  EXPECT_EQ(Tri::kNo, HugetlbRegistrationMayFail(Kernel61(56, By::kEnvironment)));
}

TEST(ForkRule, NamesRoundTrip) {
  for (int i = 0; i < kMemoryKinds; ++i) {
    MemoryKind k;
    ASSERT_TRUE(ParseMemoryKind(MemoryKindName(static_cast<MemoryKind>(i)), &k));
    EXPECT_EQ(i, static_cast<int>(k));
  }
  for (int i = 0; i < kProbeWhys; ++i) {
    ProbeWhy w;
    ASSERT_TRUE(ParseProbeWhy(ProbeWhyName(static_cast<ProbeWhy>(i)), &w));
    EXPECT_EQ(i, static_cast<int>(w));
  }
  MemoryKind k;
  EXPECT_FALSE(ParseMemoryKind("huge", &k));
  EXPECT_STREQ("child-segv", ForkEffectName(E::kChildSegv));
  EXPECT_STREQ("parent-corruption", ForkEffectName(E::kParentCorruption));
}

}  // namespace
}  // namespace forkguard::facts
