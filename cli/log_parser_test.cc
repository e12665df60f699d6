// Robust input (must-show 3): the malformed corpus in cli/testdata/corpus and
// hand-made cases give one clear "file:line: ..." note per problem, and every
// good line is still reported; nothing crashes.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/event_log.h"
#include "cli/job_report.h"
#include "cli/json.h"
#include "cli/report_render.h"
#include "cli/symbolizer.h"
#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

std::string Corpus(const std::string& name) {
  return forkguard::testing::Runfile("cli/testdata/corpus/" + name);
}

// The note whose location ends with `suffix` and text contains `text`.
bool HasNote(const LogSet& l, const std::string& suffix, const std::string& text) {
  for (const auto& n : l.notes)
    if (n.where.size() >= suffix.size() &&
        n.where.compare(n.where.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        n.text.find(text) != std::string::npos)
      return true;
  return false;
}

int CountEvents(const LogSet& l, const std::string& type) {
  int n = 0;
  for (const auto& p : l.processes)
    for (const auto& e : p.events) n += e.type == type;
  return n;
}

TEST(LogParser, ValidFile) {
  LogSet l;
  ReadLogs({Corpus("valid.jsonl")}, &l);
  EXPECT_TRUE(l.notes.empty());
  ASSERT_EQ(l.processes.size(), 1u);
  EXPECT_EQ(l.processes[0].pid, 4242);
  EXPECT_EQ(l.processes[0].host, "h1");
  EXPECT_EQ(l.processes[0].rank, 0);
  EXPECT_EQ(l.processes[0].events.size(), 3u);
}

// Logs the real libforkguard.so wrote on rxe0 (Soft-RoCE guest): hazard_prog
// with RDMAV_FORK_SAFE=1, whose child touched the registered buffer.
TEST(LogParser, RealShimLogsFromTheDevice) {
  std::string dir = forkguard::testing::Runfile(
      "cli/testdata/real_rxe/forkguard.rxe-vm.150.1796044305158156650.jsonl");
  dir = dir.substr(0, dir.rfind('/'));
  LogSet l;
  ReadLogs({dir}, &l);
  EXPECT_TRUE(l.notes.empty()) << l.notes[0].where << ": " << l.notes[0].text;
  JobReport r = BuildJobReport(l, nullptr);
  ASSERT_EQ(r.processes.size(), 2u);
  EXPECT_EQ(r.processes[1].parent, 0);
  ASSERT_EQ(r.hazard_groups.size(), 1u);
  const ForkGroup& g = r.hazard_groups[0];
  EXPECT_EQ(g.count, 1);
  EXPECT_EQ(g.reasons.count("child-segv"), 1u);
  EXPECT_EQ(g.reasons.count("inherited-rdma"), 1u);
  EXPECT_EQ(g.init_call, "ibv_open_device");
  EXPECT_EQ(g.init_device, "rxe0");
  EXPECT_EQ(g.dontfork_ranges, 1);
  EXPECT_EQ(g.children_segv, 1);
  ASSERT_EQ(r.deaths.size(), 1u);
  EXPECT_EQ(r.deaths[0].group, 0);
  EXPECT_EQ(r.deaths[0].signal, 11);
  EXPECT_EQ(r.deaths[0].call, "ibv_reg_mr");
  EXPECT_TRUE(r.deaths[0].range_len.has_value());
  ASSERT_EQ(r.inits.size(), 1u);
}

TEST(LogParser, TruncatedLastLineIsNotedGoodLinesKept) {
  LogSet l;
  ReadLogs({Corpus("truncated_last_line.jsonl")}, &l);
  EXPECT_TRUE(HasNote(l, "truncated_last_line.jsonl:4", "truncated last line")) << l.notes.size();
  EXPECT_EQ(CountEvents(l, "fork"), 1);
  EXPECT_EQ(l.lines_used, 3);
  EXPECT_EQ(l.lines_skipped, 1);
}

TEST(LogParser, GarbageLinesAreNotedByLine) {
  LogSet l;
  ReadLogs({Corpus("garbage.jsonl")}, &l);
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
  LogSet l;
  ReadLogs({Corpus("binary.jsonl")}, &l);
  EXPECT_TRUE(HasNote(l, "binary.jsonl:2", "binary data"));
  EXPECT_EQ(CountEvents(l, "fork"), 1);
  EXPECT_EQ(CountEvents(l, "process_start"), 1);
  EXPECT_GE(l.lines_skipped, 3);
}

TEST(LogParser, FutureSchemaMajorIsSkippedMinorIsRead) {
  LogSet l;
  ReadLogs({Corpus("future_schema.jsonl")}, &l);
  EXPECT_TRUE(HasNote(l, "future_schema.jsonl:2", "\"forkguard.event/3\" is a major version"));
  EXPECT_TRUE(HasNote(l, "future_schema.jsonl:3", "unknown schema"));
  EXPECT_EQ(CountEvents(l, "fork"), 1);  // forkguard.event/1.7 is still major 1
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
  JsonValue back;
  std::string err;
  EXPECT_TRUE(ParseJson(RenderJson(r), &back, &err)) << err;
  EXPECT_FALSE(RenderMarkdown(r).empty());
}

TEST(LogParser, EmptyFileEmptyDirMissingPathAndFifo) {
  std::string dir = forkguard::testing::MakeTempDir("empty");
  std::string fifo = dir + "/pipe.jsonl";
  ASSERT_EQ(0, mkfifo(fifo.c_str(), 0600));
  std::string empty_dir = forkguard::testing::MakeTempDir("nothing");
  LogSet l;
  ReadLogs({Corpus("empty.jsonl"), empty_dir, dir + "/missing.jsonl", fifo}, &l);
  EXPECT_TRUE(HasNote(l, "empty.jsonl", "empty file"));
  EXPECT_TRUE(HasNote(l, empty_dir, "no event logs"));
  EXPECT_TRUE(HasNote(l, "missing.jsonl", "No such file or directory"));
  EXPECT_TRUE(HasNote(l, "pipe.jsonl", "not a regular file"));
  EXPECT_TRUE(l.processes.empty());
  JobReport r = BuildJobReport(l, nullptr);
  std::string text = RenderText(r);
  EXPECT_NE(text.find("no forkguard events found"), std::string::npos) << text;
  EXPECT_NE(text.find("/missing.jsonl: cannot read: No"), std::string::npos) << text;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) EXPECT_LE(line.size(), 102u) << line;
}

TEST(LogParser, SymbolizerIgnoresFifosAndMissingObjects) {
  std::string dir = forkguard::testing::MakeTempDir("sym");
  std::string fifo = dir + "/libfifo.so";
  ASSERT_EQ(0, mkfifo(fifo.c_str(), 0600));
  std::string text =
      "{\"schema\":\"forkguard.event/1\",\"event\":\"fork\",\"pid\":5,\"verdict\":"
      "\"hazard\",\"stack\":[{\"obj\":\"" +
      fifo + "\",\"off\":\"0x10\",\"sym\":\"f\"},{\"obj\":\"/nonexistent.so\",\"off\":\"0x1\"}]}\n";
  LogSet l;
  ParseLogText("sym.jsonl", text, &l);
  Symbolizer sym;  // would block forever opening the FIFO
  JobReport r = BuildJobReport(l, &sym);
  ASSERT_EQ(r.hazard_groups.size(), 1u);
  EXPECT_EQ(r.hazard_groups[0].stack[0].sym, "f");
  EXPECT_TRUE(r.hazard_groups[0].stack[0].src_file.empty());
}

TEST(LogParser, OverlongLineIsSkipped) {
  std::string text = "{\"schema\":\"forkguard.event/1\",\"event\":\"note\",\"pid\":5,\"text\":\"" +
                     std::string(2 << 20, 'x') + "\"}\n" +
                     "{\"schema\":\"forkguard.event/1\",\"event\":\"fork\",\"pid\":5}\n";
  LogSet l;
  ParseLogText("big.jsonl", text, &l);
  EXPECT_TRUE(HasNote(l, "big.jsonl:1", "line too long"));
  EXPECT_EQ(CountEvents(l, "fork"), 1);
}

TEST(LogParser, DeepNestingIsNotedOthersKept) {
  std::string text = std::string(5000, '[') + std::string(5000, ']') + "\n" +
                     "{\"schema\":\"forkguard.event/1\",\"event\":\"fork\",\"pid\":5}\n";
  LogSet l;
  ParseLogText("deep.jsonl", text, &l);
  EXPECT_TRUE(HasNote(l, "deep.jsonl:1", "nesting too deep"));
  EXPECT_EQ(CountEvents(l, "fork"), 1);
}

// Files stream through a 1 MiB buffer: lines across chunk boundaries, an
// overlong line in the middle of a file and the thread count change nothing.
TEST(LogParser, StreamedFilesAcrossChunksAndThreads) {
  std::string dir = forkguard::testing::MakeTempDir("stream");
  std::string text;
  for (int i = 0; i < 30000; ++i) {
    if (i == 12000)
      text += "{\"schema\":\"forkguard.event/1\",\"event\":\"note\",\"pid\":5,\"text\":\"" +
              std::string(3 << 20, 'x') + "\"}\n";
    text += "{\"schema\":\"forkguard.event/1\",\"event\":\"" +
            std::string(i % 3 == 0 ? "fork" : "mr_register") +
            "\",\"pid\":5,\"seq\":" + std::to_string(i) + ",\"len\":4096}\n";
  }
  for (int f = 0; f < 3; ++f) {
    FILE* out = fopen((dir + "/p" + std::to_string(f) + ".jsonl").c_str(), "w");
    ASSERT_TRUE(out);
    fwrite(text.data(), 1, text.size(), out);
    fclose(out);
  }
  for (int threads : {1, 3}) {
    LogSet l;
    ReadLogs({dir}, &l, threads);
    ASSERT_EQ(l.processes.size(), 3u);
    EXPECT_EQ(l.lines_used, 3 * 30000);
    EXPECT_EQ(l.lines_skipped, 3);
    EXPECT_TRUE(HasNote(l, "p1.jsonl:12001", "line too long"));
    EXPECT_EQ(CountEvents(l, "fork"), 3 * 10000);
    EXPECT_EQ(CountEvents(l, "mr_register"), 0);  // counted, not kept
    EXPECT_EQ(l.processes[2].summary.registrations, 20000);
    EXPECT_EQ(l.processes[2].summary.counts.at("mr_register"), 20000);
    int64_t seq = -1;
    for (const Event& e : l.processes[0].events) {
      EXPECT_GT(e.seq, seq);
      seq = e.seq;
    }
  }
}

TEST(LogParser, BlankAndCrlfLines) {
  LogSet l;
  ReadLogs({Corpus("blank_lines.jsonl")}, &l);
  EXPECT_TRUE(l.notes.empty()) << l.notes[0].where << " " << l.notes[0].text;
  EXPECT_EQ(CountEvents(l, "process_start"), 1);
}

TEST(Json, ParsesAndRejects) {
  JsonValue v;
  std::string err;
  ASSERT_TRUE(ParseJson(R"({"a":[1,-2.5e3,"\u00e9\ud83d\ude00",true,null],"b":{}})", &v, &err));
  EXPECT_EQ(v.Find("a")->array()[1].double_value(), -2500);
  EXPECT_EQ(v.Find("a")->array()[2].string_value(), "\xc3\xa9\xf0\x9f\x98\x80");
  for (const char* bad :
       {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "tru", "\"\x01\"", "{} x", "\"\\x\"", "-", "1e"})
    EXPECT_FALSE(ParseJson(bad, &v, &err)) << bad;
  EXPECT_EQ(JsonQuote("a\"b\\\n\xff"), "\"a\\\"b\\\\\\u000a\\ufffd\"");
}

TEST(Json, AddressesParse) {
  JsonValue s = JsonValue::String("0x7f12");
  EXPECT_EQ(ParseAddress(&s), 0x7f12u);
  JsonValue bad = JsonValue::String("0x");
  EXPECT_FALSE(ParseAddress(&bad));
  JsonValue big = JsonValue::String("0x1ffffffffffffffff");
  EXPECT_FALSE(ParseAddress(&big));
}

}  // namespace
}  // namespace forkguard::cli
