// The test helpers themselves: a wrong JSON reader or message parser would
// make the shim tests pass or fail for the wrong reason.
#include "tests/shim/shim_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>

#include "gtest/gtest.h"
#include "tests/shim/shim_run.h"
#include "tests/support/runfiles.h"

namespace forkguard::test_support {
namespace {

TEST(Json, ParsesEventLine) {
  Json j;
  std::string err;
  ASSERT_TRUE(ParseJson(
      R"({"schema":"forkguard.event/1","event":"fork","pid":12,"rank":null,"ok":true,)"
      R"("addr":140737488347136,"reasons":["child-segv","inherited-rdma"],)"
      R"("init":{"call":"ibv_open_device","stack":[{"ip":"0x7f01","sym":"fg_test_init_rdma"}]},)"
      R"("s":"a\"b\\c\n\u00e9","f":-1.5e3})",
      &j, &err))
      << err;
  EXPECT_EQ("fork", j.String("event"));
  EXPECT_EQ(12, j.Int("pid"));
  EXPECT_TRUE(j["rank"].IsNull());
  EXPECT_TRUE(j.Has("rank"));
  EXPECT_FALSE(j.Has("nope"));
  EXPECT_TRUE(j["ok"].boolean);
  EXPECT_EQ(140737488347136, j.Int("addr"));
  ASSERT_EQ(2u, j["reasons"].array.size());
  EXPECT_EQ("inherited-rdma", j["reasons"].array[1].str);
  EXPECT_EQ("a\"b\\c\n\xc3\xa9", j.String("s"));
  EXPECT_EQ(-1500.0, j["f"].number);
  EXPECT_FALSE(j["f"].is_int);
  EXPECT_EQ(std::vector<uint64_t>{0x7f01}, StackIps(j["init"]["stack"]));
  EXPECT_EQ(std::vector<std::string>{"fg_test_init_rdma"}, StackSymbols(j["init"]["stack"]));
}

TEST(Json, RejectsBrokenText) {
  Json j;
  std::string err;
  for (const char* bad :
       {"{", R"({"a":})", R"({"a":1,})", R"({"a":"x)", "[1 2]", R"({"a":1}x)", "tru", ""}) {
    EXPECT_FALSE(ParseJson(bad, &j, &err)) << bad;
  }
}

TEST(EventLogReader, ToleratesOnlyATruncatedLastLine) {
  std::string dir = MakeTempDir("harness");
  {
    std::ofstream f(dir + "/forkguard.h.1.2.jsonl");
    f << R"({"schema":"forkguard.event/2","event":"header","host":"h","pid":1,"start_ns":2})"
         "\n"
         R"({"event":"a","seq":0})"
         "\n"
         R"({"event":"b","seq":1})"
         "\n"
         R"({"event":"c","se)";
  }
  LoggedEvents ok = ReadEventLog(dir);
  EXPECT_TRUE(ok.problems.empty());
  ASSERT_EQ(2u, ok.events.size());
  EXPECT_EQ("b", ok.events[1].name());
  {
    std::ofstream f(dir + "/forkguard.h.3.4.jsonl");
    f << R"({"schema":"forkguard.event/2","event":"header","host":"h","pid":3,"start_ns":4})"
         "\n"
         R"({"event":"a"})"
         "\n"
         "garbage\n"
         R"({"event":"z"})"
         "\n";
  }
  LoggedEvents bad = ReadEventLog(dir);
  EXPECT_EQ(1u, bad.problems.size());
  EXPECT_EQ(4u, bad.events.size());
}

TEST(HazardMessageParser, CutsTheContractMessage) {
  const std::string err =
      "forkguard: fork after RDMA init in pid 4242 (prog on host)\n"
      "  verdict: hazard (child-segv, inherited-rdma)\n"
      "  child-segv: 1 range registered\n"
      "  inherited-rdma: 1 context\n"
      "  RDMA first initialized 3 ms ago on rxe0 by ibv_open_device at:\n"
      "    #0 fg_test_init_rdma+0x12\n"
      "  fork called at:\n"
      "    #0 fg_test_fork_worker+0x20\n"
      "  fix: create loader workers before RDMA init\n"
      "forkguard: child 4243 SIGSEGV at 0x7f00: inside a range registered for RDMA by the "
      "parent\n"
      "  registered at: #0 fg_test_register_buffers\n";
  HazardMessage m = ParseHazardMessage(err);
  EXPECT_TRUE(m.found);
  EXPECT_EQ(1, m.count);
  EXPECT_EQ(4242, m.pid);
  EXPECT_EQ((std::vector<std::string>{"child-segv", "inherited-rdma"}), m.reasons);
  EXPECT_EQ(2u, m.reason_lines.size());
  EXPECT_NE(std::string::npos, m.init_section.find("fg_test_init_rdma"));
  EXPECT_EQ(std::string::npos, m.init_section.find("fg_test_fork_worker"));
  EXPECT_NE(std::string::npos, m.fork_section.find("fg_test_fork_worker"));
  EXPECT_EQ(std::string::npos, m.fork_section.find("fix"));
  EXPECT_TRUE(m.has_fix);
  EXPECT_FALSE(m.has_error_mode_line);
  ChildSegvMessage c = FindChildSegvMessage(err, 4243);
  EXPECT_TRUE(c.found);
  EXPECT_EQ(0x7f00u, c.addr);
  EXPECT_NE(std::string::npos, c.rest.find("fg_test_register_buffers"));
  EXPECT_FALSE(FindChildSegvMessage(err, 4244).found);
  EXPECT_FALSE(ParseHazardMessage("forkguard: ignoring FORKGUARD_MODE=x\n").found);
}

TEST(ProgramReportParser, ReadsTheProgramsLines) {
  ProgramReport r = ParseReport(
      "device: rxe0\nregistered: call=ibv_reg_mr addr=0x55d0 len=4096\n"
      "heap-neighbor: addr=0x55cf\nfork: child=77\nchild exited 0\nspawn: child=78\ndone\n");
  EXPECT_EQ((std::vector<pid_t>{77, 78}), r.children);
  ASSERT_EQ(1u, r.registered.size());
  EXPECT_EQ("ibv_reg_mr", r.registered[0].first);
  EXPECT_EQ(0x55d0u, r.registered[0].second);
  EXPECT_EQ(0x55cfu, r.heap_neighbor);
  EXPECT_TRUE(r.done);
}

}  // namespace
}  // namespace forkguard::test_support
