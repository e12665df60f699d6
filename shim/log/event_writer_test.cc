#include "shim/log/event_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace forkguard {
namespace {

// The fork event's shapes that a run on the stub library does not reach (a fork from a
// signal handler that interrupted forkguard; a clean fork of a child that execs), byte for
// byte after the common fields: what the decision's writers wrote before event_writer.cc.
TEST(EventWriterTest, ForkEventShapes) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/evwriter_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  EventLog& log = GlobalEventLog();
  log.Configure(dir.c_str(), LogIdentity(), nullptr, nullptr);
  ASSERT_TRUE(log.enabled());

  ForkReport clean_partial;
  clean_partial.partial = true;
  LogFork(clean_partial);

  ForkReport hazard_partial;
  hazard_partial.verdict.reasons = kInheritedRdma;
  hazard_partial.mode = Mode::kError;
  hazard_partial.partial = true;
  hazard_partial.reported = true;
  hazard_partial.partial_live.uverbs_fds = 2;
  hazard_partial.partial_live.rdma_cm_fds = 1;
  EXPECT_STREQ(ForkActionName(hazard_partial), "failed");
  LogFork(hazard_partial);

  RawStack stack;
  stack.depth = 1;
  stack.ips[0] = 0x1234;
  ForkReport clean_exec;
  clean_exec.via = ForkVia::kAtfork;
  clean_exec.fork_stack = &stack;
  clean_exec.site = 0xabc;
  clean_exec.verdict.child_execs = true;
  LogFork(clean_exec);

  std::vector<std::string> lines;
  std::string cmd = "cat " + dir + "/*.jsonl";
  FILE* p = popen(cmd.c_str(), "r");
  char line[4096];
  while (p != nullptr && fgets(line, sizeof(line), p) != nullptr) lines.push_back(line);
  if (p != nullptr) pclose(p);
  // header, fork, fork, stack, fork
  ASSERT_EQ(lines.size(), 5u);
  auto after_seq = [](const std::string& s) {
    size_t at = s.find(",\"verdict\"");
    return at == std::string::npos ? s : s.substr(at);
  };
  const std::string zero_live =
      "\"live\":{\"contexts\":0,\"pds\":0,\"mrs\":0,\"cm_channels\":0,\"cm_ids\":0,"
      "\"uverbs_fds\":0,\"rdma_cm_fds\":0}";
  EXPECT_EQ(after_seq(lines[1]),
            ",\"verdict\":\"clean\",\"reasons\":[],\"action\":\"proceeded\",\"site\":null,"
            "\"reported\":false,\"stack\":[],\"init\":null,\"ranges\":[]," +
                zero_live +
                ",\"threads\":null,\"max_map_count\":null,\"map_count\":null,"
                "\"kernel_cof\":null,\"partial\":true,\"via\":\"fork\"}\n");
  EXPECT_EQ(after_seq(lines[2]),
            ",\"verdict\":\"hazard\",\"reasons\":[\"inherited-rdma\"],\"action\":\"failed\","
            "\"errno\":1,\"site\":null,\"reported\":true,\"allowed\":false,\"stack\":[],"
            "\"init\":null,\"ranges\":[],\"live\":{\"contexts\":0,\"pds\":0,\"mrs\":0,"
            "\"cm_channels\":0,\"cm_ids\":0,\"uverbs_fds\":2,\"rdma_cm_fds\":1},"
            "\"threads\":null,\"max_map_count\":null,\"map_count\":null,\"kernel_cof\":null,"
            "\"partial\":true,\"via\":\"fork\"}\n");
  EXPECT_EQ(lines[3], "{\"event\":\"stack\",\"id\":0,\"frames\":[[-1,4660]]}\n");
  EXPECT_EQ(after_seq(lines[4]),
            ",\"verdict\":\"clean\",\"reasons\":[],\"action\":\"proceeded\",\"site\":\"0xabc\","
            "\"reported\":false,\"stack\":0,\"init\":null,\"ranges\":[]," +
                zero_live +
                ",\"threads\":null,\"max_map_count\":null,\"map_count\":null,"
                "\"kernel_cof\":null,\"via\":\"atfork\",\"child_execs\":true}\n");
}

}  // namespace
}  // namespace forkguard
