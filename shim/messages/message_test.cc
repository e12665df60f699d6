#include "shim/messages/message.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <errno.h>

#include <string>

namespace forkguard {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Exported so dladdr can name it (the test binary is linked with -rdynamic).
extern "C" __attribute__((noinline, visibility("default"))) void forkguard_test_user_frame() {
  __asm__ volatile("nop; nop; nop; nop; nop; nop; nop; nop");
}

std::string Format(ForkReport& r) {
  static char buf[65536];
  TextBuffer b(buf, sizeof(buf));
  FormatHazardMessage(b, r, true);
  return std::string(b.data(), b.size());
}

struct Fixture {
  StateSnapshot snap;
  MrRecord mr;
  bool dontfork[1] = {true};
  RawStack fork_stack;
  ForkReport r;

  Fixture() {
    InitOwnCodeRange();
    snap.counts.contexts = 1;
    snap.counts.pds = 1;
    snap.counts.mrs = 1;
    snap.counts.uverbs_fds = 1;
    strcpy(snap.devices, "rxe0");
    snap.init.set = true;
    snap.init.call = RdmaCall::kOpenDevice;
    strcpy(snap.init.device, "rxe0");
    snap.init.mono_ns = 1000000000;
    snap.init.stack.depth = 1;
    snap.init.stack.ips[0] = reinterpret_cast<uintptr_t>(&forkguard_test_user_frame) + 1;
    mr.addr = 0x7f0000000000;
    mr.len = 4u << 20;
    mr.call = RdmaCall::kRegMr;
    mr.stack = snap.init.stack;
    snap.mrs = &mr;
    snap.mr_count = 1;
    fork_stack = snap.init.stack;
    r.who.pid = 4242;
    r.who.prog = "train";
    r.who.host = "node7";
    r.who.rank = 3;
    r.verdict.reasons = kChildSegv | kInheritedRdma;
    r.verdict.dontfork_mrs = 1;
    r.snap = &snap;
    r.mr_dontfork = dontfork;
    r.fork_stack = &fork_stack;
    r.now_mono_ns = 3500000000;
    r.threads = 5;
    r.map_count = 100;
    r.max_map_count = 65530;
    r.cof.value = KernelCof::kYes;
    r.cof.source = "netlink";
  }
};

TEST(MessageTest, WarnModeContract) {
  Fixture f;
  std::string m = Format(f.r);
  EXPECT_THAT(m,
              StartsWith("forkguard: fork after RDMA init in pid 4242 (train, rank 3 on node7)\n"));
  EXPECT_THAT(m, HasSubstr("\n  verdict: hazard (child-segv, inherited-rdma)\n"));
  EXPECT_THAT(
      m, HasSubstr("\n  child-segv: 1 range(s) registered for RDMA are MADV_DONTFORK; the child "
                   "is killed by SIGSEGV if it touches them:\n"
                   "    0x7f0000000000-0x7f0000400000 (4.0 MiB) ibv_reg_mr by "
                   "forkguard_test_user_frame ("));
  EXPECT_THAT(
      m, HasSubstr("\n  inherited-rdma: the child inherits 1 device context (rxe0), 1 PD, 1 MR, "
                   "0 rdma_cm channel(s)/id(s)"));
  EXPECT_THAT(m, HasSubstr("\n  RDMA first initialized 2.5 s ago: ibv_open_device(rxe0) at:\n"
                           "    #0 forkguard_test_user_frame+0x1 ("));
  EXPECT_THAT(m, HasSubstr("\n  fork called at:\n    #0 forkguard_test_user_frame"));
  EXPECT_THAT(
      m, HasSubstr("\n  fix: fork first, then open the device (create workers before RDMA init), "
                   "or start the child with posix_spawn\n"));
  EXPECT_THAT(
      m, HasSubstr("\n  mode: warn - the fork proceeds (FORKGUARD_MODE=error makes it fail with "
                   "EPERM)\n"));
  EXPECT_THAT(m, Not(HasSubstr("parent-corruption")));
  EXPECT_EQ(m.back(), '\n');
}

TEST(MessageTest, ErrorAndAbortModes) {
  Fixture f;
  f.r.mode = Mode::kError;
  EXPECT_THAT(Format(f.r),
              HasSubstr("\n  mode: error - the fork fails with EPERM; no child was created\n"));
  f.r.mode = Mode::kAbort;
  EXPECT_THAT(Format(f.r), HasSubstr("\n  mode: abort - aborting for a core dump\n"));
}

TEST(MessageTest, ParentCorruptionAndNoRank) {
  Fixture f;
  f.r.who.rank = -1;
  f.r.verdict.reasons = kParentCorruption | kInheritedRdma;
  f.r.verdict.dontfork_mrs = 0;
  f.r.verdict.corruptible_mrs = 1;
  f.r.cof.value = KernelCof::kUnknown;
  f.r.cof.source = "unknown";
  int huge = static_cast<int>(facts::MemoryKind::kHugetlb);
  f.r.machine.probe.fate[huge] = facts::PinFate::kStale;
  f.r.machine.probe.why[huge] = facts::ProbeWhy::kNone;
  MrFate fate;
  fate.kind = facts::MemoryKind::kHugetlb;
  fate.verdict = facts::DecideRange(f.r.machine, {fate.kind, facts::Tri::kNo});
  f.r.mr_fate = &fate;
  std::string m = Format(f.r);
  EXPECT_THAT(m, HasSubstr("(train on node7)"));
  EXPECT_THAT(m, HasSubstr("verdict: hazard (parent-corruption, inherited-rdma)"));
  EXPECT_THAT(m, HasSubstr("\n  parent-corruption: 1 registered range is not protected"));
  EXPECT_THAT(m, HasSubstr("\n    0x7f0000000000-0x7f0000400000 (4.0 MiB, hugetlb) ibv_reg_mr by "
                           "forkguard_test_user_frame ("));
  EXPECT_THAT(m, HasSubstr("): measured: this kernel does not copy pinned hugetlb pages at fork "
                           "(io_uring probe)\n"));
  EXPECT_THAT(
      m, HasSubstr("kernel copy-on-fork for pinned pages: not reported (unknown); pinned pages "
                   "at fork (io_uring probe): hugetlb stale\n"));
  EXPECT_THAT(m, Not(HasSubstr("child-segv:")));
}

// No report and no probe: the range is "unknown", with the reason, and no reason is claimed.
TEST(MessageTest, UnknownRangesSayWhy) {
  Fixture f;
  f.r.verdict.reasons = kInheritedRdma;
  f.r.verdict.dontfork_mrs = 0;
  f.r.verdict.unknown_mrs = 1;
  f.r.cof.value = KernelCof::kUnknown;
  f.r.cof.source = "unknown";
  MrFate fate;
  fate.kind = facts::MemoryKind::kAnonymous;
  fate.verdict = facts::DecideRange(f.r.machine, {fate.kind, facts::Tri::kNo});
  f.r.mr_fate = &fate;
  std::string m = Format(f.r);
  EXPECT_THAT(m,
              HasSubstr("\n  unknown: 1 registered range: whether the parent's data survives the "
                        "fork cannot be told here:\n    0x7f0000000000-0x7f0000400000 (4.0 MiB, "
                        "anonymous) ibv_reg_mr by "));
  EXPECT_THAT(m, HasSubstr("no probe result for this boot (run `forkguard doctor` to probe)\n"));
  EXPECT_THAT(m, HasSubstr("pinned pages at fork (io_uring probe): not probed this boot"));
  EXPECT_THAT(m, Not(HasSubstr("parent-corruption")));
}

// The rdma-core x kernel x who-turned-it-on case, in one line.
TEST(MessageTest, ForkSupportLine) {
  auto line = [](const ForkSupportFact& f, KernelCof cof, const ForkVerdict* v = nullptr) {
    char buf[1024];
    TextBuffer b(buf, sizeof(buf));
    facts::MachineFacts m;
    m.reported_cof = cof;
    m.rdma_core = f.rdma_core;
    m.fork_support = !f.on              ? facts::ForkSupportBy::kOff
                     : f.env != nullptr ? facts::ForkSupportBy::kEnvironment
                                        : facts::ForkSupportBy::kForkInit;
    FormatForkSupportLine(b, f, m, v);
    return std::string(b.data(), b.size());
  };
  ForkSupportFact f;
  f.rdma_core = 44;
  EXPECT_EQ(
      "  fork support: off (no ibv_fork_init, RDMAV_FORK_SAFE/IBV_FORK_SAFE unset); "
      "rdma-core 44\n",
      line(f, KernelCof::kYes));
  f.on = true;
  f.env = "RDMAV_FORK_SAFE=1";
  std::string s = line(f, KernelCof::kYes);
  EXPECT_THAT(
      s, HasSubstr("turned on by RDMAV_FORK_SAFE=1 in the environment; rdma-core 44 (< 51) marks "
                   "every registration MADV_DONTFORK even though this kernel copies pinned pages"));
  f.env = nullptr;
  f.caller = "libuct_ib.so.0";
  f.rdma_core = 51;
  s = line(f, KernelCof::kYes);
  EXPECT_THAT(
      s, HasSubstr("ibv_fork_init() called from libuct_ib.so.0; rdma-core 51 (>= 51): fork support "
                   "does nothing"));
  // rdma-core 56 on 5.10 (nothing reported): it marks; whether that was needed is per range.
  f.rdma_core = 56;
  s = line(f, KernelCof::kUnknown);
  EXPECT_THAT(s,
              HasSubstr("rdma-core 56: the kernel does not report copy-on-fork, so rdma-core marks "
                        "every registration MADV_DONTFORK\n"));
  ForkVerdict v;
  v.dontfork_mrs = 1;
  v.dontfork_needless = true;
  s = line(f, KernelCof::kUnknown, &v);
  EXPECT_THAT(
      s, HasSubstr("; measured: this kernel copies the registered ranges' pinned pages at fork, "
                   "so fork support is not needed for them and kills children that touch them"));
  // An unknown rdma-core on a reporting kernel: not known whether it marks.
  f.rdma_core = -1;
  s = line(f, KernelCof::kYes);
  EXPECT_THAT(
      s, HasSubstr("whether it marks registrations MADV_DONTFORK on this copy-on-fork kernel is "
                   "not known"));
}

TEST(MessageTest, ForkAlikesFailWithAnErrnoTheirManPageAllows) {
  EXPECT_EQ(EPERM, FailErrno(ForkVia::kFork));
  EXPECT_EQ(EPERM, FailErrno(ForkVia::kDaemon));  // daemon(3): errors of fork(2) and setsid(2)
  EXPECT_EQ(ENOMEM, FailErrno(ForkVia::kUnderscoreFork));
  EXPECT_EQ(ENOMEM, FailErrno(ForkVia::kForkpty));
  EXPECT_STREQ("_Fork", ForkViaName(ForkVia::kUnderscoreFork));
}

// The one-line notices, each byte for byte (users and tests grep for these phrases).
template <typename F>
std::string Said(F format) {
  static char buf[4096];
  TextBuffer b(buf, sizeof(buf));
  format(b);
  return std::string(b.data(), b.size());
}

TEST(MessageTest, PartialHazardLine) {
  ProcessIdentity who;
  who.pid = 42;
  who.prog = "trainer";
  who.host = "node1";
  who.rank = 3;
  EXPECT_EQ(Said([&](TextBuffer& b) { FormatPartialHazardLine(b, who, Mode::kError, "failed"); }),
            "forkguard: fork after RDMA init in pid 42 (trainer, rank 3 on node1): verdict: "
            "hazard (inherited-rdma); forked from a signal handler that interrupted forkguard, "
            "so no details; mode: error - failed\n");
  who.rank = -1;  // no rank: none shown
  EXPECT_EQ(Said([&](TextBuffer& b) { FormatPartialHazardLine(b, who, Mode::kWarn, "warned"); }),
            "forkguard: fork after RDMA init in pid 42 (trainer on node1): verdict: hazard "
            "(inherited-rdma); forked from a signal handler that interrupted forkguard, so no "
            "details; mode: warn - warned\n");
}

TEST(MessageTest, RawCloneChild) {
  EXPECT_EQ(Said([](TextBuffer& b) { FormatRawCloneChild(b, 7, "go-app", 5, true); }),
            "forkguard: pid 7 (go-app) was created from pid 5 by a raw clone()/clone3() system "
            "call (no fork(), no atfork handlers), after RDMA init there: forkguard could not "
            "decide or stop it. It inherited the parent's descriptors (including "
            "/dev/infiniband) and, if fork support was on, none of the MADV_DONTFORK pages the "
            "parent registered: a SIGSEGV in them is not explained in this process\n");
  EXPECT_EQ(Said([](TextBuffer& b) { FormatRawCloneChild(b, 7, "go-app", 5, false); }),
            "forkguard: pid 7 (go-app) was created from pid 5 by a raw clone()/clone3() system "
            "call (no fork(), no atfork handlers), after RDMA init there: forkguard could not "
            "decide or stop it. It inherited the parent's descriptors (including "
            "/dev/infiniband) and, since the parent had released its RDMA resources, nothing "
            "else\n");
}

TEST(MessageTest, InheritedUse) {
  EXPECT_EQ(Said([](TextBuffer& b) { FormatInheritedUse(b, 9, "worker", "ibv_alloc_pd", 8); }),
            "forkguard: pid 9 (worker) calls ibv_alloc_pd on an RDMA object its parent (pid 8) "
            "created before fork; RDMA objects are not usable in a forked child");
}

TEST(MessageTest, LockGaveUp) {
  EXPECT_EQ(Said([](TextBuffer& b) { FormatLockGaveUp(b, 10, 1234, 1200); }),
            "forkguard: internal lock held for over 10 s by thread 1234 in pid 1200: not waiting "
            "any longer; RDMA records may be missing and forks may get partial verdicts from now "
            "on (a forkguard bug: please report it)");
}

TEST(MessageTest, SuppressionsIgnored) {
  EXPECT_EQ(Said([](TextBuffer& b) {
              FormatSuppressionsRefused(b, "/etc/fg.supp", 4, "unknown kind \"x\"", 1);
            }),
            "forkguard: ignoring FORKGUARD_SUPPRESSIONS=/etc/fg.supp (every entry): "
            "/etc/fg.supp:4: unknown kind \"x\"; using no suppressions");
  EXPECT_EQ(Said([](TextBuffer& b) {
              FormatSuppressionsRefused(b, "/etc/fg.supp", 2, "unknown key \"y\"", 3);
            }),
            "forkguard: ignoring FORKGUARD_SUPPRESSIONS=/etc/fg.supp (every entry): "
            "/etc/fg.supp:2: unknown key \"y\" (and 2 more bad lines); using no suppressions");
  EXPECT_EQ(Said([](TextBuffer& b) {
              FormatSuppressionsIgnored(b, "/etc/fg.supp", "cannot open it",
                                        "No such file or directory");
            }),
            "forkguard: ignoring FORKGUARD_SUPPRESSIONS=/etc/fg.supp: cannot open it (No such "
            "file or directory); using no suppressions");
  EXPECT_EQ(Said([](TextBuffer& b) {
              FormatSuppressionsIgnored(b, "/etc/fg.supp", "larger than 1 MiB", nullptr);
            }),
            "forkguard: ignoring FORKGUARD_SUPPRESSIONS=/etc/fg.supp: larger than 1 MiB; using "
            "no suppressions");
}

TEST(MessageTest, IgnoredVariable) {
  EXPECT_EQ(Said([](TextBuffer& b) {
              FormatIgnoredVariable(b, "FORKGUARD_LOG", "rel/dir", "not an absolute path",
                                    "no event log");
            }),
            "forkguard: ignoring FORKGUARD_LOG=rel/dir: not an absolute path; using no event log");
  // The value as a warning shows it: a control character is '?'.
  EXPECT_EQ(Said([](TextBuffer& b) {
              FormatIgnoredVariable(b, "FORKGUARD_MODE", "w\narn", "expected warn", "warn");
            }),
            "forkguard: ignoring FORKGUARD_MODE=w?arn: expected warn; using warn");
}

TEST(MessageTest, EventLogFailed) {
  EXPECT_EQ(Said([](TextBuffer& b) {
              FormatEventLogFailed(b, "write", "/logs/job", "No space left on device", 28, 77);
            }),
            "forkguard: event log: cannot write in /logs/job: No space left on device; no more "
            "events are logged by pid 77");
  EXPECT_EQ(
      Said([](TextBuffer& b) { FormatEventLogFailed(b, "write", "/logs/job", nullptr, 999, 77); }),
      "forkguard: event log: cannot write in /logs/job: errno 999; no more events are logged by "
      "pid 77");
}

TEST(MessageTest, ChildSegv) {
  ChildSegvRange r{0x1000, 0x3000, 0x1000, 0x3000, "ibv_reg_mr", "    #0 f (a+0x1)\n", 0, nullptr};
  char buf[512];
  size_t n = FormatChildSegv(buf, sizeof(buf), 77, 0x2000, r);
  EXPECT_EQ(std::string(buf, n),
            "forkguard: child 77 SIGSEGV at 0x2000: inside a range registered for RDMA by the "
            "parent (0x1000-0x3000, 8.0 KiB) registered by ibv_reg_mr at:\n    #0 f (a+0x1)\n");
  n = FormatChildSegv(buf, sizeof(buf), 77, 0x3000, r);
  EXPECT_EQ(std::string(buf, n).substr(0, 70),
            "forkguard: child 77 SIGSEGV at 0x3000: in a page shared with a range r");
  EXPECT_STREQ(ChildSegvTail(),
               "forkguard: the parent's fork support (ibv_fork_init/RDMAV_FORK_SAFE) marked these "
               "pages MADV_DONTFORK, so they do not exist in this child\n");
}

}  // namespace
}  // namespace forkguard
