// forkguard::CheckDlopenFlags: when a RTLD_DEEPBIND dlopen must be reported.
#include "shim/dlopen_check.h"

#include <dlfcn.h>
#include <stdlib.h>

#include "gtest/gtest.h"

namespace {

// One process, so the order matters: the warning is once per process.
TEST(DlopenCheck, ReportsDeepbindOnceWhenRdmaIsLoadedAndNoAudit) {
  ASSERT_EQ(unsetenv("LD_AUDIT"), 0);
  // Nothing RDMA in this process yet: a DEEPBIND library is none of our business.
  ASSERT_EQ(dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD), nullptr);
  EXPECT_FALSE(forkguard::CheckDlopenFlags("libfoo.so", RTLD_NOW | RTLD_DEEPBIND));

  void* verbs = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(verbs, nullptr) << dlerror();
  EXPECT_FALSE(forkguard::CheckDlopenFlags("libfoo.so", RTLD_NOW | RTLD_LOCAL));
  // Under the audit module DEEPBIND'ed bindings are routed to the shim: nothing to say.
  ASSERT_EQ(setenv("LD_AUDIT", "/opt/x/libforkguard_audit.so", 1), 0);
  EXPECT_TRUE(forkguard::AuditModuleActive());
  EXPECT_FALSE(forkguard::CheckDlopenFlags("libfoo.so", RTLD_NOW | RTLD_DEEPBIND));
  ASSERT_EQ(unsetenv("LD_AUDIT"), 0);
  EXPECT_FALSE(forkguard::AuditModuleActive());

  EXPECT_TRUE(forkguard::CheckDlopenFlags("libfoo.so", RTLD_NOW | RTLD_DEEPBIND));
  EXPECT_FALSE(forkguard::CheckDlopenFlags("libbar.so", RTLD_NOW | RTLD_DEEPBIND));  // once
  dlclose(verbs);
}

}  // namespace
