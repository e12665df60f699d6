// forkguard::NoteDlopenFlags / ReportDeepbindOnce: when a RTLD_DEEPBIND dlopen must be
// reported. One process, so the order matters: the report is once per process.
#include "shim/base/dlopen_check.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "shim/base/stderr_line.h"

namespace {

TEST(DlopenCheck, ReportsFirstDeepbindOnceWhenRdmaIsLoadedAndNoAudit) {
  ASSERT_EQ(unsetenv("LD_AUDIT"), 0);
  // Nothing noted yet.
  EXPECT_FALSE(forkguard::ReportDeepbindOnce());
  forkguard::NoteDlopenFlags("libplain.so", RTLD_NOW | RTLD_LOCAL);
  EXPECT_FALSE(forkguard::ReportDeepbindOnce());

  // Noted, but nothing RDMA in this process: none of our business.
  ASSERT_EQ(dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD), nullptr);
  forkguard::NoteDlopenFlags("libfirst.so", RTLD_NOW | RTLD_DEEPBIND);
  forkguard::NoteDlopenFlags("libsecond.so", RTLD_NOW | RTLD_DEEPBIND);
  EXPECT_FALSE(forkguard::ReportDeepbindOnce());

  void* verbs = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(verbs, nullptr) << dlerror();
  // Under the audit module DEEPBIND'ed bindings are routed to the shim: nothing to say.
  ASSERT_EQ(setenv("LD_AUDIT", "/opt/x/libforkguard_audit.so", 1), 0);
  EXPECT_TRUE(forkguard::AuditModuleActive());
  EXPECT_FALSE(forkguard::ReportDeepbindOnce());
  ASSERT_EQ(unsetenv("LD_AUDIT"), 0);
  EXPECT_FALSE(forkguard::AuditModuleActive());

  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(forkguard::ReportDeepbindOnce());
  EXPECT_FALSE(forkguard::ReportDeepbindOnce());  // once
  forkguard::NoteDlopenFlags("libthird.so", RTLD_NOW | RTLD_DEEPBIND);
  EXPECT_FALSE(forkguard::ReportDeepbindOnce());  // once per process, whatever was noted since
  std::string err = ::testing::internal::GetCapturedStderr();
  char prefix[96];
  forkguard::FormatStderrPrefix(prefix, sizeof(prefix), getpid());
  EXPECT_EQ(err, std::string(prefix) +
                     "forkguard: libfirst.so loaded with RTLD_DEEPBIND; its RDMA calls bypass "
                     "interposition, relying on the /dev/infiniband descriptor backstop\n");
  dlclose(verbs);
}

}  // namespace
