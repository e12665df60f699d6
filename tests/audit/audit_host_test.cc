// Host tests of libforkguard_audit.so with a stand-in shim (fake_shim/libforkguard.so)
// and the stub libibverbs: which object each handle lookup ends up in, that the shim's
// own lookups are not redirected, that compat versions are left alone, and that the
// module on its own changes nothing but one line on stderr.
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/audit/log_lines.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::test_support {
namespace {

struct Paths {
  std::string program = Runfile("tests/audit/nccl_like");
  std::string fake_shim = Runfile("tests/audit/fake_shim/libforkguard.so");
  std::string audit = Runfile("shim/libforkguard_audit.so");
  std::string deepbind_user = Runfile("tests/audit/libdeepbind_user.so");
  std::string stub_dir = [] {
    std::string lib = Runfile("tests/stub_ibverbs/lib/libibverbs.so.1");
    return lib.substr(0, lib.rfind('/'));
  }();
};

ProgramResult RunNcclLike(const Paths& p, bool preload, bool audit,
                          std::vector<std::string> extra_args = {}) {
  std::vector<std::string> argv = {p.program};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  return RunProgram(argv, {"LD_LIBRARY_PATH=" + p.stub_dir,
                           "LD_PRELOAD=" + (preload ? p.fake_shim : std::string()),
                           "LD_AUDIT=" + (audit ? p.audit : std::string())});
}

TEST(AuditModule, RoutesHandleLookupsToTheShim) {
  Paths p;
  ProgramResult r = RunNcclLike(p, /*preload=*/true, /*audit=*/true);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  // Watched names the shim exports go to the shim; names it does not export, and the compat
  // version with its other ABI, do not.
  const std::pair<const char*, const char*> bindings[] = {
      {"ibv_open_device@IBVERBS_1.1", "libforkguard.so"},
      {"ibv_alloc_pd@IBVERBS_1.1", "libforkguard.so"},
      {"ibv_reg_mr@IBVERBS_1.1", "libforkguard.so"},
      {"ibv_fork_init@IBVERBS_1.1", "libforkguard.so"},
      {"ibv_get_device_list@IBVERBS_1.1", "libibverbs.so.1"},
      {"ibv_open_device@IBVERBS_1.0", "libibverbs.so.1"},
  };
  for (const auto& [symbol, library] : bindings) {
    EXPECT_NE(r.out.find(std::string("bind ") + symbol + " -> " + library), std::string::npos)
        << r.out;
  }
  // The wrappers ran once per call and reached the real (stub) functions: no recursion
  // through the shim's own dlvsym, and no compat version called.
  for (const char* call : {"ibv_fork_init", "ibv_open_device", "ibv_alloc_pd", "ibv_reg_mr"}) {
    EXPECT_EQ(CountOf(r.err, std::string("fake-shim: ") + call + "\n"), 1) << r.err;
  }
  EXPECT_EQ(r.err.find("stub-ibverbs"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("ibv_fork_init = 0"), std::string::npos);
  EXPECT_NE(r.out.find("registered 16384 bytes on stub0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("child exited 0"), std::string::npos) << r.out;
}

TEST(AuditModule, WithoutItHandleLookupsBypassThePreload) {
  // The reason the module exists: the same program under LD_PRELOAD alone.
  Paths p;
  ProgramResult r = RunNcclLike(p, /*preload=*/true, /*audit=*/false);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("bind ibv_open_device@IBVERBS_1.1 -> libibverbs.so.1"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.err.find("fake-shim:"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("child exited 0"), std::string::npos) << r.out;
}

TEST(AuditModule, AloneSaysOnceAndChangesNothing) {
  Paths p;
  ProgramResult plain = RunNcclLike(p, /*preload=*/false, /*audit=*/false);
  ProgramResult audited = RunNcclLike(p, /*preload=*/false, /*audit=*/true);
  ASSERT_EQ(plain.status, 0) << plain.out << plain.err;
  EXPECT_EQ(audited.status, plain.status);
  EXPECT_EQ(audited.out, plain.out);
  EXPECT_EQ(CountOf(audited.err, "libforkguard_audit.so does nothing without the shim"), 1)
      << audited.err;
  // Prefixed like the shim's lines: "[host pid] forkguard: ..." (no rank outside a launcher).
  EXPECT_EQ(audited.err.rfind("[", 0), 0u) << audited.err;
  EXPECT_NE(audited.err.find("] forkguard: libforkguard_audit.so"), std::string::npos)
      << audited.err;
  EXPECT_EQ(plain.err, "");
}

TEST(AuditModule, RoutesPltCallsOfADeepbindLibrary) {
#if defined(FORKGUARD_ASAN) || defined(FORKGUARD_TSAN)
  // The sanitizer runtimes refuse any dlopen(RTLD_DEEPBIND), also without forkguard.
  GTEST_SKIP() << "NOT RUN: ASan/TSan abort any dlopen(RTLD_DEEPBIND); run without a sanitizer";
#endif
  // RTLD_DEEPBIND puts the library's own dependencies (libibverbs) before the preloaded
  // shim in its lookup scope; the binding is still reported to la_symbind64.
  Paths p;
  ProgramResult with_audit = RunNcclLike(p, true, true, {"--deepbind", p.deepbind_user});
  ASSERT_EQ(with_audit.status, 0) << with_audit.out << with_audit.err;
  EXPECT_EQ(CountOf(with_audit.err, "fake-shim: ibv_fork_init\n"), 2) << with_audit.err;
  EXPECT_NE(with_audit.out.find("deepbind ibv_fork_init = 0"), std::string::npos) << with_audit.out;

  ProgramResult without = RunNcclLike(p, true, false, {"--deepbind", p.deepbind_user});
  ASSERT_EQ(without.status, 0) << without.out << without.err;
  EXPECT_EQ(CountOf(without.err, "fake-shim: ibv_fork_init\n"), 0) << without.err;
}

TEST(AuditModule, WithTheRealShimTheForkGetsTheFullVerdict) {
  // The same NCCL-style program under the real libforkguard.so and the stub libibverbs:
  // the shim sees the device open and the registration, hence child-segv and the init stack.
  Paths p;
  std::string log_dir = MakeTempDir("fglog");
  ProgramResult r =
      RunProgram({p.program},
                 {"LD_LIBRARY_PATH=" + p.stub_dir, "LD_PRELOAD=" + Runfile("shim/libforkguard.so"),
                  "LD_AUDIT=" + p.audit, "FORKGUARD_LOG=" + log_dir, "FORKGUARD_MODE=warn",
                  "RDMAV_FORK_SAFE=", "IBV_FORK_SAFE="});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("child exited 0"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("ibv_open_device(stub0) at:"), std::string::npos) << r.err;
  std::vector<std::string> log = ReadLogLines(log_dir);
  auto forks = LinesWith(log, {"\"event\":\"fork\"", "\"verdict\":\"hazard\""});
  ASSERT_EQ(forks.size(), 1u) << ::testing::PrintToString(log);
  EXPECT_NE(forks[0].find("\"child-segv\""), std::string::npos) << forks[0];
  EXPECT_NE(forks[0].find("\"init\":{\"call\":\"ibv_open_device\",\"device\":\"stub0\""),
            std::string::npos)
      << forks[0];
  EXPECT_EQ(LinesWith(log, {"\"event\":\"fork_init\"", "\"result\":0"}).size(), 1u)
      << ::testing::PrintToString(log);
}

}  // namespace
}  // namespace forkguard::test_support
