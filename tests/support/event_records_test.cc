// Events as self-contained objects (tests/support/event_records.h), as the test harnesses
// read them.
#include "tests/support/event_records.h"

#include <string>
#include <vector>

#include "cli/json.h"
#include "cli/testdata/log_checks.h"
#include "gtest/gtest.h"

namespace forkguard::test_support {
namespace {

using cli::Frame;
using cli::Note;
using cli::Stack;
using cli::WriteJson;
using cli::testdata::kV2Process;

// Every event as one self-contained object (DecodeEventRecords): the header's fields, the
// absolute time, the short forms written out, and every stack by value, named by `symbolize`.
TEST(LogParserV2, EventRecordsCarryTheirHeaderAndStacks) {
  const std::string text =
      std::string(kV2Process) +
      R"({"event":"fork","ts":7,"seq":2,"tid":9,"verdict":"hazard","init":{"call":"ibv_open_device","stack":0},"stack":[{"ip":"0x10"}]})"
      "\n"
      R"({"event":"mr_counts","ts":8,"seq":3,"sites":[{"stack":0,"n":2,"bytes":8}],"deregs":1})"
      "\n"
      R"({"event":"fork_init","ts":9,"seq":4,"stack":3})"
      "\n";
  const std::string stack =
      R"([{"ip":"0x7f0000001234","obj":"/lib/x.so","off":"0x1234","sym":"at_4660"},)"
      R"({"ip":"0x63"},{"py":{"file":"t.py","line":3,"func":"main"}}])";
  const std::string head =
      R"({"schema":"forkguard.event/2","event":"EVENT","host":"h","pid":5,"ppid":1,"prog":"p",)"
      R"("rank":2,"local_rank":0,"job":"j","ts_ns":)";
  auto expect = [&](const std::string& event, const std::string& rest) {
    std::string h = head;
    h.replace(h.find("EVENT"), 5, event);
    return h + rest;
  };
  int symbolized = 0;
  auto symbolize = [&](Stack* s) {
    ++symbolized;
    for (Frame& f : *s)
      if (f.off) f.func = "at_" + std::to_string(*f.off);
  };
  std::vector<Note> notes;
  std::vector<EventRecord> r = DecodeEventRecords("forkguard.h.5.1.jsonl", text, symbolize, &notes);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0].line, 4);
  EXPECT_EQ(
      WriteJson(r[0].json, -1),
      expect("rdma_init", R"(1000005,"seq":0,"call":"ibv_open_device","device":"d","stack":)" +
                              stack + R"(,"tid":5})"));
  EXPECT_EQ(WriteJson(r[1].json, -1),
            expect("mr_register",
                   R"(1000006,"seq":1,"addr":4096,"len":8192,"access":1,"handle":"0x4d","stack":)" +
                       stack + R"(,"tid":5,"call":"ibv_reg_mr","dontfork":null})"));
  EXPECT_EQ(WriteJson(r[2].json, -1),
            expect("fork", R"(1000007,"seq":2,"tid":9,"verdict":"hazard",)"
                           R"("init":{"call":"ibv_open_device","stack":)" +
                               stack + R"(},"stack":[{"ip":"0x10"}]})"));
  EXPECT_EQ(WriteJson(r[3].json, -1),
            expect("mr_counts", R"(1000008,"seq":3,"sites":[{"stack":)" + stack +
                                    R"(,"n":2,"bytes":8}],"deregs":1,"tid":5})"));
  EXPECT_EQ(WriteJson(r[4].json, -1),
            expect("fork_init", R"(1000009,"seq":4,"stack":[],"tid":5})"));
  EXPECT_EQ(symbolized, 4);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].where, "forkguard.h.5.1.jsonl:8");
  EXPECT_NE(notes[0].text.find("stack id used before or without its record"), std::string::npos)
      << notes[0].text;
  // A /1 line is its own record, as it is; what the report skips is skipped with its note.
  notes.clear();
  r = DecodeEventRecords(
      "old.jsonl",
      R"({"schema":"forkguard.event/1","event":"fork","pid":3,"ts_ns":1,"stack":[{"ip":"0x1"}]})"
      "\nnot json\n",
      {}, &notes);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(
      WriteJson(r[0].json, -1),
      R"({"schema":"forkguard.event/1","event":"fork","pid":3,"ts_ns":1,"stack":[{"ip":"0x1"}]})");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].where, "old.jsonl:2");
}

}  // namespace
}  // namespace forkguard::test_support
