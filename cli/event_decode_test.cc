// One event's fields (cli/event_decode.h): mistyped and hostile values read as absent, the
// line kept; fix mode's `fixed` ranges, every value hostile.
#include <string>
#include <vector>

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
