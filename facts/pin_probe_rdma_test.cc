// The pin probe in the Soft-RoCE guest (root: it reserves hugetlb pages, so every kind is
// measured) against what the same kernel reports over RDMA netlink, which the guest has.
// Measured on rxe0: 6.1 reports copy-on-fork and keeps every kind; 5.10.223 reports nothing,
// keeps anonymous memory and leaves hugetlb memory stale.
#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <cstdio>
#include <string>

#include "facts/machine_facts.h"
#include "facts/pin_probe.h"
#include "tests/support/rdma_device.h"

namespace forkguard::facts {
namespace {

TEST(PinProbeRdma, AgreesWithWhatTheKernelReports) {
  forkguard::test_support::RequireRdmaDevice();
  FILE* f = fopen("/proc/sys/vm/nr_hugepages", "w");
  ASSERT_NE(nullptr, f) << "the guest runs as root and can reserve hugetlb pages";
  fputs("8\n", f);
  ASSERT_EQ(0, fclose(f));
  PinProbe p = RunPinProbe();
  char text[512];
  text[FormatPinProbe(p, text, sizeof(text))] = '\0';
  const char* why = nullptr;
  Tri reported = ReportedCopyOnFork(&why);
  printf("reported copy-on-fork: %s (%s)\n%s",
         reported == Tri::kYes  ? "yes"
         : reported == Tri::kNo ? "no"
                                : "not reported",
         why, text);
  int anon = static_cast<int>(MemoryKind::kAnonymous);
  int huge = static_cast<int>(MemoryKind::kHugetlb);
  EXPECT_EQ(PinFate::kIntact, p.fate[anon]) << text;
  ASSERT_NE(PinFate::kUnknown, p.fate[huge]) << "hugetlb must be measured here\n" << text;
  if (reported == Tri::kYes) {
    for (int i = 0; i < kMemoryKinds; ++i) EXPECT_NE(PinFate::kStale, p.fate[i]) << text;
  } else {
    // 5.10.223 as measured with a device write on rxe0.
    utsname u{};
    uname(&u);
    if (std::string(u.release).rfind("5.10.", 0) == 0) {
      EXPECT_EQ(PinFate::kStale, p.fate[huge]) << text;
    }
  }
}

}  // namespace
}  // namespace forkguard::facts
