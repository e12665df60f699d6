// Events folded into processes (cli/process_fold.h): a process's identity, events, stacks and
// registration counts, from /1 and /2 logs and from the real shim's logs.
#include <string>

#include "cli/event_log.h"
#include "cli/job_report.h"
#include "cli/report_text.h"
#include "cli/testdata/log_checks.h"
#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using testdata::Corpus;
using testdata::FormatsOf;
using testdata::HasNote;
using testdata::kV2Process;

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
  const auto* init = e.As<RdmaInit>();
  ASSERT_NE(init, nullptr);
  const Stack& st = p.StackAt(init->stack);
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[0].obj, "/lib/x.so");
  EXPECT_EQ(st[0].off, 4660u);
  EXPECT_EQ(st[0].build_id, "abcd");
  EXPECT_EQ(st[1].ip, 99u);
  EXPECT_TRUE(st[1].obj.empty());
  EXPECT_TRUE(st[2].python);
  EXPECT_EQ(st[2].py_func, "main");
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

}  // namespace
}  // namespace forkguard::cli
