// One event's fields (cli/event_decode.h): mistyped and hostile values read as absent, the
// line kept; fix mode's `fixed` ranges, every value hostile.
#include <string>
#include <vector>

#include "cli/event_decode.h"
#include "cli/event_log.h"
#include "cli/format.h"
#include "cli/job_report.h"
#include "cli/json.h"
#include "cli/report_json.h"
#include "cli/report_markdown.h"
#include "cli/report_text.h"
#include "cli/testdata/log_checks.h"
#include "gtest/gtest.h"

namespace forkguard::cli {
namespace {

using testdata::Corpus;
using testdata::CountEvents;
using testdata::FormatsOf;
using testdata::HasNote;

// Stacks by index 40, 41, ... in the order the decoder asks for them.
struct CountingStacks final : StackIndexer {
  int next = 40;
  int Index(simdjson::dom::element /*v*/) override { return next++; }
};

// `line` decoded as the reader decodes an event of its type (its record; a fork's into *fork).
Event Decoded(const std::string& line, Fork* fork = nullptr) {
  simdjson::dom::parser parser;
  simdjson::dom::object o;
  EXPECT_EQ(parser.parse(line).get_object().get(o), simdjson::SUCCESS) << line;
  Fields fields(o);
  Event e;
  e.kind = EventTypeOf(StrView(fields, schema::Key::kEvent));
  CountingStacks stacks;
  if (fork != nullptr)
    DecodeFork(fields, &stacks, nullptr, 1, fork);
  else
    DecodeEvent(fields, &stacks, &e);
  return e;
}

// The record of type R that `line` decodes into (a default R, and a failure, when none).
template <typename R>
R RecordOf(const std::string& line) {
  Event e = Decoded(line);
  const R* r = e.As<R>();
  EXPECT_NE(r, nullptr) << line;
  return r != nullptr ? *r : R();
}

// Every key the reader takes from every record type, one line each: each field of the
// record's struct (cli/process_log.h) has its key's value, and one meaning.
TEST(EventDecode, EveryRecordDecodesItsKeys) {
  ProcessStart start = RecordOf<ProcessStart>(
      R"({"event":"process_start","ts":1,"seq":0,"argv":["a","b"],"mode":"warn","exe":"/bin/a"})");
  EXPECT_EQ(start.exe, "/bin/a");
  EXPECT_EQ(start.mode, "warn");
  EXPECT_EQ(start.argv, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(RecordOf<ProcessExit>(R"({"event":"process_exit","status":3})").status, 3);
  RdmaInit init = RecordOf<RdmaInit>(
      R"({"event":"rdma_init","call":"ibv_open_device","device":"d","stack":0})");
  EXPECT_EQ(init.call, "ibv_open_device");
  EXPECT_EQ(init.device, "d");
  EXPECT_EQ(init.stack, 40);
  EXPECT_EQ(RecordOf<ForkChild>(R"({"event":"fork_child","child_pid":7})").child_pid, 7);
  Spawn spawn = RecordOf<Spawn>(
      R"({"event":"spawn","call":"posix_spawn","child_pid":8,"ok":true,"safe":true})");
  EXPECT_EQ(spawn.call, "posix_spawn");
  EXPECT_EQ(spawn.child_pid, 8);
  EXPECT_EQ(RecordOf<ChildExec>(R"({"event":"child_exec","path":"/bin/sh"})").path, "/bin/sh");
  ChildSegv segv = RecordOf<ChildSegv>(
      R"({"event":"child_segv","addr":"0x1010","range":{"addr":"0x1000","len":4096},"call":"ibv_reg_mr","reg_stack":["0x1"],"signal":7})");
  EXPECT_EQ(segv.signal, 7);
  EXPECT_EQ(segv.addr, 0x1010u);
  EXPECT_EQ(segv.range_addr, 0x1000u);
  EXPECT_EQ(segv.range_len, 4096u);
  EXPECT_EQ(segv.call, "ibv_reg_mr");
  EXPECT_EQ(segv.reg_stack, 40);
  EXPECT_EQ(RecordOf<NoteRecord>(R"({"event":"note","text":"hello"})").text, "hello");
  UnwatchedExec unwatched = RecordOf<UnwatchedExec>(
      R"({"event":"unwatched_exec","path":"/bin/x","why":["static","setuid"],"held_rdma":true,"exec_by":"p"})");
  EXPECT_EQ(unwatched.path, "/bin/x");
  EXPECT_EQ(unwatched.exec_by, "p");
  EXPECT_EQ(unwatched.why, (std::vector<std::string>{"static", "setuid"}));
  EXPECT_EQ(unwatched.held_rdma, true);
  // The types without fields the report reads hold no record.
  RecordOf<std::monostate>(R"({"event":"exec","path":"/bin/y"})");
  RecordOf<std::monostate>(R"({"event":"later"})");
}

TEST(EventDecode, EveryForkKeyDecodes) {
  Fork f;
  Decoded(
      R"({"event":"fork","verdict":"hazard","reasons":["child-segv"],"action":"failed","errno":12,"site":"0xa","suppressed":"s1","stack":0,"init":{"call":"ibv_open_device","device":"d","age_ms":5,"stack":1},"ranges":[{"addr":0,"len":4096,"dontfork":true,"kind":"anonymous","fixed":"failed"},{"addr":0,"len":100}],"threads":3,"kernel_cof":false,"via":"atfork","fix":"dataloader","held_by":"torch"})",
      &f);
  EXPECT_EQ(f.verdict, "hazard");
  EXPECT_EQ(f.reasons, std::vector<std::string>{"child-segv"});
  EXPECT_EQ(f.action, "failed");
  EXPECT_EQ(f.errno_text, "12");
  EXPECT_EQ(f.site, "0xa");
  EXPECT_EQ(f.suppressed, "s1");
  EXPECT_EQ(f.stack, 40);
  ASSERT_TRUE(f.init.has_value());
  EXPECT_EQ(f.init->call, "ibv_open_device");
  EXPECT_EQ(f.init->device, "d");
  EXPECT_EQ(f.init->age_ms, 5);
  EXPECT_EQ(f.init->stack, 41);
  EXPECT_EQ(f.ranges, 2);
  EXPECT_EQ(f.range_bytes, 4196);
  EXPECT_EQ(f.dontfork_ranges, 1);
  EXPECT_EQ(f.fix_tally.failed_ranges, 1);
  EXPECT_EQ(f.threads, 3);
  EXPECT_EQ(f.kernel_cof, false);
  EXPECT_EQ(f.via, "atfork");
  EXPECT_EQ(f.fix, "dataloader");
  EXPECT_EQ(f.fix_library, "torch");
  // The record is reused from fork to fork: nothing of the one before stays.
  Decoded(
      R"({"event":"fork","action":"refused","errno":"EPERM","fork_support":{"on":true,"by":"rdma-core"}})",
      &f);
  EXPECT_EQ(f.verdict, kAbsentValue);
  EXPECT_TRUE(f.reasons.empty());
  EXPECT_EQ(f.errno_text, "EPERM");
  EXPECT_EQ(f.fix_library, "rdma-core");
  EXPECT_FALSE(f.init.has_value());
  EXPECT_EQ(f.stack, -1);
  EXPECT_EQ(f.ranges, 0);
  EXPECT_FALSE(f.kernel_cof.has_value());
}

TEST(LogParser, WrongTypesAndHostileValuesNeverCrash) {
  LogSet l;
  ReadLogs({Corpus("wrong_types.jsonl")}, &l);
  EXPECT_TRUE(HasNote(l, "wrong_types.jsonl:1", "no valid \"pid\""));
  // simdjson is stricter than the hand-written parser was: a number beyond
  // 64 bits (5, 6) and a lone surrogate (7) make the line "not JSON"; the
  // deep nesting of line 12 is then the fourth of its kind, counted.
  EXPECT_TRUE(HasNote(l, "wrong_types.jsonl:5", "out of 64-bit range"));
  EXPECT_TRUE(HasNote(l, "wrong_types.jsonl:7", "lone UTF-16 surrogate"));
  EXPECT_TRUE(HasNote(l, "wrong_types.jsonl", "more line(s): not JSON"));
  // The lines with usable fields are kept and survive analysis and rendering.
  EXPECT_GE(CountEvents(l, "fork"), 2);
  EXPECT_EQ(CountEvents(l, "some_future_event"), 1);
  JobReport r = BuildJobReport(l, nullptr);
  EXPECT_FALSE(RenderText(r).empty());
  Json back;
  std::string err;
  EXPECT_TRUE(ParseJson(RenderJson(r), &back, &err)) << err;
  EXPECT_FALSE(RenderMarkdown(r).empty());
}

// Every `fixed` is hostile input: a value that is none of copied/withheld/failed (a string, a
// number, an object, a long string) is read as unchanged with one note per line, the line
// still read (not counted as skipped); a kind the reader does not know counts as "unknown";
// lengths are clamped and their sums saturate.
TEST(HostileLog, FixedRangesBadValuesAreNotedAndSumsSaturate) {
  std::string text =
      R"({"schema":"forkguard.event/2","event":"header","host":"h","pid":5,"start_ns":1})"
      "\n"
      R"({"event":"fork","ts":2,"seq":0,"verdict":"hazard","action":"fixed","site":"0xb","ranges":[{"addr":0,"len":4096,"fixed":"shredded"},{"addr":0,"len":4096,"fixed":7},{"addr":0,"len":4096,"kind":"\u001b[2Jodd","fixed":"copied"}]})"
      "\n"
      R"({"event":"fork","ts":3,"seq":1,"verdict":"hazard","action":"fixed","site":"0xb","ranges":[{"addr":0,"len":4096,"fixed":{"x":[1,2,3]}}]})"
      "\n"
      R"({"event":"fork","ts":4,"seq":2,"verdict":"hazard","action":"fixed","site":"0xb","ranges":[{"addr":0,"len":4096,"fixed":")" +
      std::string(63, 'z') + "\xc3\xa9" + std::string(5000, 'z') + R"("}]})" + "\n";
  for (int i = 0; i < 9000; ++i)
    text +=
        R"({"event":"fork","ts":5,"seq":3,"verdict":"hazard","action":"fixed","site":"0xb","ranges":[{"addr":0,"len":9223372036854775807,"kind":"hugetlb","fixed":"withheld"}]})"
        "\n";
  LogSet l;
  ParseLogText("forkguard.h.5.1.jsonl", text, &l);
  EXPECT_EQ(l.lines_skipped, 0);
  ASSERT_EQ(l.processes.size(), 1u);
  const ProcessLog& p = l.processes[0];
  EXPECT_EQ(p.forks, 3 + 9000);
  ASSERT_EQ(l.notes.size(), 3u);
  for (const Note& n : l.notes) {
    EXPECT_NE(n.text.find("\"fixed\" is not copied, withheld or failed (read as unchanged)"),
              std::string::npos)
        << n.text;
    EXPECT_LT(n.text.size(), 200u) << n.text;
    EXPECT_EQ(EscapeText(n.text), n.text);  // cut where a character starts: valid UTF-8
    EXPECT_EQ(n.where.rfind("forkguard.h.5.1.jsonl:", 0), 0u) << n.where;
  }
  EXPECT_NE(l.notes[0].text.find("\"shredded\""), std::string::npos) << l.notes[0].text;
  EXPECT_NE(l.notes[1].text.find("{\"x\":[1,2,3]}"), std::string::npos) << l.notes[1].text;
  const FixTally& f = p.fork_sites[0].fix_tally;
  EXPECT_EQ(f.forks, 3 + 9000);
  EXPECT_EQ(f.copied_ranges, 1);
  EXPECT_EQ(FixTally::KindNames(f.copied_kinds), std::vector<std::string>{"unknown"});
  EXPECT_EQ(f.withheld_ranges, 9000);
  EXPECT_EQ(f.withheld_bytes, INT64_MAX);  // 9000 × 1 PiB (each clamped) saturates
  EXPECT_EQ(f.failed_ranges, 0);
  EXPECT_FALSE(FormatsOf(l).empty());
}

}  // namespace
}  // namespace forkguard::cli
