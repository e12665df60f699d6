// Real-device test (tag "rdma") of the main job: `refloader demo` streams the
// loader's batches over RDMA to a second process and verifies every byte; with
// --init-rdma-first (RDMA + fork support before the workers are forked) the
// workers lose the registered slot region and die of SIGSEGV, and the demo
// fails saying so; under the shim's fix mode the same wrong order works.
#include <stdio.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/audit/log_lines.h"
#include "tests/support/rdma_device.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Runs refloader with `args` and `env` added; returns {exit status, stdout and stderr in
// one stream}. Started with posix_spawn: this process never opens RDMA.
std::pair<int, std::string> Refloader(std::vector<std::string> args,
                                      std::vector<std::string> env = {}) {
  args.insert(args.begin(), forkguard::test_support::Runfile("refloader/refloader"));
  forkguard::test_support::RunOptions opt;
  opt.env = std::move(env);
  opt.stderr_to_stdout = true;
  forkguard::test_support::ProgramResult r = forkguard::test_support::RunProgram(args, opt);
  return {r.status, r.out};
}

TEST(RefloaderDemo, RightOrderDeliversEveryBatchVerified) {
  auto dev = forkguard::test_support::RequireRdmaDevice();
  auto [rc, out] = Refloader({"demo", "--ip", dev.ip, "--port", "7801", "--epochs", "3"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_THAT(out, HasSubstr("before any RDMA init"));
  EXPECT_THAT(out, HasSubstr("consume: received 192 batches (3 epochs)"));
  EXPECT_THAT(
      out, HasSubstr("CRC32C verified on 192/192 batches, record order checked on 6144 samples"));
  EXPECT_THAT(out, HasSubstr("OK: every batch arrived in order and verified"));
}

TEST(RefloaderDemo, InitRdmaFirstKillsTheWorkersAndSaysWhy) {
  auto dev = forkguard::test_support::RequireRdmaDevice();
  auto [rc, out] = Refloader({"demo", "--ip", dev.ip, "--port", "7802", "--init-rdma-first"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_THAT(out, HasSubstr("AFTER RDMA init"));
  EXPECT_THAT(out, HasSubstr("was killed by signal 11 (SIGSEGV)"));
  EXPECT_THAT(out, HasSubstr("Registered memory is MADV_DONTFORK"));
  EXPECT_THAT(out, HasSubstr("no batch was received"));
  // The default --fork-check warn: one line before the fork, then the fork.
  EXPECT_THAT(out,
              HasSubstr("loader: fork check: forking 2 loader worker(s) now would be a hazard"));
}

// The same wrong order under the shim in fix mode: the slot region (shared memory that
// ibv_fork_init made MADV_DONTFORK) is MADV_DOFORK for each worker's fork and DONTFORK again
// in serve right after, so the workers share the slots and live, and serve, which accepts
// its consumer only after the forks, streams every batch over the same registration.
TEST(RefloaderDemo, InitRdmaFirstUnderFixModeDeliversEveryBatchVerified) {
  auto dev = forkguard::test_support::RequireRdmaDevice();
  std::string log_dir = forkguard::test_support::MakeTempDir("fglog");
  auto [rc, out] =
      Refloader({"demo", "--ip", dev.ip, "--port", "7805", "--init-rdma-first", "--epochs", "3"},
                {"LD_PRELOAD=" + forkguard::test_support::Runfile("shim/libforkguard.so"),
                 "FORKGUARD_MODE=fix", "FORKGUARD_LOG=" + log_dir, "FORKGUARD_REPORT="});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_THAT(out, HasSubstr("2 worker(s) forked"));
  EXPECT_THAT(out, HasSubstr("AFTER RDMA init"));
  EXPECT_THAT(out, HasSubstr("forkguard: fork made safe in pid "));
  EXPECT_THAT(out, Not(HasSubstr("killed by signal")));
  EXPECT_THAT(out, Not(HasSubstr("verdict: hazard")));
  EXPECT_THAT(out, HasSubstr("serve: sent 192 batches (3 epochs)"));
  EXPECT_THAT(out, HasSubstr("consume: received 192 batches (3 epochs)"));
  EXPECT_THAT(
      out, HasSubstr("CRC32C verified on 192/192 batches, record order checked on 6144 samples"));
  EXPECT_THAT(out, HasSubstr("OK: every batch arrived in order and verified"));
  // Each worker's fork was fixed: the registered slots (and the transport's own buffers)
  // copied - shared, for the slots - and nothing withheld.
  std::vector<std::string> log = forkguard::test_support::ReadLogLines(log_dir);
  auto fixed =
      forkguard::test_support::LinesWith(log, {"\"event\":\"fork\"", "\"action\":\"fixed\""});
  EXPECT_EQ(fixed.size(), 2u) << ::testing::PrintToString(log);
  for (const std::string& f : fixed) {
    EXPECT_THAT(f, HasSubstr("\"fixed\":\"copied\""));
    EXPECT_THAT(f, Not(HasSubstr("\"fixed\":\"withheld\"")));
  }
  printf("refloader --init-rdma-first, fix: %zu fixed forks, %s\n", fixed.size(),
         out.find("CRC32C verified on 192/192") != std::string::npos ? "192/192 batches verified"
                                                                     : "NOT all batches verified");
}

// --fork-check error under the shim: the loader refuses at start, naming where RDMA was first
// initialized (the shim's answer), and forks nothing.
TEST(RefloaderDemo, ForkCheckErrorNamesTheInitSiteAndForksNothing) {
  auto dev = forkguard::test_support::RequireRdmaDevice();
  auto [rc, out] = Refloader(
      {"demo", "--ip", dev.ip, "--port", "7803", "--init-rdma-first", "--fork-check", "error"},
      {"LD_PRELOAD=" + forkguard::test_support::Runfile("shim/libforkguard.so")});
  EXPECT_EQ(rc, 1) << out;
  // (the transport's first call is rdma_create_event_channel, in refloader's own code)
  size_t at = out.find(
      "serve: starting the loader's workers failed: fork check: forking 2 loader worker(s) now "
      "would be a hazard (child-segv, inherited-rdma): RDMA was first initialized by ");
  ASSERT_NE(at, std::string::npos) << out;
  std::string site = out.substr(at, out.find('\n', at) - at);
  EXPECT_THAT(site, HasSubstr(" at "));
  EXPECT_THAT(site, HasSubstr("(refloader+0x"));
  EXPECT_THAT(out, Not(HasSubstr("killed by signal 11")));
  EXPECT_THAT(out, Not(HasSubstr("forkguard: fork after RDMA init")));  // no fork
}

// Without the shim the check still stops the loader, from /proc and RDMA netlink, and says
// that it cannot name the site.
TEST(RefloaderDemo, ForkCheckErrorWithoutTheShim) {
  auto dev = forkguard::test_support::RequireRdmaDevice();
  auto [rc, out] = Refloader(
      {"demo", "--ip", dev.ip, "--port", "7804", "--init-rdma-first", "--fork-check", "error"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_THAT(out, HasSubstr("fork check: forking 2 loader worker(s) now would be a hazard ("));
  EXPECT_THAT(out, HasSubstr("no shim: from /proc and RDMA netlink"));
  EXPECT_THAT(out, Not(HasSubstr("killed by signal 11")));
}

}  // namespace
