// The lines of a log (cli/log_lines.h): the malformed corpus in cli/testdata/corpus and
// hand-made cases give one clear "file:line: ..." note per problem, and every good line is
// still reported; nothing crashes. Schemas, bounds on numbers, the /2 module and stack tables.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cli/event_log.h"
#include "cli/testdata/log_checks.h"
#include "gtest/gtest.h"

namespace forkguard::cli {
namespace {

using testdata::CountEvents;
using testdata::FormatsOf;
using testdata::HasNote;
using testdata::ReadCorpus;

TEST(LogParser, TruncatedLastLineIsNotedGoodLinesKept) {
  LogSet l = ReadCorpus("truncated_last_line.jsonl");
  EXPECT_TRUE(HasNote(l, "truncated_last_line.jsonl:4", "truncated last line")) << l.notes.size();
  EXPECT_EQ(CountEvents(l, "fork"), 1);
  EXPECT_EQ(l.lines_used, 3);
  EXPECT_EQ(l.lines_skipped, 1);
}

TEST(LogParser, GarbageLinesAreNotedByLine) {
  LogSet l = ReadCorpus("garbage.jsonl");
  EXPECT_TRUE(HasNote(l, "garbage.jsonl:2", "not JSON"));
  EXPECT_TRUE(HasNote(l, "garbage.jsonl:4", "not JSON"));
  EXPECT_TRUE(HasNote(l, "garbage.jsonl:5", "not JSON"));
  EXPECT_TRUE(HasNote(l, "garbage.jsonl:7", "not a JSON object"));
  EXPECT_TRUE(HasNote(l, "garbage.jsonl:10", "no \"schema\" field"));
  // Notes beyond the first three of a kind are counted, not listed.
  EXPECT_FALSE(HasNote(l, "garbage.jsonl:11", ""));
  EXPECT_TRUE(HasNote(l, "garbage.jsonl", "1 more line(s): not JSON"));
  EXPECT_EQ(CountEvents(l, "fork"), 1);
  EXPECT_EQ(CountEvents(l, "rdma_init"), 1);
  EXPECT_EQ(CountEvents(l, "process_start"), 1);
}

TEST(LogParser, BinaryJunk) {
  LogSet l = ReadCorpus("binary.jsonl");
  EXPECT_TRUE(HasNote(l, "binary.jsonl:2", "binary data"));
  EXPECT_EQ(CountEvents(l, "fork"), 1);
  EXPECT_EQ(CountEvents(l, "process_start"), 1);
  EXPECT_GE(l.lines_skipped, 3);
}

TEST(LogParser, FutureSchemaMajorIsSkippedMinorIsRead) {
  LogSet l = ReadCorpus("future_schema.jsonl");
  EXPECT_TRUE(HasNote(l, "future_schema.jsonl:2", "\"forkguard.event/3\" is a major version"));
  EXPECT_TRUE(HasNote(l, "future_schema.jsonl:3", "unknown schema"));
  EXPECT_EQ(CountEvents(l, "fork"), 1);  // forkguard.event/1.7 is still major 1
}

// A file `name` of `bad_line`, then a good fork line: the bad one noted with `note`, the fork
// kept.
void ExpectBadLineNotedForkKept(const std::string& name, const std::string& bad_line,
                                const std::string& note) {
  LogSet l;
  ParseLogText(
      name, bad_line + "\n{\"schema\":\"forkguard.event/1\",\"event\":\"fork\",\"pid\":5}\n", &l);
  EXPECT_TRUE(HasNote(l, name + ":1", note));
  EXPECT_EQ(CountEvents(l, "fork"), 1);
}

TEST(LogParser, OverlongLineIsSkipped) {
  ExpectBadLineNotedForkKept(
      "big.jsonl",
      "{\"schema\":\"forkguard.event/1\",\"event\":\"note\",\"pid\":5,\"text\":\"" +
          std::string(2 << 20, 'x') + "\"}",
      "line too long");
}

TEST(LogParser, DeepNestingIsNotedOthersKept) {
  ExpectBadLineNotedForkKept("deep.jsonl", std::string(5000, '[') + std::string(5000, ']'),
                             "nesting too deep");
}

TEST(LogParser, BlankAndCrlfLines) {
  LogSet l = ReadCorpus("blank_lines.jsonl");
  EXPECT_TRUE(l.notes.empty()) << l.notes[0].where << " " << l.notes[0].text;
  EXPECT_EQ(CountEvents(l, "process_start"), 1);
}

// Bad /2 input: each problem a note, every usable line kept.
TEST(LogParserV2, BadInputIsNotedTheRestKept) {
  LogSet l = ReadCorpus("v2_bad.jsonl");
  for (const auto& n : l.notes) printf("note: %s: %s\n", n.where.c_str(), n.text.c_str());
  EXPECT_TRUE(HasNote(l, "v2_bad.jsonl:4", "stack id used before or without its record"));
  EXPECT_TRUE(HasNote(l, "v2_bad.jsonl:6", "duplicate stack id"));
  EXPECT_TRUE(HasNote(l, "v2_bad.jsonl:7", "duplicate module id"));
  EXPECT_TRUE(HasNote(l, "v2_bad.jsonl:8", "module used before or without its record"));
  EXPECT_TRUE(HasNote(l, "v2_bad.jsonl:9", "not JSON"));  // a stack record cut mid-file
  EXPECT_TRUE(HasNote(l, "v2_bad.jsonl:10", "stack id used before or without its record"));
  EXPECT_TRUE(HasNote(l, "v2_bad.jsonl:12", "stack id used before or without its record"));
  EXPECT_TRUE(HasNote(l, "v2_bad.jsonl:13", "truncated last line"));
  ASSERT_EQ(l.processes.size(), 1u);
  const ProcessLog& p = l.processes[0];
  EXPECT_EQ(p.pid, 77);
  EXPECT_EQ(p.summary.registrations, 2);
  EXPECT_EQ(CountEvents(l, "rdma_init"), 1);
  ASSERT_EQ(CountEvents(l, "fork"), 1);
  for (const Event& e : p.events) {
    if (const auto* init = e.As<RdmaInit>()) {
      EXPECT_EQ(init->stack, -1);
    }
  }
  ASSERT_EQ(p.fork_sites.size(), 1u);
  const ForkSite& f = p.fork_sites[0];
  const Stack& st = p.StackAt(f.stack);  // stack 1: its module 7 unknown, raw offsets
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[0].obj, "/nonexistent/trainer");
  EXPECT_TRUE(st[1].obj.empty());
  EXPECT_EQ(st[1].ip, 16u);
  EXPECT_EQ(f.init_stack, -1);  // stack 9 was never written
  EXPECT_EQ(f.verdict, "hazard");
}

// Each line of `refused` (its ":N" and note) skipped with that note, and the process's one good
// fork reported and its report rendered.
void ExpectRefusedAndTheGoodForkReported(
    const LogSet& l, const std::vector<std::pair<const char*, const char*>>& refused) {
  for (const auto& [line, note] : refused) EXPECT_TRUE(HasNote(l, line, note)) << line;
  ASSERT_EQ(l.processes.size(), 1u);
  EXPECT_EQ(l.processes[0].forks, 1);
  EXPECT_FALSE(FormatsOf(l).empty());
}

// Every field is hostile: numbers a kernel or a shim cannot give are refused with a note
// naming the line, and the rest of the file is reported.
TEST(HostileLog, ForkTimestampsAtTheInt64ExtremesAreRefused) {
  LogSet l;
  ParseLogText(
      "forkguard.h.7.1.jsonl",
      R"({"schema":"forkguard.event/1","event":"fork","pid":7,"ts_ns":-9223372036854775807,"verdict":"hazard"})"
      "\n"
      R"({"schema":"forkguard.event/1","event":"fork","pid":7,"ts_ns":9223372036854775807,"verdict":"hazard"})"
      "\n"
      R"({"schema":"forkguard.event/1","event":"fork","pid":7,"ts_ns":5000,"verdict":"hazard"})"
      "\n",
      &l);
  ExpectRefusedAndTheGoodForkReported(l, {{":1", "a timestamp out of range, skipped"},
                                          {":2", "a timestamp out of range, skipped"}});
}

TEST(HostileLog, V2StartPlusTsThatOverflowsIsRefused) {
  LogSet l;
  ParseLogText(
      "forkguard.h.5.1.jsonl",
      R"({"schema":"forkguard.event/2","event":"header","host":"h","pid":5,"start_ns":4611686018427387000})"
      "\n"
      R"({"event":"fork","ts":9223372036854775000,"verdict":"hazard"})"
      "\n"
      R"({"event":"fork","ts":-9223372036854775000,"verdict":"hazard"})"
      "\n"
      R"({"event":"fork","ts":7,"verdict":"hazard"})"
      "\n",
      &l);
  ExpectRefusedAndTheGoodForkReported(l, {{":2", "a timestamp out of range, skipped"},
                                          {":3", "a timestamp out of range, skipped"}});

  LogSet h;  // a header whose start is out of range: its lines are not the process's
  ParseLogText("forkguard.h.6.1.jsonl",
               R"({"schema":"forkguard.event/2","event":"header","host":"h","pid":6,"start_ns":-1})"
               "\n"
               R"({"event":"fork","ts":1,"verdict":"hazard"})"
               "\n",
               &h);
  EXPECT_TRUE(HasNote(h, ":1", "a timestamp out of range, skipped"));
  EXPECT_TRUE(h.processes.empty() || h.processes[0].forks == 0);
}

TEST(HostileLog, PidsCountsAndRanksOutOfRangeAreRefused) {
  LogSet l;
  ParseLogText(
      "forkguard.h.9.1.jsonl",
      R"({"schema":"forkguard.event/1","event":"fork","pid":9999999999,"ts_ns":1})"
      "\n"
      R"({"schema":"forkguard.event/1","event":"fork_child","pid":9,"ts_ns":2,"child_pid":-5})"
      "\n"
      R"({"schema":"forkguard.event/1","event":"fork","pid":9,"ts_ns":3,"tid":99999999999})"
      "\n"
      R"({"schema":"forkguard.event/1","event":"fork","pid":9,"ts_ns":5,"rank":9223372036854775807})"
      "\n"
      R"({"schema":"forkguard.event/1","event":"fork","pid":9,"ts_ns":6,"verdict":"clean"})"
      "\n",
      &l);
  ExpectRefusedAndTheGoodForkReported(l, {{":1", "no valid \"pid\""},
                                          {":2", "a number out of range, skipped"},
                                          {":3", "a number out of range, skipped"},
                                          {":4", "a number out of range, skipped"}});
}

}  // namespace
}  // namespace forkguard::cli
