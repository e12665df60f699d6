// The per-call-site stack cache of registrations (shim/stack/stack.h CaptureRepeatedStack): the
// first registration from a call chain is unwound by libunwind, later ones are checked on
// the live stack. Every registration's logged stack must be the one of its own chain -
// the same for every registration from one chain, different between chains (one helper
// from two callers, recursion of varying depth, frames of varying size, no frame pointer,
// another thread) - and the hazard message and the child's SIGSEGV explanation must name
// the registration that is live at the fork.
// Built twice: stack_cache_stub_test (host, stub libibverbs) and, with
// FORKGUARD_TEST_REAL, stack_cache_rdma_test (tag rdma: rxe0).
#include <map>
#include <set>
#include <sstream>
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

constexpr char kProgram[] = "tests/shim/reg_sites";

ShimRun RunRegSites(const std::vector<std::string>& env) {
#ifdef FORKGUARD_TEST_REAL
  RdmaDevice dev = RequireRdmaDevice();
  std::vector<std::string> e = env;
  e.push_back("RXE_DEV=" + dev.name);
  return RunUnderShim(kProgram, {}, "warn", e, Verbs::kReal);
#else
  return RunUnderShim(kProgram, {}, "warn", env, Verbs::kStub);
#endif
}

std::vector<std::string> Sites(const std::string& out) {
  std::vector<std::string> sites;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("site ", 0) == 0) sites.push_back(line.substr(5));
  }
  return sites;
}

TEST(StackCache, EveryRegistrationGetsTheStackOfItsOwnChain) {
  ShimRun r = RunRegSites({"RDMAV_FORK_SAFE=1"});
  ASSERT_TRUE(r.proc.Exited(0)) << r.proc.Describe();
  std::vector<std::string> sites = Sites(r.proc.out);
  ASSERT_GT(sites.size(), 50u);
  // The log has one mr_register line per stack (the first registration from it) and counts
  // the rest under that stack (mr_counts): the chains, in the order they first registered
  // (the thread runs between the main thread's rounds), are the lines in file order.
  std::vector<std::string> chains;
  std::map<std::string, int64_t> per_chain;
  for (const std::string& site : sites) {
    if (per_chain[site]++ == 0) chains.push_back(site);
  }
  std::vector<Event> regs = r.log.OfPid("mr_register", r.proc.pid);
  ASSERT_EQ(chains.size(), regs.size()) << "one line per chain\n" << r.proc.Describe();
  std::map<std::vector<uint64_t>, int64_t> per_stack = r.log.RegistrationsByStack(r.proc.pid);
  EXPECT_EQ(static_cast<int64_t>(sites.size()), r.log.Registrations(r.proc.pid));
  std::map<std::string, std::vector<uint64_t>> by_site;
  for (size_t i = 0; i < regs.size(); ++i) {
    std::vector<uint64_t> ips = StackIps(regs[i].json["stack"]);
    EXPECT_GE(ips.size(), 3u) << "chain " << chains[i];
    by_site[chains[i]] = ips;
    // Every registration from this chain was counted under this chain's stack: a cached
    // stack of another chain would count under that one (or make a line of its own).
    EXPECT_EQ(per_chain[chains[i]], per_stack[ips]) << "chain " << chains[i];
  }
  EXPECT_EQ(13u, by_site.size());
  std::set<std::vector<uint64_t>> distinct;
  for (const auto& [site, ips] : by_site) distinct.insert(ips);
  EXPECT_EQ(by_site.size(), distinct.size()) << "two chains got the same stack";
  EXPECT_EQ(per_stack.size(), distinct.size()) << "a registration counted under no chain's stack";
  // Deeper chains are longer by their extra frames (or capped).
  EXPECT_LT(by_site["r0"].size(), by_site["r3"].size());
}

TEST(StackCache, HazardAndChildSegvNameTheLiveRegistration) {
  ShimRun r = RunRegSites({"RDMAV_FORK_SAFE=1"});
  ASSERT_TRUE(r.proc.Exited(0)) << r.proc.Describe();
  HazardMessage m = ParseHazardMessage(r.proc.err);
  ASSERT_TRUE(m.found) << r.proc.Describe();
  EXPECT_NE(std::string::npos, r.proc.err.find("ibv_reg_mr by reg_sites_helper (reg_sites+0x"))
      << r.proc.Describe();
  std::vector<Event> forks = r.log.OfPid("fork", r.proc.pid);
  ASSERT_EQ(1u, forks.size()) << r.proc.Describe();
  long child = forks[0].json.Int("child_pid");
  if (child <= 0) {
    std::vector<Event> kids = r.log.OfPid("fork_child", r.proc.pid);
    ASSERT_EQ(1u, kids.size()) << r.proc.Describe();
    child = kids[0].json.Int("child_pid");
  }
  ChildSegvMessage c = FindChildSegvMessage(r.proc.err, child);
  ASSERT_TRUE(c.found) << r.proc.Describe();
  EXPECT_NE(std::string::npos, c.rest.find("reg_sites_helper")) << r.proc.Describe();
  EXPECT_NE(std::string::npos, c.rest.find("reg_sites_caller_b")) << r.proc.Describe();
}

}  // namespace
}  // namespace forkguard::test_support
