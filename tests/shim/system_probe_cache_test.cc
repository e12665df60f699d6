// The first process of a boot, with no cache of its own, takes the pin probe's answers from
// root's system cache, /run/forkguard (what forkguard-probe.service and the Slurm plugin
// write): the shim on the stub libibverbs, in a mount namespace of this test's own with a
// tmpfs on /run, so that this host's /run is untouched. The answers planted are not this
// host's kernel's (it copies pinned anonymous pages): a verdict of parent-corruption can only
// have come from the file.
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "facts/pin_probe.h"
#include "gtest/gtest.h"
#include "tests/shim/shim_run.h"

namespace forkguard::test_support {
namespace {

constexpr char kProgram[] = "tests/shim/fork_after_rdma";

class SystemProbeCache : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(0u, geteuid()) << "a mount namespace and root's cache: this test runs as root";
    ASSERT_EQ(0, unshare(CLONE_NEWNS)) << strerror(errno);
    ASSERT_EQ(0, mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr)) << strerror(errno);
    ASSERT_EQ(0, mount("forkguard-test", "/run", "tmpfs", 0, "mode=0755")) << strerror(errno);
  }
  void SetUp() override {
    user_cache_ = std::string(getenv("TEST_TMPDIR")) + "/no-user-cache";
    mkdir(user_cache_.c_str(), 0700);
  }
  // Root's cache with `anonymous` as the anonymous kind's answer (the rest unknown).
  void PlantSystemCache(facts::PinFate anonymous) {
    facts::PinProbe p;
    int a = static_cast<int>(facts::MemoryKind::kAnonymous);
    p.fate[a] = anonymous;
    p.why[a] = facts::ProbeWhy::kNone;
    char err[256];
    ASSERT_TRUE(facts::WriteSystemPinProbeCache(p, facts::kSystemPinProbeDir, err, sizeof(err)))
        << err;
  }
  ShimRun Run() {
    return RunUnderShim(kProgram, {}, "warn", {"FORKGUARD_CACHE_DIR=" + user_cache_}, Verbs::kStub);
  }
  // A run (in *run) with root's cache answering `anonymous`: its fork's pin_probe says
  // `probe`, and its one range, of the anonymous kind, has `effect` on the grounds of `basis`.
  void ExpectForkJudgedByTheSystemCache(facts::PinFate anonymous, const std::string& probe,
                                        const std::string& effect, const std::string& basis,
                                        ShimRun* run) {
    PlantSystemCache(anonymous);
    *run = Run();
    ASSERT_TRUE(run->proc.Exited(0)) << run->proc.Describe();
    Json f = OneEvent(*run, "fork");
    EXPECT_EQ(probe, f["pin_probe"].String("anonymous")) << run->proc.Describe();
    ASSERT_EQ(1u, f["ranges"].array.size()) << run->proc.Describe();
    const Json& range = f["ranges"].array[0];
    EXPECT_EQ("anonymous", range.String("kind"));
    EXPECT_EQ(effect, range.String("effect")) << run->proc.Describe();
    EXPECT_EQ(basis, range.String("basis")) << run->proc.Describe();
  }
  std::string user_cache_;
};

TEST_F(SystemProbeCache, FirstProcessOfABootTakesRootsAnswer) {
  ShimRun r;
  ExpectForkJudgedByTheSystemCache(facts::PinFate::kStale, "stale", "parent-corruption",
                                   "probe-stale", &r);
  if (HasFatalFailure()) return;
  EXPECT_NE(r.proc.err.find("parent-corruption"), std::string::npos) << r.proc.Describe();

  ShimRun s;
  ExpectForkJudgedByTheSystemCache(facts::PinFate::kIntact, "intact", "nothing", "probe-intact",
                                   &s);
}

// A system cache another user could have written is not read: the answer is "not probed".
TEST_F(SystemProbeCache, ACacheRootDidNotWriteIsNotRead) {
  PlantSystemCache(facts::PinFate::kStale);
  char path[1200];
  ASSERT_TRUE(facts::SystemPinProbeCachePath(facts::kSystemPinProbeDir, path, sizeof(path)));
  ASSERT_EQ(0, chown(path, 65534, 65534));
  ShimRun r = Run();
  ASSERT_TRUE(r.proc.Exited(0)) << r.proc.Describe();
  EXPECT_EQ("not-probed", OneEvent(r, "fork")["pin_probe"].String("anonymous"))
      << r.proc.Describe();
  ASSERT_EQ(0, chown(path, 0, 0));
  ASSERT_EQ(0, chmod(facts::kSystemPinProbeDir, 0777));
  ShimRun s = Run();
  ASSERT_TRUE(s.proc.Exited(0)) << s.proc.Describe();
  EXPECT_EQ("not-probed", OneEvent(s, "fork")["pin_probe"].String("anonymous"))
      << s.proc.Describe();
  ASSERT_EQ(0, chmod(facts::kSystemPinProbeDir, 0755));
}

}  // namespace
}  // namespace forkguard::test_support
