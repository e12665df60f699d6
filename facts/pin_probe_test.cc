// The pin probe on this host's kernel (6.x: it copies pinned pages at fork, and every kernel
// since 5.9 does so for anonymous memory), and its per-boot cache.
#include "facts/pin_probe.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace forkguard::facts {
namespace {

std::string Describe(const PinProbe& p) {
  char buf[512];
  size_t n = FormatPinProbe(p, buf, sizeof(buf));
  return std::string(buf, n);
}

TEST(PinProbe, AnonymousIsIntactOnThisHost) {
  PinProbe p;
  ProbeKind(MemoryKind::kAnonymous, &p);
  int a = static_cast<int>(MemoryKind::kAnonymous);
  EXPECT_EQ(PinFate::kIntact, p.fate[a]) << Describe(p);
  EXPECT_EQ(ProbeWhy::kNone, p.why[a]) << Describe(p);
}

// The detector can say stale: pinned pages the parent no longer maps keep the old data.
TEST(PinProbe, SaysStaleWhenThePinKeepsTheOldPage) {
  PinProbe p;
  ProbeKindForTesting(MemoryKind::kAnonymous, &p, /*discard_instead_of_fork=*/true);
  EXPECT_EQ(PinFate::kStale, p.fate[static_cast<int>(MemoryKind::kAnonymous)]) << Describe(p);
}

// THP and hugetlb: measured where the host has them, else unknown with the reason - never
// stale on this 6.x host.
TEST(PinProbe, HugePagesAreIntactOrUnknownWithAReason) {
  utsname u{};
  ASSERT_EQ(0, uname(&u));
  ASSERT_GE(atoi(u.release), 6) << "this test knows the host's kernel 6.x: " << u.release;
  PinProbe p = RunPinProbe();
  for (MemoryKind k : {MemoryKind::kThp, MemoryKind::kHugetlb}) {
    int i = static_cast<int>(k);
    EXPECT_NE(PinFate::kStale, p.fate[i]) << MemoryKindName(k) << "\n" << Describe(p);
    if (p.fate[i] == PinFate::kUnknown) {
      EXPECT_NE(ProbeWhy::kNone, p.why[i]) << Describe(p);
      EXPECT_NE(ProbeWhy::kFailed, p.why[i]) << Describe(p);
    }
  }
  printf("%s", Describe(p).c_str());
}

TEST(PinProbe, TextRoundTrip) {
  PinProbe p;
  p.fate[0] = PinFate::kIntact;
  p.why[0] = ProbeWhy::kNone;
  p.fate[1] = PinFate::kUnknown;
  p.why[1] = ProbeWhy::kFailed;
  p.err[1] = 22;
  p.fate[2] = PinFate::kStale;
  p.why[2] = ProbeWhy::kNone;
  char buf[512];
  size_t n = FormatPinProbe(p, buf, sizeof(buf));
  buf[n] = '\0';
  PinProbe q;
  ASSERT_TRUE(ParsePinProbe(buf, &q)) << buf;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p.fate[i], q.fate[i]) << buf;
    EXPECT_EQ(p.why[i], q.why[i]) << buf;
    EXPECT_EQ(p.err[i], q.err[i]) << buf;
  }
  EXPECT_FALSE(ParsePinProbe("something else\nanonymous intact\n", &q));
  EXPECT_FALSE(ParsePinProbe("forkguard pin-probe 1\nanonymous sideways\n", &q));
}

TEST(PinProbe, CachedOncePerBoot) {
  std::string dir = std::string(getenv("TEST_TMPDIR")) + "/cache/sub";
  setenv("FORKGUARD_CACHE_DIR", dir.c_str(), 1);
  PinProbe p;
  EXPECT_FALSE(ReadPinProbeCache(&p));
  bool probed = false;
  PinProbe first = PinProbeForThisBoot(&probed);
  EXPECT_TRUE(probed);
  struct stat st;
  ASSERT_EQ(0, stat(dir.c_str(), &st));
  EXPECT_EQ(0700u, st.st_mode & 0777);
  char path[1200];
  ASSERT_TRUE(PinProbeCachePath(path, sizeof(path)));
  ASSERT_EQ(0, stat(path, &st));
  EXPECT_EQ(0600u, st.st_mode & 0777);
  PinProbe second = PinProbeForThisBoot(&probed);
  // The second call reads the cache; it probes again only kinds unknown for a reason that
  // can change within a boot (here: hugetlb without reserved pages).
  int huge = static_cast<int>(MemoryKind::kHugetlb);
  int thp = static_cast<int>(MemoryKind::kThp);
  bool changeable =
      (first.fate[huge] == PinFate::kUnknown && first.why[huge] == ProbeWhy::kNoHugetlbPages) ||
      (first.fate[thp] == PinFate::kUnknown && first.why[thp] == ProbeWhy::kNoThp);
  EXPECT_EQ(changeable, probed);
  for (int i = 0; i < kMemoryKinds; ++i) {
    EXPECT_EQ(first.fate[i], second.fate[i]);
    EXPECT_EQ(first.why[i], second.why[i]);
  }
  unsetenv("FORKGUARD_CACHE_DIR");
}

}  // namespace
}  // namespace forkguard::facts
