// Every libc way to create a process after RDMA init, decided like fork(); the
// fix line chosen from the facts; who turned fork support on; what librdmacm keeps.
// Built twice from this file: fork_entry_stub_test (host, stub libibverbs) and, with
// FORKGUARD_TEST_REAL, fork_entry_rdma_test (tag rdma: rxe0 with rdma-core 44).
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/shim/shim_harness.h"
#include "tests/shim/shim_run.h"
#ifdef FORKGUARD_TEST_REAL
#include "tests/support/rdma_device.h"
#endif

namespace forkguard::test_support {
namespace {

constexpr char kProgram[] = "tests/shim/fork_after_rdma";

class ForkEntry : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef FORKGUARD_TEST_REAL
    dev_ = RequireRdmaDevice();
#endif
  }
  ShimRun Run(const std::vector<std::string>& args, const std::string& mode = "",
              const std::vector<std::string>& env = {}) {
    std::vector<std::string> e = env;
#ifdef FORKGUARD_TEST_REAL
    e.push_back("RXE_DEV=" + dev_.name);
    if (!dev_.ip.empty()) e.push_back("RXE_IP=" + dev_.ip);
    return RunUnderShim(kProgram, args, mode, e, Verbs::kReal);
#else
    return RunUnderShim(kProgram, args, mode, e, Verbs::kStub);
#endif
  }
#ifdef FORKGUARD_TEST_REAL
  // tests/shim/ucx_fork on the device, with `env` added.
  ShimRun RunUcxFork(const std::string& mode, const std::vector<std::string>& env = {}) {
    std::vector<std::string> e = {"RXE_DEV=" + dev_.name};
    e.insert(e.end(), env.begin(), env.end());
    return RunUnderShim("tests/shim/ucx_fork", {}, mode, e, Verbs::kReal);
  }
  RdmaDevice dev_;
#endif
};

std::string Ctx(const ShimRun& r) { return r.proc.Describe(); }

bool Has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// Error mode failed the fork-alike `fn` with `err` (ENOMEM or EPERM): no child, the program
// carried on; stdout, the message and the parent's fork event say so.
void ExpectFailedInErrorMode(const ShimRun& r, const std::string& fn, int err) {
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_TRUE(
      Has(r.proc.out, "fork failed: errno=" + std::to_string(err) + " (" + strerror(err) + ")"))
      << Ctx(r);
  EXPECT_TRUE(r.report.children.empty()) << Ctx(r);
  EXPECT_TRUE(Has(r.proc.err, "mode: error - " + fn + "() fails with " +
                                  (err == ENOMEM ? "ENOMEM" : "EPERM") + "; no child was created"))
      << Ctx(r);
  Json f = OneEvent(r, "fork");
  EXPECT_EQ("failed", f.String("action")) << Ctx(r);
  EXPECT_EQ(err, f.Int("errno")) << Ctx(r);
  EXPECT_TRUE(r.report.done) << Ctx(r);
}

// _Fork runs no atfork handlers: it used to be invisible, and its child died unexplained.
TEST_F(ForkEntry, UnderscoreForkIsDecidedAndItsChildSegvExplained) {
  ShimRun r = Run({"--fork-fn=_Fork", "--touch-buffer"}, "warn", {"RDMAV_FORK_SAFE=1"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ExpectHazardWarning(r, {"child-segv", "inherited-rdma"}, {});
  EXPECT_TRUE(Has(r.proc.err,
                  "mode: warn - _Fork() proceeds (FORKGUARD_MODE=error makes it "
                  "fail with ENOMEM)"))
      << Ctx(r);
  EXPECT_EQ("_Fork", OneEvent(r, "fork").String("via")) << Ctx(r);
  ASSERT_EQ(1u, r.report.children.size()) << Ctx(r);
  ASSERT_FALSE(r.report.registered.empty()) << Ctx(r);
  ExpectChildSegvExplained(r, r.report.children[0], r.report.registered[0].second);
}

TEST_F(ForkEntry, UnderscoreForkFailsWithEnomemInErrorMode) {
  ExpectFailedInErrorMode(
      Run({"--fork-fn=_Fork", "--touch-buffer"}, "error", {"RDMAV_FORK_SAFE=1"}), "_Fork", ENOMEM);
}

// daemon(): the original process exits inside the call; the daemon is the child.
TEST_F(ForkEntry, DaemonIsDecidedAndTheDaemonsSegvExplained) {
  ShimRun r = Run({"--fork-fn=daemon", "--touch-buffer"}, "warn", {"RDMAV_FORK_SAFE=1"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  HazardMessage m = ParseHazardMessage(r.proc.err);
  ASSERT_TRUE(m.found) << Ctx(r);
  EXPECT_TRUE(m.HasReason("child-segv")) << Ctx(r);
  EXPECT_TRUE(Has(r.proc.err, "mode: warn - daemon() proceeds")) << Ctx(r);
  EXPECT_EQ("daemon", OneEvent(r, "fork").String("via")) << Ctx(r);
  size_t at = r.proc.out.find("daemon: pid=");
  ASSERT_NE(std::string::npos, at) << Ctx(r);
  long daemon_pid = std::stol(r.proc.out.substr(at + 12));
  ChildSegvMessage c = FindChildSegvMessage(r.proc.err, daemon_pid);
  EXPECT_TRUE(c.found) << "the daemon's SIGSEGV is not explained\n" << Ctx(r);
}

TEST_F(ForkEntry, DaemonFailsWithEpermInErrorModeAndTheProgramGoesOn) {
  ShimRun r = Run({"--fork-fn=daemon", "--touch-buffer"}, "error", {"RDMAV_FORK_SAFE=1"});
  ExpectFailedInErrorMode(r, "daemon", EPERM);
  EXPECT_FALSE(Has(r.proc.out, "daemon: pid=")) << Ctx(r);
}

TEST_F(ForkEntry, ForkptyIsDecidedAndFailsWithEnomemInErrorMode) {
  ShimRun w = Run({"--fork-fn=forkpty"}, "warn");
  ASSERT_TRUE(w.proc.Exited(0)) << Ctx(w);
  ExpectHazardWarning(w, {"inherited-rdma"}, {});
  EXPECT_EQ("forkpty", OneEvent(w, "fork").String("via")) << Ctx(w);
  EXPECT_TRUE(Has(w.proc.out, "child exited 0")) << Ctx(w);

  ExpectFailedInErrorMode(Run({"--fork-fn=forkpty"}, "error"), "forkpty", ENOMEM);
}

// Before RDMA init every entry point is clean and silent, error mode included.
TEST_F(ForkEntry, CleanForkAlikesPassThroughInErrorMode) {
  for (const char* fn : {"--fork-fn=_Fork", "--fork-fn=forkpty"}) {
    ShimRun r = Run({"--order=fork-first", fn}, "error");
    ExpectCleanRun(r);
    EXPECT_EQ(1u, r.report.children.size()) << fn << "\n" << Ctx(r);
    EXPECT_TRUE(Has(r.proc.out, "child exited 0")) << fn << "\n" << Ctx(r);
  }
}

// The fix line of a C program, and who turned fork support on.
TEST_F(ForkEntry, CProgramFixAndForkSupportFromTheEnvironment) {
  ShimRun r = Run({"--touch-buffer"}, "warn", {"RDMAV_FORK_SAFE=1"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ExpectSaid(r, {"  fix: fork first, then open the device (create workers before "
                 "RDMA init), or start the child with posix_spawn\n",
                 "  fork support: on, turned on by RDMAV_FORK_SAFE=1 in the environment"});
  Json f = OneEvent(r, "fork");
  EXPECT_EQ("c-program", f.String("fix")) << Ctx(r);
  EXPECT_TRUE(f["fork_support"]["on"].boolean) << Ctx(r);
  EXPECT_EQ("RDMAV_FORK_SAFE=1", f["fork_support"].String("by")) << Ctx(r);
#ifdef FORKGUARD_TEST_REAL
  // rdma-core 44 on kernel 6.1 (copy-on-fork): the case where fork support only does harm.
  EXPECT_EQ(44, f["fork_support"].Int("rdma_core")) << Ctx(r);
  EXPECT_TRUE(Has(r.proc.err,
                  "; rdma-core 44 (< 51) marks every registration MADV_DONTFORK "
                  "even though this kernel copies pinned pages on fork"))
      << Ctx(r);
#endif
}

TEST_F(ForkEntry, ForkSupportNamesTheCallerOfIbvForkInit) {
  ShimRun r = Run({"--fork-safe"}, "warn");
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_TRUE(Has(r.proc.err,
                  "  fork support: on, turned on by ibv_fork_init() called from "
                  "fork_after_rdma"))
      << Ctx(r);
  std::vector<Event> fi = r.log.OfPid("fork_init", r.proc.pid);
  ASSERT_EQ(1u, fi.size()) << Ctx(r);
  EXPECT_EQ("fork_after_rdma", fi[0].json.String("caller")) << Ctx(r);
}

TEST_F(ForkEntry, ForkSupportOffSaysSo) {
  ShimRun r = Run({}, "warn");
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_TRUE(Has(r.proc.err, "  fork support: off")) << Ctx(r);
  EXPECT_FALSE(OneEvent(r, "fork")["fork_support"]["on"].boolean) << Ctx(r);
}

// What this boot's system probe cache (/run/forkguard, written by `forkguard probe --system`
// at boot) says of anonymous memory: "intact", "stale", or "" when there is none.
std::string SystemProbeAnonymous() {
  char boot[64] = {};
  FILE* b = fopen("/proc/sys/kernel/random/boot_id", "re");
  if (b == nullptr) return "";
  if (fgets(boot, sizeof(boot), b) == nullptr) boot[0] = '\0';
  fclose(b);
  boot[strcspn(boot, "\n")] = '\0';
  FILE* f = fopen((std::string("/run/forkguard/pin-probe-") + boot).c_str(), "re");
  if (f == nullptr) return "";
  std::string fate;
  char line[256];
  while (fgets(line, sizeof(line), f) != nullptr) {
    if (strncmp(line, "anonymous intact", 16) == 0) fate = "intact";
    if (strncmp(line, "anonymous stale", 15) == 0) fate = "stale";
  }
  fclose(f);
  return fate;
}

// Each registered range carries its memory kind and what the fork rule says for it
// (facts/fork_rule.h), from this boot's pin probe cache when there is one: here an empty
// user cache directory, so (unless the boot's probe ran: then from it) only what the kernel
// reports and what MAP_SHARED means are known.
TEST_F(ForkEntry, EachRangeHasItsMemoryKindAndEffect) {
  const std::string cache = "FORKGUARD_CACHE_DIR=" + std::string(getenv("TEST_TMPDIR")) + "/none";
  ShimRun a = Run({}, "warn", {cache});
  ASSERT_TRUE(a.proc.Exited(0)) << Ctx(a);
  Json f = OneEvent(a, "fork");
  ASSERT_EQ(1u, f["ranges"].array.size()) << Ctx(a);
  const Json& range = f["ranges"].array[0];
  EXPECT_EQ("anonymous", range.String("kind")) << Ctx(a);
  const std::string boot_probe = SystemProbeAnonymous();
  if (!boot_probe.empty()) {
    // The boot's probe answered: the rule takes the measurement first.
    EXPECT_EQ(boot_probe, f["pin_probe"].String("anonymous")) << Ctx(a);
    EXPECT_EQ(boot_probe == "intact" ? "nothing" : "parent-corruption", range.String("effect"))
        << Ctx(a);
    EXPECT_EQ("probe-" + boot_probe, range.String("basis")) << Ctx(a);
  } else {
    EXPECT_EQ("not-probed", f["pin_probe"].String("anonymous")) << Ctx(a);
  }
#ifdef FORKGUARD_TEST_REAL
  // The guest's 6.1 reports copy-on-fork over RDMA netlink: nothing happens to the range.
  EXPECT_EQ("nothing", range.String("effect")) << Ctx(a);
  if (boot_probe.empty()) {
    EXPECT_EQ("reported-cof", range.String("basis")) << Ctx(a);
  }
#else
  if (boot_probe.empty()) {
    // The host has no ib_core: nothing reported, nothing probed - unknown, and said why.
    EXPECT_EQ("unknown", range.String("effect")) << Ctx(a);
    EXPECT_EQ("unknown-kernel", range.String("basis")) << Ctx(a);
    EXPECT_EQ("not-probed", range.String("probe")) << Ctx(a);
    EXPECT_TRUE(Has(a.proc.err,
                    "  unknown: 1 registered range: whether the parent's data "
                    "survives the fork cannot be told here:"))
        << Ctx(a);
    EXPECT_TRUE(Has(a.proc.err, "(run `forkguard doctor` to probe)")) << Ctx(a);
  }
#endif
  EXPECT_FALSE(Has(a.proc.err, "parent-corruption")) << Ctx(a);

  ShimRun s = Run({"--memory=shared"}, "warn", {cache});
  ASSERT_TRUE(s.proc.Exited(0)) << Ctx(s);
  Json fs = OneEvent(s, "fork");
  ASSERT_EQ(1u, fs["ranges"].array.size()) << Ctx(s);
  EXPECT_EQ("shared", fs["ranges"].array[0].String("kind")) << Ctx(s);
  EXPECT_EQ("nothing", fs["ranges"].array[0].String("effect")) << Ctx(s);
  EXPECT_EQ("shared", fs["ranges"].array[0].String("basis")) << Ctx(s);

  // With fork support on the range is dc: child-segv, whatever its kind.
  ShimRun d = Run({"--memory=shared"}, "warn", {cache, "RDMAV_FORK_SAFE=1"});
  ASSERT_TRUE(d.proc.Exited(0)) << Ctx(d);
  Json fd = OneEvent(d, "fork");
  ASSERT_EQ(1u, fd["ranges"].array.size()) << Ctx(d);
  EXPECT_EQ("child-segv", fd["ranges"].array[0].String("effect")) << Ctx(d);
  EXPECT_EQ("dontfork", fd["ranges"].array[0].String("basis")) << Ctx(d);
}

#ifdef FORKGUARD_TEST_REAL
// A 2 MiB hugetlb page registered on rxe0 (the guest runs as root: it reserves the pages):
// the range's kind is hugetlb, and the guest's 6.1 (which reports copy-on-fork) keeps it.
TEST_F(ForkEntry, HugetlbRangeOnTheGuestKernel) {
  FILE* f = fopen("/proc/sys/vm/nr_hugepages", "w");
  ASSERT_NE(nullptr, f) << "the guest runs as root and can reserve hugetlb pages";
  fputs("8\n", f);
  ASSERT_EQ(0, fclose(f));
  ShimRun r = Run({"--memory=hugetlb"}, "warn");
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  Json e = OneEvent(r, "fork");
  ASSERT_EQ(1u, e["ranges"].array.size()) << Ctx(r);
  EXPECT_EQ("hugetlb", e["ranges"].array[0].String("kind")) << Ctx(r);
  EXPECT_EQ("nothing", e["ranges"].array[0].String("effect")) << Ctx(r);
  EXPECT_FALSE(Has(r.proc.err, "parent-corruption")) << Ctx(r);
  EXPECT_TRUE(Has(r.proc.out, "parent continues: buffer intact")) << Ctx(r);
}
#endif

// A raw clone syscall runs none of our code in the parent; the child is named at its
// first watched call (here execv) - and the fork itself is unchanged, error mode included.
TEST_F(ForkEntry, RawCloneChildIsNamedWhenItExecs) {
  ShimRun r = Run({"--raw-clone", "--fork-exec"}, "error");
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ASSERT_EQ(1u, r.report.children.size()) << Ctx(r);
  EXPECT_TRUE(Has(r.proc.out, "child exited 0")) << Ctx(r);
  EXPECT_TRUE(Has(r.proc.err, "forkguard: pid " + std::to_string(r.report.children[0]) +
                                  " (fork_after_rdma) was created from pid " +
                                  std::to_string(r.proc.pid) +
                                  " by a raw clone()/clone3() system call"))
      << Ctx(r);
  EXPECT_TRUE(r.log.OfPid("fork", r.proc.pid).empty()) << "no fork was seen\n" << Ctx(r);
}

#ifdef FORKGUARD_TEST_REAL
// After rdma_destroy_id + rdma_destroy_event_channel librdmacm keeps its device context:
// said to be librdmacm's, a warning in every mode (the program has nothing to release).
TEST_F(ForkEntry, LibrdmacmsOwnContextIsNamedAndNotFailedInErrorMode) {
  ShimRun r = Run({"--rdmacm-release-first"}, "error");
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_TRUE(Has(r.proc.out, "rdmacm: released")) << Ctx(r);
  EXPECT_TRUE(Has(r.proc.out, "child exited 0")) << "the fork must proceed\n" << Ctx(r);
  ExpectSaid(r, {"all of it held by librdmacm", "the program released its own",
                 "mode: error - not applied to this fork (only what librdmacm "
                 "keeps for itself is live)"});
  Json f = OneEvent(r, "fork");
  EXPECT_EQ("hazard", f.String("verdict")) << Ctx(r);
  EXPECT_EQ("proceeded", f.String("action")) << Ctx(r);
  EXPECT_EQ("librdmacm", f.String("held_by")) << Ctx(r);
  EXPECT_EQ("library-cache", f.String("fix")) << Ctx(r);
}

// UCX turns fork support on (ibv_fork_init from libuct_ib, UCX_IB_FORK_INIT=try) on a
// copy-on-fork kernel where rdma-core 44 then marks registrations DONTFORK: the fix line
// is UCX_IB_FORK_INIT=n, and the fork support line names UCX's library.
TEST_F(ForkEntry, UcxForkInitGetsTheUcxFix) {
  ShimRun r = RunUcxFork("warn");
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ASSERT_TRUE(Has(r.proc.out, "ucp_init: ok")) << Ctx(r);
  EXPECT_TRUE(Has(r.proc.out, "child killed by signal 11")) << Ctx(r);
  ExpectSaid(
      r, {"  fork support: on, turned on by ibv_fork_init() called from libuct_ib.so",
          "  fix: UCX turned fork support on (ibv_fork_init from libuct_ib", "UCX_IB_FORK_INIT=n"});
  EXPECT_EQ("ucx-fork-init", OneEvent(r, "fork").String("fix")) << Ctx(r);
  // With UCX_IB_FORK_INIT=n nothing is DONTFORK and the child lives.
  ShimRun n = RunUcxFork("warn", {"UCX_IB_FORK_INIT=n"});
  ASSERT_TRUE(n.proc.Exited(0)) << Ctx(n);
  EXPECT_TRUE(Has(n.proc.out, "child exited 0")) << Ctx(n);
  EXPECT_TRUE(Has(n.proc.err, "  fork support: off")) << Ctx(n);
}

// The same UCX program under warn, then fix: fix makes the DONTFORK registration
// MADV_DOFORK for the fork (this kernel copies anonymous memory at fork), so the child gets a
// copy holding the parent's data and lives, and its write stays out of the parent's buffer.
TEST_F(ForkEntry, UcxForkInitUnderFixModeKeepsTheChildAliveWithTheParentsData) {
  ShimRun w = RunUcxFork("warn");
  ASSERT_TRUE(w.proc.Exited(0)) << Ctx(w);
  EXPECT_TRUE(Has(w.proc.out, "child killed by signal 11")) << Ctx(w);
  EXPECT_TRUE(Has(w.proc.out, "parent buffer: intact")) << Ctx(w);

  ShimRun r = RunUcxFork("fix");
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ASSERT_TRUE(Has(r.proc.out, "ucp_init: ok")) << Ctx(r);
  EXPECT_TRUE(Has(r.proc.out, "child exited 0")) << "the child saw the parent's data\n" << Ctx(r);
  EXPECT_TRUE(Has(r.proc.out, "parent buffer: intact")) << Ctx(r);
  ExpectSaid(r, {"forkguard: fork made safe in pid " + std::to_string(r.proc.pid)});
  EXPECT_FALSE(Has(r.proc.err, "verdict: hazard")) << Ctx(r);
  Json f = OneEvent(r, "fork");
  EXPECT_EQ("fixed", f.String("action")) << Ctx(r);
  int copied = 0, other = 0;
  for (const Json& range : f["ranges"].array) {
    copied += range["fixed"].str == "copied";
    other += range["fixed"].str == "withheld" || range["fixed"].str == "failed";
  }
  EXPECT_GE(copied, 1) << Ctx(r);
  EXPECT_EQ(other, 0) << Ctx(r);
  // For the record: what each mode did to the child.
  auto child_line = [](const std::string& out) {
    size_t at = out.find("child ");
    return at == std::string::npos ? std::string("(no child line)")
                                   : out.substr(at, out.find('\n', at) - at);
  };
  printf("ucx_fork, warn: %s; fix: %s\n", child_line(w.proc.out).c_str(),
         child_line(r.proc.out).c_str());
}

// The same program with its id still alive: an ordinary hazard, failed in error mode.
TEST_F(ForkEntry, LiveRdmaCmIdIsStillFailedInErrorMode) {
  ShimRun r = Run({"--rdmacm-only"}, "error");
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_TRUE(Has(r.proc.out, "fork failed: errno=1")) << Ctx(r);
  EXPECT_FALSE(Has(r.proc.err, "all of it held by librdmacm")) << Ctx(r);
}
#endif

}  // namespace
}  // namespace forkguard::test_support
