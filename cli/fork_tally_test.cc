// Forks tallied per site (cli/fork_tally.h): exact counts, a bounded sample, children paired
// with their forks, fix mode's forks.
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/event_log.h"
#include "cli/job_report.h"
#include "gtest/gtest.h"

namespace forkguard::cli {
namespace {

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

}  // namespace
}  // namespace forkguard::cli
