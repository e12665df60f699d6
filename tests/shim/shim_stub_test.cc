// Host tests of libforkguard.so against the stub libibverbs/librdmacm
// (//tests/stub_ibverbs): every path of the shim, fast, on any machine. The
// same behaviours on the real device are in shim_rdma_test.cc.
#include <signal.h>
#include <sys/stat.h>

#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/shim/shim_harness.h"
#include "tests/shim/shim_run.h"
#include "tests/support/runfiles.h"

namespace forkguard::test_support {
namespace {

constexpr char kProgram[] = "tests/shim/fork_after_rdma";
constexpr char kDlopenProgram[] = "tests/shim/fork_after_rdma_dlopen";
constexpr char kCompatMarker[] = "stub-ibverbs: IBVERBS_1.0";

ShimRun Stub(const std::vector<std::string>& args, const std::string& mode = "",
             const std::vector<std::string>& env = {}, const char* program = kProgram) {
  return RunUnderShim(program, args, mode, env, Verbs::kStub);
}

std::string Ctx(const ShimRun& r) { return r.proc.Describe(); }

// Threads of the sanitizer's runtime in a program that created threads (the "threads"
// fact counts every thread of the process): TSan starts its background thread with the
// program's first pthread_create.
#ifdef FORKGUARD_TSAN
constexpr long kRuntimeThreads = 1;
#else
constexpr long kRuntimeThreads = 0;
#endif

// The stub itself behaves like rdma-core (so the tests below mean something).
TEST(StubBaseline, ForkSafeChildReallyDiesOfSigsegv) {
  ProgramResult safe =
      RunWithoutShim(kProgram, {"--fork-safe", "--touch-buffer"}, {}, Verbs::kStub);
  EXPECT_TRUE(safe.Exited(0)) << safe.Describe();
  EXPECT_NE(std::string::npos, safe.out.find("child killed by signal 11")) << safe.Describe();
  ProgramResult env =
      RunWithoutShim(kProgram, {"--touch-buffer"}, {"RDMAV_FORK_SAFE=1"}, Verbs::kStub);
  EXPECT_NE(std::string::npos, env.out.find("child killed by signal 11")) << env.Describe();
  ProgramResult off = RunWithoutShim(kProgram, {"--touch-buffer"}, {}, Verbs::kStub);
  EXPECT_NE(std::string::npos, off.out.find("child exited 0")) << off.Describe();
  ProgramResult late = RunWithoutShim(kProgram, {"--fork-init-after"}, {}, Verbs::kStub);
  EXPECT_NE(std::string::npos, late.out.find("fork_init_after: ret=22")) << late.Describe();
  EXPECT_NE(std::string::npos, off.out.find("device: stub0")) << off.Describe();
}

// One mr_register event per user call, named after the outermost entry point,
// although ibv_reg_mr and ibv_reg_mr_iova call ibv_reg_mr_iova2 through the
// library's PLT (and so through the shim's wrapper a second time).
TEST(ShimStub, NestedRegistrationCountedOnce) {
  ShimRun r = Stub({"--reg=all", "--dereg-before-fork"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_EQ(std::string::npos, r.proc.err.find(kCompatMarker)) << Ctx(r);
  ASSERT_EQ(4u, r.report.registered.size()) << Ctx(r);
  ExpectOneRegisterLinePerCall(r);
  for (const Event& e : r.log.OfPid("mr_register", r.proc.pid)) {
    EXPECT_EQ(4096, e.json.Int("len")) << Ctx(r);
    EXPECT_FALSE(e.json["stack"].array.empty()) << Ctx(r);
  }
  // Deregistrations of tracked MRs are not logged (formats/EVENT_LOG.md, mr_deregister).
  EXPECT_EQ(0u, r.log.OfPid("mr_deregister", r.proc.pid).size()) << Ctx(r);
  ExpectCleanRun(r);  // all released before the fork
}

// The shim's wrappers forward to the default-version symbols: a forward to an
// IBVERBS_1.0 compat symbol would hit the stub's loud ENOSYS versions.
TEST(ShimStub, ReturnValuesAndErrnoUnchanged) {
  ShimRun r = Stub({"--reg=all", "--reg-invalid", "--fork-init-after"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_EQ(std::string::npos, r.proc.err.find(kCompatMarker)) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("invalid reg: mr=null errno=22")) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("fork_init_after: ret=22")) << Ctx(r);
  EXPECT_EQ(22, OneEvent(r, "fork_init").Int("result")) << Ctx(r);
  // The failed registration is not a live MR.
  EXPECT_EQ(4u, r.log.OfPid("mr_register", r.proc.pid).size()) << Ctx(r);
}

// libibverbs loaded with dlopen(RTLD_NOW|RTLD_LOCAL), called by handle: the
// program's own calls are invisible to LD_PRELOAD, but ibv_reg_mr and
// ibv_reg_mr_iova call ibv_reg_mr_iova2 through the library's PLT, which
// binds to the shim; its forwarder must still find the real function
// (dlsym(RTLD_NEXT) returns NULL for an RTLD_LOCAL library).
TEST(ShimStub, RtldLocalLibraryStillForwarded) {
  ShimRun r =
      Stub({"--dlopen-local", "--reg=all", "--reg-invalid", "--fork-safe", "--touch-buffer"}, "",
           {}, kDlopenProgram);
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_TRUE(r.report.done) << Ctx(r);
  EXPECT_EQ(std::string::npos, r.proc.err.find(kCompatMarker)) << Ctx(r);
  ASSERT_EQ(4u, r.report.registered.size()) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("invalid reg: mr=null errno=22")) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("child killed by signal 11"))
      << "fork support must still work through the shim\n"
      << Ctx(r);
  // Seen: the two nested ibv_reg_mr_iova2 calls (ibv_reg_mr, ibv_reg_mr_iova).
  std::vector<Event> regs = r.log.OfPid("mr_register", r.proc.pid);
  ASSERT_EQ(2u, regs.size()) << Ctx(r);
  std::set<uint64_t> want = {r.report.registered[0].second, r.report.registered[1].second};
  std::set<uint64_t> got;
  for (const Event& e : regs) got.insert(static_cast<uint64_t>(e.json.Int("addr")));
  EXPECT_EQ(want, got) << Ctx(r);
  ExpectWellFormedLog(r);
}

TEST(ShimStub, RdmaFirstWithoutForkSupportHasNoChildSegv) {
  ShimRun r = Stub({"--touch-buffer"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ExpectHazardWarning(r, {"inherited-rdma"}, {"child-segv"});
  EXPECT_NE(std::string::npos, r.proc.out.find("child exited 0")) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("parent continues")) << Ctx(r);
  Json init = OneEvent(r, "rdma_init");
  EXPECT_EQ("ibv_open_device", init.String("call")) << Ctx(r);
  EXPECT_EQ("stub0", init.String("device")) << Ctx(r);
  Json fork = OneEvent(r, "fork");
  EXPECT_EQ("proceeded", fork.String("action")) << Ctx(r);
  for (const char* kind : {"mrs", "contexts", "pds"}) {
    EXPECT_EQ(1, fork["live"].Int(kind)) << kind << "\n" << Ctx(r);
  }
  ASSERT_EQ(1u, r.report.children.size()) << Ctx(r);
  EXPECT_EQ(r.report.children[0], OneEvent(r, "fork_child").Int("child_pid")) << Ctx(r);
}

// Fork support turned on three ways; the child touching the buffer dies of
// SIGSEGV, explained with the registering stack; the parent continues.
class ShimStubForkSafe : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(ShimStubForkSafe, ChildSegvVerdictAndExplainedSigsegv) {
  std::vector<std::string> args = {"--touch-buffer"};
  std::vector<std::string> env;
  for (const std::string& p : GetParam()) (p.rfind("--", 0) == 0 ? args : env).push_back(p);
  ShimRun r = Stub(args, "warn", env);
  ExpectChildSegvWarned(r, {"child-segv", "inherited-rdma"});
  ASSERT_FALSE(r.report.registered.empty()) << Ctx(r);
  // The range is listed with its size in the log.
  Json fork = OneEvent(r, "fork");
  bool listed = false;
  for (const Json& range : fork["ranges"].array) {
    listed |= static_cast<uint64_t>(range.Int("addr")) == r.report.registered[0].second &&
              range.Int("len") == 4096 && range["dontfork"].boolean;
  }
  EXPECT_TRUE(listed) << "fork.ranges lacks the registered MADV_DONTFORK range\n" << Ctx(r);
}

INSTANTIATE_TEST_SUITE_P(
    Ways, ShimStubForkSafe,
    ::testing::Values(std::vector<std::string>{"--fork-safe"},
                      std::vector<std::string>{"RDMAV_FORK_SAFE=1"},
                      std::vector<std::string>{"IBV_FORK_SAFE=1"},
                      // rdma-core 44 on a copy-on-fork kernel: says UNNEEDED, still marks.
                      std::vector<std::string>{"RDMAV_FORK_SAFE=1",
                                               "FORKGUARD_STUB_FORK_STATUS=unneeded"}));

// Unrelated heap data sharing a page with a registered buffer.
TEST(ShimStub, HeapNeighborOfRegisteredBufferExplained) {
  ExpectHeapNeighborExplained(Stub({"--fork-safe", "--touch-heap-neighbor"}));
}

TEST(ShimStub, ForkFirstOrderIsCleanAndSilent) {
  ShimRun r = Stub({"--order=fork-first", "--forks=2"});
  ExpectCleanRun(r);
  EXPECT_EQ(2u, r.log.OfPid("fork", r.proc.pid).size()) << Ctx(r);
  EXPECT_EQ(1u, r.log.OfPid("rdma_init", r.proc.pid).size()) << Ctx(r);
}

TEST(ShimStub, DeregAndCloseBeforeForkIsClean) {
  ShimRun r = Stub({"--fork-safe", "--touch-buffer", "--dereg-before-fork"});
  ExpectCleanRun(r);
  std::vector<Event> forks = r.log.OfPid("fork", r.proc.pid);
  ASSERT_EQ(1u, forks.size()) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("child exited 0")) << Ctx(r);
}

TEST(ShimStub, ErrorModeFailsTheForkWithEpermAndNothingElse) {
  ShimRun r = Stub({"--fork-safe", "--touch-buffer"}, "error");
  ExpectForkFailedWithEperm(r);
  EXPECT_TRUE(ParseHazardMessage(r.proc.err).HasReason("child-segv")) << Ctx(r);
}

TEST(ShimStub, ErrorModeLetsCleanForksThrough) {
  ShimRun r = Stub({"--order=fork-first"}, "error");
  ExpectCleanRun(r);
  EXPECT_EQ(1u, r.report.children.size()) << Ctx(r);
}

TEST(ShimStub, OffModeIsSilentAndChangesNothing) {
  ShimRun r = Stub({"--fork-safe", "--touch-buffer"}, "off");
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_EQ("", r.proc.err) << Ctx(r);
  EXPECT_EQ(1u, r.report.children.size()) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("child killed by signal 11")) << Ctx(r);
  for (const Event& e : r.log.Of("fork")) EXPECT_EQ("off", e.json.String("action")) << Ctx(r);
}

TEST(ShimStub, AbortModePrintsThenAborts) {
  ShimRun r = Stub({}, "abort");
  EXPECT_TRUE(r.proc.KilledBy(SIGABRT)) << Ctx(r);
  EXPECT_TRUE(r.report.children.empty()) << Ctx(r);
  EXPECT_TRUE(ParseHazardMessage(r.proc.err).found) << Ctx(r);
  EXPECT_EQ("aborted", OneEvent(r, "fork").String("action")) << Ctx(r);
}

TEST(ShimStub, BadModeValueWarnsOnceAndDoesNotFailTheFork) {
  ShimRun r = Stub({}, "bogus");
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_EQ(1u, r.report.children.size()) << Ctx(r);
  int mentions = 0;
  size_t pos = 0;
  while ((pos = r.proc.err.find("bogus", pos)) != std::string::npos) {
    ++mentions;
    ++pos;
  }
  EXPECT_EQ(1, mentions) << "want one warning naming FORKGUARD_MODE=bogus\n" << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.err.find("FORKGUARD_MODE")) << Ctx(r);
}

TEST(ShimStub, OnceReportPerCallSite) {
  ShimRun r = Stub({"--forks=3"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_EQ(1, ParseHazardMessage(r.proc.err).count) << Ctx(r);
  std::vector<Event> forks = r.log.OfPid("fork", r.proc.pid);
  ASSERT_EQ(3u, forks.size()) << Ctx(r);
  EXPECT_TRUE(forks[0].json["reported"].boolean) << Ctx(r);
  for (size_t i = 0; i < forks.size(); ++i) {
    EXPECT_EQ("hazard", forks[i].json.String("verdict")) << Ctx(r);
    EXPECT_EQ(forks[0].json.String("site"), forks[i].json.String("site")) << Ctx(r);
    if (i > 0) {
      EXPECT_FALSE(forks[i].json["reported"].boolean) << Ctx(r);
    }
  }
  EXPECT_EQ(3u, r.report.children.size()) << Ctx(r);
}

TEST(ShimStub, PosixSpawnAfterInitIsNotAHazard) {
  ExpectSpawnIsNotAHazard(Stub({"--fork-safe", "--spawn"}), "posix_spawn");
}

TEST(ShimStub, ForkThenExecChildLoggedAsExecd) {
  ExpectForkExecLogged(Stub({"--fork-safe", "--fork-exec"}));
}

TEST(ShimStub, RdmacmOnlyProgramCaught) {
  ShimRun r = Stub({"--rdmacm-only"});
  EXPECT_EQ(1, ExpectRdmacmCaught(r, "rdmacm: addr resolved")["live"].Int("cm_channels")) << Ctx(r);
  EXPECT_EQ("rdma_create_event_channel", OneEvent(r, "rdma_init").String("call")) << Ctx(r);
}

TEST(ShimStub, VforkExecIsNotAHazard) {
#ifdef FORKGUARD_TSAN
  // TSan's vfork interceptor calls its fork interceptor ("we simply turn vfork into fork"):
  // the child is a real fork of a process with a MADV_DONTFORK registration, which the
  // shim rightly reports as a hazard. There is no vfork to check in this build.
  GTEST_SKIP() << "NOT RUN: TSan's runtime turns every vfork() into fork(); run without TSan";
#endif
  ShimRun r = Stub({"--fork-safe", "--vfork"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_EQ("", r.proc.err) << Ctx(r);
  ASSERT_EQ(1u, r.report.children.size()) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("child exited 0")) << Ctx(r);
  std::vector<Event> spawns = r.log.OfPid("spawn", r.proc.pid);
  ASSERT_EQ(1u, spawns.size()) << Ctx(r);
  EXPECT_EQ("vfork", spawns[0].json.String("call")) << Ctx(r);
  // The shim tail-jumps into the real vfork (it cannot return through its own
  // frame), so it may not know the pid: null is honest, a wrong pid is not.
  const Json& child_pid = spawns[0].json["child_pid"];
  if (!child_pid.IsNull()) {
    EXPECT_EQ(r.report.children[0], spawns[0].json.Int("child_pid")) << Ctx(r);
  }
  for (const Event& e : r.log.Of("fork")) {
    EXPECT_NE("hazard", e.json.String("verdict")) << Ctx(r);
  }
  ExpectWellFormedLog(r);
}

// Registrations from several threads at once, the threads alive at the fork.
TEST(ShimStub, ConcurrentRegistrationsAllTracked) {
  ShimRun r = Stub({"--fork-safe", "--threads=6"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ASSERT_NE(std::string::npos, r.proc.out.find("thread-registered: n=6")) << Ctx(r);
  // Six threads at one call site: one line, the rest counted (mr_counts).
  EXPECT_EQ(7, r.log.Registrations(r.proc.pid)) << Ctx(r);
  std::vector<Event> forks = r.log.OfPid("fork", r.proc.pid);
  ASSERT_EQ(1u, forks.size()) << Ctx(r);
  EXPECT_EQ(7, forks[0].json["live"].Int("mrs")) << Ctx(r);
  EXPECT_EQ(7u, forks[0].json["ranges"].array.size()) << Ctx(r);
  EXPECT_EQ(7 + kRuntimeThreads, forks[0].json.Int("threads")) << Ctx(r);
  EXPECT_EQ(0u, r.log.OfPid("mr_deregister", r.proc.pid).size()) << Ctx(r);
  ExpectWellFormedLog(r);
}

// A process that execs never runs the shim's destructor: the registrations it counted but
// had not written yet go out before the exec, so its totals are exact without an exit record.
TEST(ShimStub, CountsGoOutBeforeExec) {
  ShimRun r = Stub({"--threads=5", "--exec-at-end"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ASSERT_NE(std::string::npos, r.proc.out.find("done")) << Ctx(r);
  // The exec'd /bin/true (same pid, the shim preloaded) writes a file of its own.
  std::vector<Event> regs = r.log.OfPid("mr_register", r.proc.pid);
  ASSERT_FALSE(regs.empty()) << Ctx(r);
  for (const Event& e : r.log.OfPid("process_exit", r.proc.pid))
    EXPECT_NE(regs[0].file, e.file) << "the exec'ing image wrote process_exit\n" << Ctx(r);
  // 1 + 5 threads + 3 at the end, whose last two (and their 3 deregistrations) no line
  // written after them carries: only the flush before the exec.
  EXPECT_EQ(9, r.log.Registrations(r.proc.pid)) << Ctx(r);
  EXPECT_EQ(3, r.log.Deregs(r.proc.pid)) << Ctx(r);
  ExpectWellFormedLog(r);
}

// A program that never touches RDMA: the shim is invisible.
TEST(ShimStub, NonRdmaProgramUntouched) {
  std::string dir = MakeTempDir("forkguard-log");
  ProgramResult p =
      RunProgram({"/bin/sh", "-c", "echo hi | cat; ( echo sub ); exit 7"},
                 WithoutShimEnv({"LD_PRELOAD=" + ShimLibrary(), "FORKGUARD_LOG=" + dir}));
  EXPECT_TRUE(p.Exited(7)) << p.Describe();
  EXPECT_EQ("hi\nsub\n", p.out) << p.Describe();
  EXPECT_EQ("", p.err) << p.Describe();
  LoggedEvents log = ReadEventLog(dir);
  EXPECT_TRUE(log.problems.empty());
  for (const Event& e : log.Of("fork")) {
    EXPECT_EQ("clean", e.json.String("verdict")) << p.Describe();
  }
  EXPECT_TRUE(log.Of("rdma_init").empty());
}

// rdma_create_ep calls rdma_create_id (and its private channel) through the
// library's PLT: one user-visible id. The device context it opens inside is a resource
// of another kind: counted, and it is the first initialization, made inside the ep.
TEST(ShimStub, RdmacmCreateEpCaughtAndCountedOnce) {
  ShimRun r = Stub({"--rdmacm-ep"});
  EXPECT_EQ(1, ExpectRdmacmCaught(r, "rdmacm: ep created")["live"].Int("contexts")) << Ctx(r);
  Json init = OneEvent(r, "rdma_init");
  EXPECT_EQ("ibv_open_device", init.String("call")) << Ctx(r);
  std::vector<std::string> syms = StackSymbols(init["stack"]);
  EXPECT_NE(syms.end(), std::find(syms.begin(), syms.end(), "rdma_create_ep")) << Ctx(r);
}

// "Use of a parent's RDMA object from a child pid is flagged."
TEST(ShimStub, ChildUsingParentsPdFlagged) {
  ShimRun r = Stub({"--child-uses-parent-pd"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ASSERT_EQ(1u, r.report.children.size()) << Ctx(r);
  const std::string child = std::to_string(r.report.children[0]);
  size_t at = r.proc.err.find("forkguard: pid " + child + " ");
  ASSERT_NE(std::string::npos, at) << "no message from the child\n" << Ctx(r);
  std::string line = r.proc.err.substr(at, r.proc.err.find('\n', at) - at);
  EXPECT_NE(std::string::npos, line.find("ibv_reg_mr")) << line;
  EXPECT_NE(std::string::npos, line.find("parent")) << line;
  EXPECT_EQ(1u, r.log.OfPid("note", r.report.children[0]).size()) << Ctx(r);
  ExpectWellFormedLog(r);
}

// Another thread is inside the shim's wrappers (registering and deregistering
// in a loop) while the parent forks 20 times; every child then calls a
// wrapped function itself. No deadlock (a hung child dies of SIGALRM after
// 60 s), no lost or torn log lines, every registration logged.
TEST(ShimStub, ForkWhileAnotherThreadIsInsideTheShim) {
  ShimRun r = Stub({"--churn", "--forks=20", "--child-uses-parent-pd"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ASSERT_EQ(20u, r.report.children.size()) << Ctx(r);
  size_t exited = 0, pos = 0;
  while ((pos = r.proc.out.find("child exited 0", pos)) != std::string::npos) ++exited, ++pos;
  EXPECT_EQ(20u, exited) << Ctx(r);
  EXPECT_EQ(std::string::npos, r.proc.out.find("killed by signal")) << Ctx(r);
  long iterations = -1;
  size_t at = r.proc.out.find("churn: iterations=");
  ASSERT_NE(std::string::npos, at) << Ctx(r);
  iterations = std::stol(r.proc.out.substr(at + strlen("churn: iterations=")));
  ASSERT_GT(iterations, 0);
  // Every registration in the parent is in its log: the churn's after the first counted
  // (mr_counts), every count written once although the thread counts while the parent
  // writes its fork lines. Deregistrations of tracked MRs are counted, not lines.
  EXPECT_EQ(iterations + 1, r.log.Registrations(r.proc.pid)) << Ctx(r);
  EXPECT_LE(2u, r.log.OfPid("mr_register", r.proc.pid).size()) << Ctx(r);
  EXPECT_EQ(0u, r.log.OfPid("mr_deregister", r.proc.pid).size()) << Ctx(r);
  EXPECT_GE(r.log.Deregs(r.proc.pid), iterations) << Ctx(r);
  EXPECT_LE(r.log.Deregs(r.proc.pid), iterations + 1) << Ctx(r);
  EXPECT_EQ(20u, r.log.OfPid("fork", r.proc.pid).size()) << Ctx(r);
  for (pid_t child : r.report.children) {
    EXPECT_EQ(1u, r.log.OfPid("note", child).size()) << "child " << child << "\n" << Ctx(r);
    // A child never writes the counts its parent had pending at the fork.
    EXPECT_LE(r.log.Registrations(child), 1) << "child " << child << "\n" << Ctx(r);
    EXPECT_EQ(0u, r.log.OfPid("mr_counts", child).size()) << "child " << child << "\n" << Ctx(r);
  }
  ExpectWellFormedLog(r);
}

TEST(ShimStubConfig, AllowListedCallSiteIsNeitherPrintedNorFailed) {
  ShimRun r = Stub({"--fork-safe"}, "error", {"FORKGUARD_ALLOW=nomatch,fg_test_fork_worker"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_EQ("", r.proc.err) << Ctx(r);
  EXPECT_EQ(1u, r.report.children.size()) << "an allowed fork must not fail\n" << Ctx(r);
  Json fork = OneEvent(r, "fork");
  EXPECT_EQ("hazard", fork.String("verdict")) << Ctx(r);
  EXPECT_TRUE(fork["allowed"].boolean) << Ctx(r);
  EXPECT_EQ("proceeded", fork.String("action")) << Ctx(r);
}

// fork_after_rdma --fork-safe in error mode with FORKGUARD_SUPPRESSIONS naming a new file
// that holds `text` (its path in *path).
ShimRun StubSuppressed(const std::string& text, std::string* path = nullptr) {
  std::string file = MakeTempDir("forkguard-supp") + "/forkguard.supp";
  if (path != nullptr) *path = file;
  FILE* f = fopen(file.c_str(), "w");
  EXPECT_NE(nullptr, f);
  if (f != nullptr) {
    fputs(text.c_str(), f);
    fclose(f);
  }
  return Stub({"--fork-safe"}, "error", {"FORKGUARD_SUPPRESSIONS=" + file});
}

// FORKGUARD_SUPPRESSIONS: the fork proceeds in error mode, nothing is printed, and the event
// names the entry (the report counts it).
TEST(ShimStubConfig, SuppressedCallSiteIsNeitherWarnedNorFailedAndLogsItsEntry) {
  ShimRun r = StubSuppressed(
      "# the stub's worker\n"
      "kind=child-segv,inherited-rdma frame=func:fg_test_fork_*   # glob\n");
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_EQ("", r.proc.err) << Ctx(r);
  EXPECT_EQ(1u, r.report.children.size()) << "a suppressed fork must not fail\n" << Ctx(r);
  Json fork = OneEvent(r, "fork");
  EXPECT_EQ("hazard", fork.String("verdict")) << Ctx(r);
  EXPECT_EQ("proceeded", fork.String("action")) << Ctx(r);
  EXPECT_FALSE(fork["allowed"].boolean) << Ctx(r);
  EXPECT_EQ("kind=child-segv,inherited-rdma frame=func:fg_test_fork_*", fork.String("suppressed"))
      << Ctx(r);
}

// An entry silences a fork only when it names every reason of the verdict.
TEST(ShimStubConfig, SuppressionWithoutEveryReasonChangesNothing) {
  ShimRun r = StubSuppressed("kind=inherited-rdma frame=func:fg_test_fork_worker\n");
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_TRUE(r.report.children.empty()) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("fork failed: errno=1")) << Ctx(r);
  Json fork = OneEvent(r, "fork");
  EXPECT_EQ("failed", fork.String("action")) << Ctx(r);
  EXPECT_EQ("", fork.String("suppressed")) << Ctx(r);
}

// A bad line: one warning naming the file, the line and the valid keys, and no entry of the
// file applies (fail closed): the catch-all after it does not silence the fork, which fails
// in error mode as without a file.
TEST(ShimStubConfig, BadSuppressionLineRefusesTheWholeFileWithOneWarning) {
  std::string path;
  ShimRun r = StubSuppressed(
      "kind=child-segv frames=func:x\n"
      "kind=* frame=lib:fork_after_rdma program=fork_after_rdma\n"
      "kind=* frame=func:*\n"
      "kind=* frame=func:x rank=\n",
      &path);
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_TRUE(r.report.children.empty()) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("fork failed: errno=1")) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.err.find("forkguard: ignoring FORKGUARD_SUPPRESSIONS=" +
                                               path + " (every entry): " + path +
                                               ":1: unknown key \"frames\" (valid keys: kind="))
      << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.err.find("(and 1 more bad line); using no suppressions"))
      << Ctx(r);
  // One warning: the later bad line is counted in it, not warned about.
  size_t at = r.proc.err.find("FORKGUARD_SUPPRESSIONS");
  EXPECT_EQ(std::string::npos, r.proc.err.find("FORKGUARD_SUPPRESSIONS", r.proc.err.find('\n', at)))
      << Ctx(r);
  Json fork = OneEvent(r, "fork");
  EXPECT_EQ("failed", fork.String("action")) << Ctx(r);
  EXPECT_EQ("", fork.String("suppressed")) << Ctx(r);
}

TEST(ShimStubConfig, RelativeSuppressionPathIsRefusedWithOneWarning) {
  ShimRun r = Stub({"--fork-safe"}, "error", {"FORKGUARD_SUPPRESSIONS=fg.supp"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_NE(std::string::npos,
            r.proc.err.find("forkguard: ignoring FORKGUARD_SUPPRESSIONS=fg.supp: not an absolute "
                            "path; using no suppressions"))
      << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("fork failed: errno=1")) << Ctx(r);
}

TEST(ShimStubConfig, AllowListThatMatchesNothingChangesNothing) {
  ShimRun r = Stub({"--fork-safe"}, "error", {"FORKGUARD_ALLOW=no_such_function"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_TRUE(r.report.children.empty()) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("fork failed: errno=1")) << Ctx(r);
}

TEST(ShimStubConfig, ReportAlwaysPrintsEveryHazardousFork) {
  ShimRun r = Stub({"--forks=3"}, "", {"FORKGUARD_REPORT=always"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_EQ(3, ParseHazardMessage(r.proc.err).count) << Ctx(r);
}

TEST(ShimStubConfig, QuietPrintsNothingButStillLogs) {
  ShimRun r = Stub({"--fork-safe", "--touch-buffer"}, "", {"FORKGUARD_QUIET=1"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_EQ("", r.proc.err) << Ctx(r);
  ASSERT_EQ(1u, r.report.children.size()) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("child killed by signal 11")) << Ctx(r);
  EXPECT_EQ("hazard", OneEvent(r, "fork").String("verdict")) << Ctx(r);
  EXPECT_EQ(1u, r.log.OfPid("child_segv", r.report.children[0]).size()) << Ctx(r);
}

TEST(ShimStubConfig, SymlinkedLogDirRefusedWithOneWarning) {
  std::string real = MakeTempDir("forkguard-real-log");
  std::string link = MakeTempDir("forkguard-link") + "/log";
  ASSERT_EQ(0, symlink(real.c_str(), link.c_str()));
  ProgramResult p = RunProgram(
      {Runfile(kProgram), "--order=fork-first"},
      WithoutShimEnv(
          {"LD_PRELOAD=" + ShimLibrary(), "FORKGUARD_LOG=" + link,
           "LD_LIBRARY_PATH=" +
               Runfile("tests/stub_ibverbs/lib/libibverbs.so.1")
                   .substr(0, Runfile("tests/stub_ibverbs/lib/libibverbs.so.1").rfind('/'))}));
  EXPECT_TRUE(p.Exited(0)) << p.Describe();
  EXPECT_EQ(1, std::count(p.err.begin(), p.err.end(), '\n')) << p.Describe();
  EXPECT_NE(std::string::npos, p.err.find("FORKGUARD_LOG")) << p.Describe();
  EXPECT_TRUE(ReadEventLog(real).files.empty()) << "logged through a symlink";
}

// Rank: RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK - the first set.
class ShimStubRank : public ::testing::TestWithParam<std::pair<std::vector<std::string>, int>> {};

TEST_P(ShimStubRank, FirstSetVariableWins) {
  ShimRun r = Stub({"--order=fork-first"}, "", GetParam().first);
  ExpectCleanRun(r);
  ASSERT_FALSE(r.log.events.empty()) << Ctx(r);
  for (const Event& e : r.log.events) {
    EXPECT_EQ(GetParam().second, e.json.Int("rank")) << e.name() << Ctx(r);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variables, ShimStubRank,
    ::testing::Values(
        std::make_pair(std::vector<std::string>{"RANK=3"}, 3),
        std::make_pair(std::vector<std::string>{"OMPI_COMM_WORLD_RANK=2", "SLURM_PROCID=5"}, 2),
        std::make_pair(std::vector<std::string>{"SLURM_PROCID=5", "PMI_RANK=7"}, 5),
        std::make_pair(std::vector<std::string>{"PMI_RANK=7"}, 7)));

// Every exec* entry point marks the child of a hazardous fork as exec'd.
class ShimStubExec : public ::testing::TestWithParam<std::string> {};

TEST_P(ShimStubExec, ChildExecLogged) {
  ShimRun r = Stub({"--fork-safe", "--exec-fn=" + GetParam()});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ASSERT_EQ(1u, r.report.children.size()) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("child exited 0")) << Ctx(r);
  std::vector<Event> ex = r.log.OfPid("child_exec", r.report.children[0]);
  ASSERT_EQ(1u, ex.size()) << GetParam() << " not seen\n" << Ctx(r);
  EXPECT_FALSE(ex[0].json.String("path").empty()) << Ctx(r);
}

INSTANTIATE_TEST_SUITE_P(Functions, ShimStubExec,
                         ::testing::Values("execv", "execve", "execvp", "execvpe", "execl",
                                           "execle", "execlp", "fexecve"));

TEST(ShimStub, PosixSpawnpAfterInitIsNotAHazard) {
  ExpectSpawnIsNotAHazard(Stub({"--fork-safe", "--spawn-fn=posix_spawnp"}), "posix_spawnp");
}

// glibc's system() and popen() create their child without fork().
TEST(ShimStub, SystemAndPopenAfterInitAreSilent) {
  ShimRun r = Stub({"--fork-safe", "--system"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("system: status=0")) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("popen: status=0")) << Ctx(r);
  EXPECT_EQ("", r.proc.err) << Ctx(r);
  for (const Event& e : r.log.Of("fork")) {
    EXPECT_NE("hazard", e.json.String("verdict")) << Ctx(r);
  }
}

// MADV_DONTFORK and open descriptors that have nothing to do with RDMA: no
// verdict, no message, and the child's SIGSEGV is not "explained".
TEST(ShimStub, DontforkWithoutRdmaIsNotOurBusiness) {
  ShimRun r = Stub({"--open-uverbs=/dev/null", "--raw-dontfork", "--touch-buffer"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("child killed by signal 11")) << Ctx(r);
  EXPECT_EQ("", r.proc.err) << Ctx(r);
  for (const Event& e : r.log.Of("fork")) {
    EXPECT_EQ("clean", e.json.String("verdict")) << Ctx(r);
  }
  EXPECT_TRUE(r.log.Of("child_segv").empty()) << Ctx(r);
}

// "In error the fork fails ... and nothing else changes": the program's own
// pthread_atfork handlers must not be left half-run (a prepare that locks
// without the parent handler that unlocks would deadlock the program later).
TEST(ShimStub, ErrorModeLeavesAtforkHandlersBalanced) {
  ShimRun r = Stub({"--fork-safe", "--atfork-handlers"}, "error");
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("fork failed: errno=1")) << Ctx(r);
  size_t at = r.proc.out.find("atfork: ");
  ASSERT_NE(std::string::npos, at) << Ctx(r);
  int prepare = -1, parent = -1;
  char mutex[8] = {};
  ASSERT_EQ(3, sscanf(r.proc.out.c_str() + at, "atfork: prepare=%d parent=%d mutex=%7s", &prepare,
                      &parent, mutex))
      << Ctx(r);
  EXPECT_EQ(prepare, parent) << Ctx(r);
  EXPECT_STREQ("free", mutex) << Ctx(r);
}

TEST(ShimStub, WarnModeRunsAtforkHandlersAsUsual) {
  ShimRun r = Stub({"--fork-safe", "--atfork-handlers"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("atfork: prepare=1 parent=1 mutex=free")) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("child exited 0")) << Ctx(r);
}

// The child's SIGSEGV in a registered range is explained, then the program's
// own handler runs (chained), not the default action.
TEST(ShimStub, ChildSegvChainsToTheProgramsHandler) {
  ExpectChildSegvChained(Stub({"--fork-safe", "--touch-buffer", "--segv-handler"}));
}

// A SIGSEGV elsewhere in a child forked after RDMA init is not blamed on RDMA
// and still kills the child.
TEST(ShimStub, UnrelatedChildSegvNotBlamedOnRdma) {
  ShimRun r = Stub({"--fork-safe", "--child-null-deref"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ASSERT_EQ(1u, r.report.children.size()) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("child killed by signal 11")) << Ctx(r);
  EXPECT_EQ(std::string::npos, r.proc.err.find("inside a range registered")) << Ctx(r);
  EXPECT_TRUE(r.log.OfPid("child_segv", r.report.children[0]).empty() ||
              r.log.OfPid("child_segv", r.report.children[0])[0].json["range"].IsNull())
      << Ctx(r);
}

// FORKGUARD_MODE=fix over given machine facts: a pin-probe cache for this boot in a private
// directory (what `forkguard probe` writes), so that the fix follows what it says. What the
// device really does under fix is the fork matrix's (scripts/lanes/matrix-lane).
std::string ProbeCacheWith(const std::string& name, const std::string& anonymous_fate) {
  std::string dir = std::string(getenv("TEST_TMPDIR")) + "/probe-" + name;
  mkdir(dir.c_str(), 0700);
  char boot[64] = {};
  FILE* b = fopen("/proc/sys/kernel/random/boot_id", "re");
  EXPECT_NE(nullptr, b);
  if (b != nullptr) {
    if (fgets(boot, sizeof(boot), b) == nullptr) boot[0] = '\0';
    fclose(b);
  }
  boot[strcspn(boot, "\n")] = '\0';
  std::string path = dir + "/pin-probe-" + boot;
  FILE* f = fopen(path.c_str(), "we");
  EXPECT_NE(nullptr, f) << path;
  if (f != nullptr) {
    fprintf(f, "forkguard pin-probe 1\nkernel test\nanonymous %s\nthp %s\nhugetlb stale\n",
            anonymous_fate.c_str(), anonymous_fate.c_str());
    fclose(f);
  }
  chmod(path.c_str(), 0600);
  return "FORKGUARD_CACHE_DIR=" + dir;
}

// The run's one fork was fixed, `how` (its ranges' "fixed": "copied", "withheld") for one range
// at least.
void ExpectForkFixed(const ShimRun& r, const std::string& how) {
  Json fork = OneEvent(r, "fork");
  EXPECT_EQ("fixed", fork["action"].str) << Ctx(r);
  int ranges = 0;
  for (const Json& range : fork["ranges"].array) ranges += range["fixed"].str == how;
  EXPECT_GE(ranges, 1) << how << " " << Ctx(r);
}

// The kernel copies anonymous memory: fix makes the DONTFORK range forkable for the fork, so
// the child that touches it lives, and the parent's range is MADV_DONTFORK again after it.
TEST(ShimStubFix, CopiedRangeKeepsTheChildAliveAndIsRestoredInTheParent) {
  ShimRun warn = Stub({"--fork-safe", "--touch-buffer", "--show-dontfork"}, "warn",
                      {ProbeCacheWith("warn", "intact")});
  ASSERT_TRUE(warn.proc.Exited(0)) << Ctx(warn);
  EXPECT_NE(std::string::npos, warn.proc.out.find("child killed by signal 11")) << Ctx(warn);

  ShimRun r = Stub({"--fork-safe", "--touch-buffer", "--show-dontfork"}, "fix",
                   {ProbeCacheWith("fix", "intact")});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ExpectPrinted(r, {"child exited 0", "parent buffer dontfork: yes"});
  // One line, naming what was done and what still holds.
  ExpectSaid(r, {"forkguard: fork made safe in pid ", "made MADV_DOFORK for the fork",
                 "must not use the inherited RDMA context"});
  EXPECT_EQ(std::string::npos, r.proc.err.find("verdict: hazard")) << Ctx(r);
  ExpectForkFixed(r, "copied");
}

// The kernel does not copy it (a stale probe answer): fix withholds the range from the child
// for the fork, and gives it back to the parent after.
TEST(ShimStubFix, WithheldRangeIsGoneInTheChildAndRestoredInTheParent) {
  ShimRun r =
      Stub({"--touch-buffer", "--show-dontfork"}, "fix", {ProbeCacheWith("stale", "stale")});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  ExpectPrinted(r, {"child killed by signal 11", "parent buffer dontfork: no"});
  // The child's SIGSEGV is explained: the range was withheld from it.
  ExpectSaid(r, {"made MADV_DONTFORK for the fork", "registered for RDMA",
                 "FORKGUARD_MODE=fix made these pages MADV_DONTFORK"});
  ExpectForkFixed(r, "withheld");
}

// FORKGUARD_REPORT=always: the whole message, with fix mode's line.
TEST(ShimStubFix, ReportAlwaysGivesTheFullMessageWithTheFixLine) {
  ShimRun r = Stub({"--fork-safe", "--touch-buffer"}, "fix",
                   {ProbeCacheWith("always", "intact"), "FORKGUARD_REPORT=always"});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.err.find("verdict: hazard")) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.err.find("  mode: fix - ")) << Ctx(r);
  EXPECT_NE(std::string::npos, r.proc.out.find("child exited 0")) << Ctx(r);
}

// Nothing registered is changed by a clean fork, and spawn/vfork are left alone.
TEST(ShimStubFix, CleanForkAndSpawnAreUntouched) {
  ShimRun r = Stub({"--order=fork-first", "--fork-safe", "--touch-buffer"}, "fix",
                   {ProbeCacheWith("clean", "intact")});
  ExpectCleanRun(r);
  ShimRun s = Stub({"--fork-safe", "--spawn"}, "fix", {ProbeCacheWith("spawn", "intact")});
  ASSERT_TRUE(s.proc.Exited(0)) << Ctx(s);
  EXPECT_EQ(std::string::npos, s.proc.err.find("fork made safe")) << Ctx(s);
}

// Registrations and deregistrations on other threads while forks are fixed: the library's
// madvise calls wait for each fork's window, so every range ends as the library left it
// (the stub's own accounting checks that nothing is left DONTFORK after deregistration).
TEST(ShimStubFix, ConcurrentRegistrationsWhileForking) {
  ShimRun r = Stub(
      {"--fork-safe", "--touch-buffer", "--threads=4", "--churn", "--forks=20", "--show-dontfork"},
      "fix", {ProbeCacheWith("churn", "intact")});
  ASSERT_TRUE(r.proc.Exited(0)) << Ctx(r);
  EXPECT_EQ(std::string::npos, r.proc.out.find("child killed by signal")) << Ctx(r);
  EXPECT_EQ(std::string::npos, r.proc.out.find("parent buffer dontfork: no")) << Ctx(r);
  // Deregistered last by the library: not left MADV_DONTFORK by an undo.
  EXPECT_NE(std::string::npos, r.proc.out.find("churn page dontfork: no")) << Ctx(r);
}

}  // namespace
}  // namespace forkguard::test_support
