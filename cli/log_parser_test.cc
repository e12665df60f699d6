// Robust input (must-show 3): the malformed corpus in cli/testdata/corpus and
// hand-made cases give one clear "file:line: ..." note per problem, and every
// good line is still reported; nothing crashes.
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/event_log.h"
#include "cli/format.h"
#include "cli/job_report.h"
#include "cli/json.h"
#include "cli/report_render.h"
#include "cli/symbolizer.h"
#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

std::string Corpus(const std::string& name) {
  return forkguard::test_support::Runfile("cli/testdata/corpus/" + name);
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

// Events of `type`; fork lines are tallied per site by the reader, not kept as events.
int64_t CountEvents(const LogSet& l, const std::string& type) {
  int64_t n = 0;
  for (const auto& p : l.processes) {
    if (type == "fork") n += p.forks;
    for (const auto& e : p.events) n += e.type == type;
  }
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
  EXPECT_EQ(l.processes[0].events.size() + l.processes[0].forks, 3u);
  EXPECT_EQ(l.processes[0].forks, 1);
}

// Logs the real libforkguard.so wrote on rxe0 (Soft-RoCE guest): hazard_prog
// with RDMAV_FORK_SAFE=1, whose child touched the registered buffer.
TEST(LogParser, RealShimLogsFromTheDevice) {
  std::string dir = forkguard::test_support::Runfile(
      "cli/testdata/real_rxe/forkguard.rxe-vm.150.1796044305158156650.jsonl");
  dir = dir.substr(0, dir.rfind('/'));
  LogSet l;
  ReadLogs({dir}, &l);
  for (const auto& n : l.notes) ADD_FAILURE() << n.where << ": " << n.text;
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
  Json back;
  std::string err;
  EXPECT_TRUE(ParseJson(RenderJson(r), &back, &err)) << err;
  EXPECT_FALSE(RenderMarkdown(r).empty());
}

TEST(LogParser, EmptyFileEmptyDirMissingPathAndFifo) {
  std::string dir = forkguard::test_support::MakeTempDir("empty");
  std::string fifo = dir + "/pipe.jsonl";
  ASSERT_EQ(0, mkfifo(fifo.c_str(), 0600));
  std::string empty_dir = forkguard::test_support::MakeTempDir("nothing");
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
  std::string dir = forkguard::test_support::MakeTempDir("sym");
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
  std::string dir = forkguard::test_support::MakeTempDir("stream");
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

// Collected logs are often links: a job directory of links to per-host directories, or to
// files. Links are followed; a file or directory reached twice (a loop) is read once; a
// dangling link named like a log is noted.
TEST(LogParser, SymlinkedFilesAndDirectoriesAreReadOnce) {
  std::string real = forkguard::test_support::MakeTempDir("real");
  std::string job = forkguard::test_support::MakeTempDir("job");
  for (int pid : {11, 12}) {
    FILE* out = fopen((real + "/p" + std::to_string(pid) + ".jsonl").c_str(), "w");
    ASSERT_TRUE(out);
    fprintf(out, "{\"schema\":\"forkguard.event/1\",\"event\":\"fork\",\"pid\":%d}\n", pid);
    fclose(out);
  }
  ASSERT_EQ(0, symlink(real.c_str(), (job + "/host-a").c_str()));
  ASSERT_EQ(0, symlink((real + "/p11.jsonl").c_str(), (job + "/again.jsonl").c_str()));
  ASSERT_EQ(0, symlink(job.c_str(), (job + "/loop").c_str()));
  ASSERT_EQ(0, symlink("/nonexistent/p9.jsonl", (job + "/dangling.jsonl").c_str()));
  LogSet l;
  ReadLogs({job}, &l);
  EXPECT_EQ(l.processes.size(), 2u);
  EXPECT_EQ(CountEvents(l, "fork"), 2);
  EXPECT_EQ(l.files_read, 2);
  EXPECT_TRUE(HasNote(l, "dangling.jsonl", "No such file or directory"));
  // The same file named twice on the command line, and through its directory: once.
  LogSet twice;
  ReadLogs({real, real + "/p12.jsonl", job + "/again.jsonl"}, &twice);
  EXPECT_EQ(twice.processes.size(), 2u);
  EXPECT_EQ(twice.files_read, 2);
}

TEST(LogParser, BlankAndCrlfLines) {
  LogSet l;
  ReadLogs({Corpus("blank_lines.jsonl")}, &l);
  EXPECT_TRUE(l.notes.empty()) << l.notes[0].where << " " << l.notes[0].text;
  EXPECT_EQ(CountEvents(l, "process_start"), 1);
}

// A forkguard.event/2 process: the header, a module, a stack, an init and a registration.
constexpr char kV2Process[] =
    R"({"schema":"forkguard.event/2","event":"header","host":"h","pid":5,"ppid":1,"prog":"p","rank":2,"local_rank":0,"job":"j","start_ns":1000000})"
    "\n"
    R"({"event":"module","id":0,"path":"/lib/x.so","base":"0x7f0000000000","build_id":"abcd"})"
    "\n"
    R"({"event":"stack","id":0,"frames":[[0,4660],[-1,99],{"py":{"file":"t.py","line":3,"func":"main"}}]})"
    "\n"
    R"({"event":"rdma_init","ts":5,"seq":0,"call":"ibv_open_device","device":"d","stack":0})"
    "\n"
    R"({"event":"mr_register","ts":6,"seq":1,"mr":[4096,8192,1,77],"stack":0})"
    "\n";

// forkguard.event/2: the header names the process, stack and module records come first.
TEST(LogParserV2, HeaderModulesStacksAndShortEvents) {
  LogSet l;
  ParseLogText(
      "forkguard.h.5.1.jsonl",
      std::string(kV2Process) +
          R"({"event":"mr_register","ts":7,"seq":2,"tid":9,"mr":[4096,100,1,78],"stack":0,"call":"ibv_reg_mr_iova2"})"
          "\n",
      &l);
  for (const auto& n : l.notes) ADD_FAILURE() << n.where << ": " << n.text;
  ASSERT_EQ(l.processes.size(), 1u);
  const ProcessLog& p = l.processes[0];
  EXPECT_EQ(p.pid, 5);
  EXPECT_EQ(p.ppid, 1);
  EXPECT_EQ(p.host, "h");
  EXPECT_EQ(p.prog, "p");
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.job, "j");
  EXPECT_EQ(p.summary.registrations, 2);
  EXPECT_EQ(p.summary.registered_bytes, 8292);
  ASSERT_EQ(p.events.size(), 1u);
  const Event& e = p.events[0];
  EXPECT_EQ(e.ts_ns, 1000005);
  EXPECT_EQ(e.tid, 5);  // no tid: the main thread
  const Stack& st = p.StackAt(e.stack);
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[0].obj, "/lib/x.so");
  EXPECT_EQ(st[0].off, 4660u);
  EXPECT_EQ(st[0].build_id, "abcd");
  EXPECT_EQ(st[1].ip, 99u);
  EXPECT_TRUE(st[1].obj.empty());
  EXPECT_TRUE(st[2].python);
  EXPECT_EQ(st[2].py_func, "main");
}

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

// The shim writes a line for the first registration at a site and counts the others
// (mr_counts, with the next line it writes): the totals are exact from both, deregistrations
// too; a process with no exit record prints "at least N" registrations.
TEST(LogParserV2, RegistrationCountsMakeExactTotals) {
  const std::string head =
      R"({"schema":"forkguard.event/2","event":"header","host":"h","pid":PID,"ppid":1,"prog":"p","rank":null,"local_rank":null,"job":null,"start_ns":1000000})"
      "\n"
      R"({"event":"stack","id":0,"frames":[[-1,4660]]})"
      "\n"
      R"({"event":"mr_register","ts":6,"seq":0,"mr":[4096,4096,1,77],"stack":0})"
      "\n"
      R"({"event":"mr_register","ts":7,"seq":1,"mr":[8192,100,1,78],"stack":0,"call":"ibv_reg_mr_iova2"})"
      "\n"
      R"({"event":"rdma_call","ts":8,"seq":2,"call":"ibv_alloc_pd","device":null,"handle":"0x1","ok":true,"errno":0})"
      "\n"
      R"({"event":"mr_counts","ts":8,"seq":3,"sites":[{"stack":0,"n":998,"bytes":4087808},{"stack":0,"call":"ibv_reg_mr_iova2","n":1,"bytes":100}],"deregs":999})"
      "\n"
      R"({"event":"mr_counts","ts":9,"seq":4,"sites":[{"stack":0,"n":0,"bytes":4096}]})"
      "\n";
  auto with_pid = [&](int pid) {
    std::string t = head;
    t.replace(t.find("PID"), 3, std::to_string(pid));
    return t;
  };
  LogSet l;
  ParseLogText("forkguard.h.5.1.jsonl",
               with_pid(5) + R"({"event":"process_exit","ts":10,"seq":5,"status":null})" + "\n",
               &l);
  ParseLogText("forkguard.h.6.1.jsonl", with_pid(6), &l);  // killed: no exit record
  for (const auto& n : l.notes) ADD_FAILURE() << n.where << ": " << n.text;
  ASSERT_EQ(l.processes.size(), 2u);
  for (const ProcessLog& p : l.processes) {
    EXPECT_EQ(p.summary.registrations, 2 + 998 + 1) << p.pid;
    EXPECT_EQ(p.summary.counted_registrations, 999) << p.pid;
    EXPECT_EQ(p.summary.registered_bytes, 4096 + 100 + 4087808 + 100 + 4096) << p.pid;
    EXPECT_EQ(p.summary.deregistrations, 999) << p.pid;
    EXPECT_EQ(p.summary.counts_final, p.pid == 5) << p.pid;
    EXPECT_EQ(p.summary.counts.at("mr_counts"), 2) << p.pid;
  }
  JobReport r = BuildJobReport(l, nullptr);
  std::string text = RenderText(r);
  EXPECT_NE(text.find("5 p, 1001 registrations"), std::string::npos) << text;
  EXPECT_NE(text.find("6 p, at least 1001 registrations"), std::string::npos) << text;
  // A count for a stack the file never recorded is noted, and still counted.
  LogSet bad;
  ParseLogText(
      "forkguard.h.7.1.jsonl",
      with_pid(7) +
          R"({"event":"mr_counts","ts":11,"seq":5,"sites":[{"stack":3,"n":2,"bytes":8}]})" + "\n",
      &bad);
  EXPECT_TRUE(
      HasNote(bad, "forkguard.h.7.1.jsonl:8", "stack id used before or without its record"));
  ASSERT_EQ(bad.processes.size(), 1u);
  EXPECT_EQ(bad.processes[0].summary.registrations, 1001 + 2);
}

// Bad /2 input: each problem a note, every usable line kept.
TEST(LogParserV2, BadInputIsNotedTheRestKept) {
  LogSet l;
  ReadLogs({Corpus("v2_bad.jsonl")}, &l);
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
    if (e.type == "rdma_init") {
      EXPECT_EQ(e.stack, -1);
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

// A process that forks every epoch: every fork counted per site, a bounded sample kept
// (the first and last forks, in log order), each fork_child paired with the newest fork
// without a child, and the children without a log of their own only counted.
TEST(LogParser, ManyForksAreTalliedAndSampled) {
  std::string text;
  auto line = [&](int64_t ts, const std::string& event, const std::string& rest) {
    text += "{\"schema\":\"forkguard.event/1\",\"event\":\"" + event +
            "\",\"ts_ns\":" + std::to_string(ts) +
            ",\"pid\":10,\"ppid\":1,\"host\":\"h\",\"prog\":\"p\"" + rest + "}\n";
  };
  const int kForks = 1000;
  for (int i = 0; i < kForks; ++i) {
    bool hazard = i % 4 != 0;
    line(1000 + 10 * i, "fork",
         std::string(",\"verdict\":\"") + (hazard ? "hazard" : "clean") +
             "\",\"action\":\"proceeded\",\"site\":\"0xa\",\"reasons\":[\"child-segv\"]," +
             "\"ranges\":[{\"len\":" + std::to_string(i) + "}]");
    line(1001 + 10 * i, "fork_child", ",\"child_pid\":" + std::to_string(100000 + i));
  }
  // Read as files the shim names: only child 100500 has a log of its own.
  std::string dir = ::testing::TempDir() + "/many_forks";
  mkdir(dir.c_str(), 0700);
  auto write = [&](const std::string& name, const std::string& body) {
    FILE* f = fopen((dir + "/" + name).c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs(body.c_str(), f);
    fclose(f);
  };
  write("forkguard.h.10.1.jsonl", text);
  write("forkguard.h.100500.2.jsonl",
        "{\"schema\":\"forkguard.event/1\",\"event\":\"process_start\",\"ts_ns\":6000,"
        "\"pid\":100500,\"ppid\":10,\"host\":\"h\",\"prog\":\"p\"}\n");
  LogSet l;
  ReadLogs({dir}, &l);
  ASSERT_EQ(l.processes.size(), 2u);
  const ProcessLog& p = l.processes[0];
  EXPECT_EQ(p.forks, kForks);
  EXPECT_EQ(p.fork_children, kForks);
  ASSERT_EQ(p.fork_sites.size(), 2u);  // hazard and clean at site 0xa
  int64_t hazard = 0, children = 0;
  for (const ForkSite& s : p.fork_sites) {
    hazard += s.hazard;
    children += s.children;
    EXPECT_EQ(s.reasons.at("child-segv"), s.count);
  }
  EXPECT_EQ(hazard, kForks * 3 / 4);
  EXPECT_EQ(children, kForks);
  EXPECT_EQ(p.fork_sites[0].verdict, "clean");  // fork 0 is clean
  EXPECT_EQ(p.fork_sites[0].max_range_bytes, 996);
  EXPECT_EQ(p.fork_sites[1].max_range_bytes, 999);
  EXPECT_EQ(p.first_fork_ns, 1000);
  EXPECT_EQ(p.last_fork_ns, 1000 + 10 * (kForks - 1));
  ASSERT_EQ(p.fork_sample.size(), ProcessLog::kForkSampleHead + ProcessLog::kForkSampleTail);
  EXPECT_EQ(p.fork_sample.front().ordinal, 0);
  EXPECT_EQ(p.fork_sample.front().child_pid, 100000);
  EXPECT_EQ(p.fork_sample.back().ordinal, kForks - 1);
  EXPECT_EQ(p.fork_sample.back().child_pid, 100000 + kForks - 1);
  for (size_t i = 1; i < p.fork_sample.size(); ++i)
    EXPECT_LT(p.fork_sample[i - 1].line, p.fork_sample[i].line);
  ASSERT_EQ(p.child_links.size(), 1u);
  EXPECT_EQ(p.child_links[0].child_pid, 100500);
  EXPECT_EQ(p.child_links[0].fork_ts_ns, 1000 + 10 * 500);
  int64_t binned = 0;
  for (int64_t n : p.fork_bins.forks) binned += n;
  EXPECT_EQ(binned, kForks);
  EXPECT_EQ(p.fork_bins.forks.size(), ForkHistogram::kBins);

  // Named otherwise, every child is kept.
  LogSet all;
  ParseLogText("any.jsonl", text, &all);
  ASSERT_EQ(all.processes.size(), 1u);
  EXPECT_EQ(all.processes[0].child_links.size(), static_cast<size_t>(kForks));
}

namespace {

// The main program's build-id and first mapped byte, as the shim reads them.
struct SelfImage {
  std::string build_id;
  uintptr_t base = 0;
};
SelfImage Self() {
  SelfImage self;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<SelfImage*>(data);
        uintptr_t lo = ~uintptr_t{0};
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && info->dlpi_addr + ph.p_vaddr < lo)
            lo = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type != PT_NOTE) continue;
          const char* n = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* end = n + ph.p_memsz;
          while (n + sizeof(ElfW(Nhdr)) <= end) {
            const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(n);
            const char* desc = n + sizeof(ElfW(Nhdr)) + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID) {
              static const char kHex[] = "0123456789abcdef";
              for (unsigned k = 0; k < nh->n_descsz; ++k) {
                unsigned char c = static_cast<unsigned char>(desc[k]);
                s->build_id += kHex[c >> 4];
                s->build_id += kHex[c & 15];
              }
            }
            n = desc + ((nh->n_descsz + 3) & ~3u);
          }
        }
        s->base = lo & ~uintptr_t{4095};
        return 1;  // the first object is the main program
      },
      &self);
  return self;
}

__attribute__((noinline)) void V2SymbolizedFunction() { asm volatile(""); }

}  // namespace

// The report symbolizes /2 offsets with libdw when the file's build-id matches; a file that
// is missing or has another build-id leaves raw offsets and one note per object.
TEST(LogParserV2, SymbolizesByPathCheckingTheBuildId) {
  SelfImage self = Self();
  ASSERT_FALSE(self.build_id.empty()) << "the test binary has no build-id";
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  ASSERT_GT(n, 0);
  exe[n] = '\0';
  uint64_t off = reinterpret_cast<uintptr_t>(&V2SymbolizedFunction) - self.base + 1;
  Symbolizer sym;
  Frame good;
  good.obj = exe;
  good.off = off;
  good.build_id = self.build_id;
  sym.Symbolize(&good);
  EXPECT_NE(good.func.find("V2SymbolizedFunction"), std::string::npos) << good.func;
  Frame other = good;
  other.func.clear();
  // Another build-id: its first byte changed (whatever it was).
  other.build_id = (self.build_id.compare(0, 2, "00") == 0 ? "11" : "00") + self.build_id.substr(2);
  Frame other2 = other;
  sym.Symbolize(&other);
  sym.Symbolize(&other2);
  EXPECT_TRUE(other.func.empty()) << other.func;
  Frame missing;
  missing.obj = "/nonexistent/libgone.so";
  missing.off = 16;
  missing.build_id = "abcd";
  sym.Symbolize(&missing);
  sym.Symbolize(&missing);
  std::vector<Note> notes = sym.TakeNotes();
  ASSERT_EQ(notes.size(), 2u);  // once per object
  EXPECT_EQ(notes[0].where, exe);
  EXPECT_NE(notes[0].text.find("another build-id"), std::string::npos) << notes[0].text;
  EXPECT_EQ(notes[1].where, "/nonexistent/libgone.so");
  EXPECT_NE(notes[1].text.find("not found"), std::string::npos) << notes[1].text;
}

// Every field is hostile: numbers a kernel or a shim cannot give are refused with a note
// naming the line, and the rest of the file is reported.
std::string FormatsOf(const LogSet& l) {
  JobReport r = BuildJobReport(l, nullptr);
  return RenderText(r) + RenderJson(r) + RenderMarkdown(r) + RenderText(r, 100, true);
}

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
  EXPECT_TRUE(HasNote(l, ":1", "a timestamp out of range, skipped"));
  EXPECT_TRUE(HasNote(l, ":2", "a timestamp out of range, skipped"));
  ASSERT_EQ(l.processes.size(), 1u);
  EXPECT_EQ(l.processes[0].forks, 1);  // the good line is reported
  EXPECT_FALSE(FormatsOf(l).empty());
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
  EXPECT_TRUE(HasNote(l, ":2", "a timestamp out of range, skipped"));
  EXPECT_TRUE(HasNote(l, ":3", "a timestamp out of range, skipped"));
  ASSERT_EQ(l.processes.size(), 1u);
  EXPECT_EQ(l.processes[0].forks, 1);
  EXPECT_FALSE(FormatsOf(l).empty());

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
  EXPECT_TRUE(HasNote(l, ":1", "no valid \"pid\""));
  EXPECT_TRUE(HasNote(l, ":2", "a number out of range, skipped"));
  EXPECT_TRUE(HasNote(l, ":3", "a number out of range, skipped"));
  EXPECT_TRUE(HasNote(l, ":4", "a number out of range, skipped"));
  ASSERT_EQ(l.processes.size(), 1u);
  EXPECT_EQ(l.processes[0].forks, 1);
  EXPECT_FALSE(FormatsOf(l).empty());
}

// Byte counts summed over many lines hold at the int64 range instead of wrapping.
TEST(HostileLog, RegisteredBytesSaturate) {
  std::string text =
      R"({"schema":"forkguard.event/2","event":"header","host":"h","pid":5,"start_ns":1})"
      "\n";
  for (int i = 0; i < 20000; ++i)
    text += R"({"event":"mr_counts","ts":2,"sites":[{"n":1099511627776,"bytes":1125899906842624}]})"
            "\n";
  LogSet l;
  ParseLogText("forkguard.h.5.1.jsonl", text, &l);
  ASSERT_EQ(l.processes.size(), 1u);
  EXPECT_EQ(l.processes[0].summary.registered_bytes, INT64_MAX);
  EXPECT_EQ(l.processes[0].summary.registrations, 20000 * (int64_t{1} << 40));
  EXPECT_FALSE(FormatsOf(l).empty());
}

// Fix mode's forks (formats/EVENT_LOG.md: action "fixed", ranges[].fixed): the copied and withheld
// ranges of a fixed fork are counted with their bytes and kinds; "failed" for any fork; a range
// of a fork that was not fixed adds no copy or withhold.
TEST(LogParserV2, FixedForksAreTallied) {
  LogSet l;
  ParseLogText("forkguard.h.5.1.jsonl",
               R"({"schema":"forkguard.event/2","event":"header","host":"h","pid":5,"start_ns":1}
{"event":"fork","ts":10,"seq":0,"verdict":"hazard","reasons":["child-segv","inherited-rdma"],"action":"fixed","site":"0xa","ranges":[{"addr":4096,"len":4096,"call":"ibv_reg_mr","dontfork":true,"kind":"anonymous","fixed":"copied"},{"addr":8192,"len":8192,"call":"ibv_reg_mr","dontfork":true,"kind":"thp","fixed":"copied"},{"addr":2097152,"len":2097152,"call":"ibv_reg_mr","dontfork":false,"kind":"hugetlb","fixed":"withheld"},{"addr":65536,"len":4096,"call":"ibv_reg_mr","dontfork":true,"kind":"anonymous","fixed":"failed"},{"addr":131072,"len":4096,"call":"ibv_reg_mr","dontfork":true,"kind":"anonymous"}]}
{"event":"fork","ts":20,"seq":1,"verdict":"hazard","reasons":["parent-corruption"],"action":"failed","errno":1,"site":"0xa","ranges":[{"addr":2097152,"len":2097152,"call":"ibv_reg_mr","kind":"hugetlb","fixed":"failed"}]}
{"event":"fork","ts":30,"seq":2,"verdict":"hazard","reasons":["child-segv"],"action":"proceeded","site":"0xa","ranges":[{"addr":4096,"len":4096,"call":"ibv_reg_mr","dontfork":true,"kind":"anonymous","fixed":"copied"}]}
)",
               &l);
  EXPECT_TRUE(l.notes.empty()) << l.notes[0].text;
  ASSERT_EQ(l.processes.size(), 1u);
  const ProcessLog& p = l.processes[0];
  EXPECT_EQ(p.forks, 3);
  ASSERT_EQ(p.fork_sites.size(), 1u);
  const FixTally& f = p.fork_sites[0].fix_tally;
  EXPECT_EQ(f.forks, 1);
  EXPECT_EQ(f.copied_ranges, 2);
  EXPECT_EQ(f.copied_bytes, 4096 + 8192);
  EXPECT_EQ(FixTally::KindNames(f.copied_kinds), (std::vector<std::string>{"anonymous", "thp"}));
  EXPECT_EQ(f.withheld_ranges, 1);
  EXPECT_EQ(f.withheld_bytes, 2097152);
  EXPECT_EQ(FixTally::KindNames(f.withheld_kinds), std::vector<std::string>{"hugetlb"});
  EXPECT_EQ(f.failed_ranges, 2);
  EXPECT_EQ(p.fork_sites[0].actions.at("fixed"), 1);
  JobReport r = BuildJobReport(l, nullptr);
  EXPECT_EQ(r.fix_tally.forks, 1);
  EXPECT_EQ(r.fix_tally.failed_ranges, 2);
  EXPECT_EQ(r.processes[0].fixed_forks, 1);
  EXPECT_EQ(r.hazard_forks, 3);  // the verdict stands
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

TEST(HostileLog, ForkHistogramBinsAnyTimestamps) {
  ForkHistogram h;
  h.Add(INT64_MIN, 1, 1);
  h.Add(INT64_MAX, 1, 0);
  h.Add(0, INT64_MAX, 0);
  int64_t forks = 0;
  for (int64_t n : h.forks) {
    EXPECT_GE(n, 0);
    if (__builtin_add_overflow(forks, n, &forks)) forks = INT64_MAX;
  }
  EXPECT_EQ(forks, INT64_MAX);
  EXPECT_EQ(h.forks.size(), ForkHistogram::kBins);
}

// A name the shim would give a log, but with a pid no kernel gives: not a shim's name,
// and no exception (std::stoll threw on it).
TEST(HostileLog, FileNameWithAHugePidIsReadAsAnyLog) {
  char tmpl[] = "/tmp/fg_hostile_name.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::string path = dir + "/forkguard.x.9999999999999999999.1.jsonl";
  {
    std::ofstream f(path);
    f << R"({"schema":"forkguard.event/1","event":"fork","pid":3,"ts_ns":1,"verdict":"clean"})"
      << "\n";
  }
  LogSet l;
  ReadLogs({dir}, &l);
  EXPECT_EQ(l.files_read, 1);
  EXPECT_EQ(l.processes.size(), 1u);
  unlink(path.c_str());
  rmdir(dir.c_str());
}

// --owner: in a directory every user can write, only the owner's files are read; another
// user's file or directory and every symlink (to a file, a directory, "/") are skipped with
// a note.
TEST(HostileLog, OwnerPolicyReadsOnlyTheOwnersFilesAndFollowsNoLink) {
  ASSERT_EQ(geteuid(), 0u) << "this test gives files to uid 65534 and needs root";
  char tmpl[] = "/tmp/fg_owner.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, other = dir + "/planted", mine = dir + "/forkguard.h.3.1.jsonl";
  auto write = [](const std::string& path, int pid) {
    std::ofstream f(path);
    f << R"({"schema":"forkguard.event/1","event":"fork","pid":)" << pid
      << R"(,"ts_ns":1,"verdict":"hazard","job":"42"})"
      << "\n";
  };
  write(mine, 3);
  write(dir + "/forkguard.h.4.1.jsonl", 4);
  ASSERT_EQ(chown((dir + "/forkguard.h.4.1.jsonl").c_str(), 65534, 65534), 0);
  ASSERT_EQ(mkdir(other.c_str(), 0755), 0);
  write(other + "/forkguard.h.5.1.jsonl", 5);
  ASSERT_EQ(chown(other.c_str(), 65534, 65534), 0);
  ASSERT_EQ(symlink("/", (dir + "/root").c_str()), 0);
  ASSERT_EQ(symlink(mine.c_str(), (dir + "/again.jsonl").c_str()), 0);

  LogSet l;
  ReadLogs({dir}, &l, 1, ReadPolicy{geteuid()});
  for (const auto& n : l.notes) printf("note: %s: %s\n", n.where.c_str(), n.text.c_str());
  ASSERT_EQ(l.processes.size(), 1u);
  EXPECT_EQ(l.processes[0].pid, 3);
  EXPECT_TRUE(HasNote(l, "forkguard.h.4.1.jsonl", "owned by uid 65534"));
  EXPECT_TRUE(HasNote(l, "/planted", "owned by uid 65534"));
  EXPECT_TRUE(HasNote(l, "/root", "a symbolic link, not followed"));
  EXPECT_TRUE(HasNote(l, "/again.jsonl", "a symbolic link, not followed"));

  LogSet top;  // a symlink named on the command line is not followed either
  ReadLogs({dir + "/root"}, &top, 1, ReadPolicy{geteuid()});
  EXPECT_TRUE(top.processes.empty());
  EXPECT_TRUE(HasNote(top, "/root", "a symbolic link, not followed"));

  LogSet all;  // without a policy: every file, links followed (the loop to / too: 3 levels)
  ReadLogs({dir + "/forkguard.h.4.1.jsonl", other}, &all, 1);
  EXPECT_EQ(all.processes.size(), 2u);
  std::string cmd = "rm -rf " + dir;
  ASSERT_EQ(system(cmd.c_str()), 0);
}

// A suppression file or baseline named on the command line is read only as a regular file:
// a FIFO there is refused at once, not waited on.
TEST(HostileLog, InputFilesAreRegularFilesOnly) {
  char tmpl[] = "/tmp/fg_input.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string fifo = std::string(tmpl) + "/supp", file = std::string(tmpl) + "/ok";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(file) << "hello\n";
  std::string text, error;
  EXPECT_FALSE(ReadInputFile(fifo, kMaxInputBytes, &text, &error));
  EXPECT_EQ(error, "not a regular file");
  EXPECT_FALSE(ReadInputFile(file, 3, &text, &error));
  EXPECT_TRUE(ReadInputFile(file, kMaxInputBytes, &text, &error)) << error;
  EXPECT_EQ(text, "hello\n");
  unlink(fifo.c_str());
  unlink(file.c_str());
  rmdir(tmpl);
}

TEST(Json, ParsesAndRejects) {
  Json v;
  std::string err;
  ASSERT_TRUE(ParseJson(R"({"a":[1,-2.5e3,"\u00e9\ud83d\ude00",true,null],"b":{}})", &v, &err));
  EXPECT_EQ((*FindMember(v, "a"))[1].get<double>(), -2500);
  EXPECT_EQ((*FindMember(v, "a"))[2].get_ref<const std::string&>(), "\xc3\xa9\xf0\x9f\x98\x80");
  for (const char* bad :
       {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "tru", "\"\x01\"", "{} x", "\"\\x\"", "-", "1e"})
    EXPECT_FALSE(ParseJson(bad, &v, &err)) << bad;
  EXPECT_EQ(JsonQuote("a\"b\\\n\xff"), "\"a\\\"b\\\\\\u000a\\ufffd\"");
}

// Strings that are not UTF-8 (a log file's name, a name in a log) are written as valid JSON:
// each byte of an invalid sequence (overlong, surrogate, past U+10FFFF, cut short) as U+FFFD.
TEST(Json, InvalidUtf8IsWrittenAsReplacementCharacters) {
  for (std::string bad : {"\xff", "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\xe2\x82",
                          "\xf5\x80\x80", "ok \xce\xbb"}) {
    std::string text = WriteJson(Json(bad), -1);
    Json back;
    std::string err;
    EXPECT_TRUE(ParseJson(text, &back, &err)) << text << ": " << err;
  }
  EXPECT_EQ(WriteJson(Json("\xed\xa0\x80"), -1), "\"\\ufffd\\ufffd\\ufffd\"");
  EXPECT_EQ(WriteJson(Json("\xce\xbb"), -1), "\"\xce\xbb\"");
}

TEST(Json, AddressesParse) {
  Json s = Json("0x7f12");
  EXPECT_EQ(ParseAddress(&s), 0x7f12u);
  Json bad = Json("0x");
  EXPECT_FALSE(ParseAddress(&bad));
  Json big = Json("0x1ffffffffffffffff");
  EXPECT_FALSE(ParseAddress(&big));
}

}  // namespace
}  // namespace forkguard::cli
