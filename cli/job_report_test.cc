// Must-show (2): a generated job of 64 processes (8 ranks x 8 processes, 6 of
// the ranks forking their workers after RDMA init at the same call site) is
// reported as one finding "×42" with the right process, rank and host counts;
// children, deaths, the process tree and symbolization are checked too.
#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>

#include "cli/event_log.h"
#include "cli/format.h"
#include "cli/job_report.h"
#include "cli/report_json.h"
#include "cli/report_markdown.h"
#include "cli/report_phrases.h"
#include "cli/report_text.h"
#include "cli/symbolizer.h"
#include "cli/testdata/job_generator.h"
#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using testdata::JobSpec;
using testdata::JobTruth;
using testdata::WriteJob;

struct Generated {
  JobTruth truth;
  JobReport report;
};

Generated Generate(const JobSpec& spec, bool symbolize = true) {
  std::string dir = forkguard::test_support::MakeTempDir("job");
  Generated g;
  g.truth = WriteJob(dir, spec);
  LogSet logs;
  ReadLogs({dir}, &logs);
  Symbolizer sym;
  g.report = BuildJobReport(logs, symbolize ? &sym : nullptr);
  return g;
}

TEST(JobReport, SixtyFourProcessesGroupTheWorkerSite) {
  Generated g = Generate(JobSpec{});
  const JobReport& r = g.report;
  ASSERT_EQ(g.truth.processes, 64);
  EXPECT_EQ(static_cast<int>(r.processes.size()), 64);
  EXPECT_EQ(static_cast<int>(r.hosts.size()), 2);
  EXPECT_EQ(r.ranks.size(), 8u);
  EXPECT_EQ(r.hazard_forks, g.truth.hazard_forks);
  EXPECT_TRUE(r.notes.empty()) << r.notes[0].where << ": " << r.notes[0].text;

  ASSERT_EQ(static_cast<int>(r.hazard_groups.size()), g.truth.hazard_sites);
  const ForkGroup& worker = r.hazard_groups[0];
  // 6 ranks x 7 workers, but rank 1 forked a helper from elsewhere instead of its 7th.
  EXPECT_EQ(worker.count, g.truth.worker_site_hazard);
  EXPECT_EQ(worker.count, 41);
  EXPECT_EQ(static_cast<int>(worker.processes.size()), g.truth.worker_site_hazard_processes);
  EXPECT_EQ(worker.ranks, (std::set<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(worker.hosts, (std::set<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(worker.reasons.at("child-segv"), 41);
  EXPECT_EQ(worker.reasons.at("inherited-rdma"), 41);
  EXPECT_EQ(worker.children_forked, 41);
  EXPECT_EQ(worker.children_segv, g.truth.segv);
  EXPECT_EQ(worker.init_call, "ibv_open_device");
  EXPECT_EQ(worker.init_device, "rxe0");
  EXPECT_EQ(worker.min_age_ms, 101);
  EXPECT_EQ(worker.max_age_ms, 107);
  EXPECT_EQ(worker.dontfork_ranges, 1);

  const ForkGroup& helper = r.hazard_groups[1];
  EXPECT_EQ(helper.count, g.truth.helper_hazard);
  EXPECT_EQ(helper.children_exec, g.truth.exec_children);
  EXPECT_EQ(helper.ranks, (std::set<int64_t>{1}));

  ASSERT_EQ(r.clean_groups.size(), 1u);
  EXPECT_EQ(r.clean_groups[0].count, g.truth.worker_site_clean);  // 2 ranks x 7
  EXPECT_EQ(r.clean_groups[0].ranks, (std::set<int64_t>{6, 7}));

  ASSERT_EQ(static_cast<int>(r.deaths.size()), g.truth.segv);
  for (const auto& d : r.deaths) {
    EXPECT_EQ(d.group, 0);
    ASSERT_GE(d.parent, 0);
    EXPECT_EQ(r.processes[d.parent].pid, 1000);
    EXPECT_EQ(d.signal, 11);
  }
  // Process tree: every worker hangs under its rank process.
  int roots = 0;
  for (const auto& p : r.processes) {
    if (p.parent < 0) {
      ++roots;
      continue;
    }
    EXPECT_EQ(r.processes[p.parent].pid, p.ppid);
    EXPECT_EQ(r.processes[p.parent].rank, p.rank);
  }
  EXPECT_EQ(roots, 8);
  // Identical RDMA init sites merge too: 8 ranks, one site.
  ASSERT_EQ(r.inits.size(), 1u);
  EXPECT_EQ(r.inits[0].count, 8);
}

TEST(JobReport, SymbolizesObjOffToFunctionAndLine) {
  Generated g = Generate(JobSpec{});
  ASSERT_FALSE(g.report.hazard_groups.empty());
  const Stack& s = g.report.hazard_groups[0].stack;
  ASSERT_GE(s.size(), 3u);
  EXPECT_EQ(s[1].func, "forkguard::cli::testdata::StartWorkerPool()");
  EXPECT_NE(s[1].src_file.find("cli/testdata/job_generator.cc"), std::string::npos)
      << s[1].src_file;
  EXPECT_GT(s[1].src_line, 0);
  // The Python frame is what the author of a Python program knows.
  EXPECT_EQ(SiteLabel(s), "train.py:42");
  // Without symbolization the frame keeps only what the log had.
  Generated raw = Generate(JobSpec{}, /*symbolize=*/false);
  EXPECT_TRUE(raw.report.hazard_groups[0].stack[1].func.empty());
}

TEST(JobReport, TextReadsLikeADiagnosticAndFits100Columns) {
  Generated g = Generate(JobSpec{});
  std::string text = RenderText(g.report);
  EXPECT_NE(text.find("train.py:42 in make_loader: hazard: fork() after RDMA initialization ×41 in "
                      "6 processes (ranks 0-5,\n    2 hosts)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("64 processes (8 ranks) on 2 hosts, 56 forks: 42 hazardous at 2 call "
                      "sites, 14 clean"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("RDMA was first initialized at train.py:17 in setup_transport, by "
                      "ibv_open_device on rxe0,\n      101 ms–107 ms before the fork"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("41 children forked, 3 killed by SIGSEGV"), std::string::npos) << text;
  EXPECT_NE(text.find("help: start the workers before RDMA init"), std::string::npos);
  // The child's registering stack is addresses only (the shim writes it from a signal
  // handler, without its stack table or module records: formats/EVENT_LOG.md).
  EXPECT_NE(text.find("note: the range was registered by ibv_reg_mr (in the parent) at:\n"
                      "      #0 ?? 0x"),
            std::string::npos)
      << text;
  // A Python process's native frames are folded; --native shows them, symbolized.
  EXPECT_EQ(text.find("StartWorkerPool() at "), std::string::npos) << text;
  std::string native = RenderText(g.report, 100, /*show_native=*/true);
  EXPECT_NE(native.find("StartWorkerPool() at "), std::string::npos) << native;
  std::istringstream in(text + native);
  for (std::string line; std::getline(in, line);) EXPECT_LE(DisplayWidth(line), 100u) << line;
}

TEST(JobReport, JsonAndMarkdownCarryTheSameCounts) {
  Generated g = Generate(JobSpec{});
  Json j = ReportToJson(g.report);
  EXPECT_EQ(GetString(j, "schema"), "forkguard.report/1");
  const Json* findings = FindMember(j, "findings");
  ASSERT_TRUE(findings && findings->is_array());
  ASSERT_EQ(findings->size(), 2u);
  const Json& f0 = (*findings)[0];
  EXPECT_EQ(GetInt(f0, "count", -1), 41);
  EXPECT_EQ(GetInt(f0, "process_count", -1), 6);
  EXPECT_EQ(GetString(f0, "location"), "train.py:42");
  EXPECT_EQ(GetInt(*FindMember(j, "summary"), "processes", -1), 64);
  EXPECT_EQ(FindMember(j, "child_deaths")->size(), 3u);
  // Round trip through our own parser: the writer emits valid JSON.
  Json back;
  std::string err;
  ASSERT_TRUE(ParseJson(RenderJson(g.report), &back, &err)) << err;

  std::string md = RenderMarkdown(g.report);
  EXPECT_NE(md.find("| 1 | `train.py:42 in make_loader` | ×41 | 6 | ranks 0-5 | child-segv, "
                    "inherited-rdma | 3 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("<details><summary>stacks</summary>"), std::string::npos);
}

TEST(JobReport, JunkInTheLogsIsNotedAndEverythingElseCounted) {
  JobSpec spec;
  spec.junk = true;
  Generated g = Generate(spec);
  const JobReport& r = g.report;
  EXPECT_EQ(static_cast<int>(r.processes.size()), 64);
  ASSERT_FALSE(r.hazard_groups.empty());
  EXPECT_EQ(r.hazard_groups[0].count, 41);
  bool truncated = false, future = false;
  for (const auto& n : r.notes) {
    if (n.text.find("truncated last line") != std::string::npos &&
        n.where.find("forkguard.node-a.1001.") != std::string::npos &&
        n.where.substr(n.where.size() - 2) == ":4")  // after the header, start, segv
      truncated = true;
    if (n.text.find("\"forkguard.event/3\"") != std::string::npos) future = true;
  }
  EXPECT_TRUE(truncated);
  EXPECT_TRUE(future);
  EXPECT_EQ(r.lines_skipped, 2);
}

TEST(JobReport, BigJobStaysOneFindingAndAShortText) {
  JobSpec spec;
  spec.ranks = 256;
  spec.procs_per_rank = 3;
  spec.hazard_ranks = 200;
  Generated g = Generate(spec, /*symbolize=*/false);
  ASSERT_EQ(static_cast<int>(g.report.processes.size()), g.truth.processes);
  ASSERT_FALSE(g.report.hazard_groups.empty());
  EXPECT_EQ(g.report.hazard_groups[0].count, g.truth.worker_site_hazard);
  EXPECT_EQ(static_cast<int>(g.report.hazard_groups[0].processes.size()),
            g.truth.worker_site_hazard_processes);
  EXPECT_EQ(FormatRanks(g.report.hazard_groups[0].ranks), "ranks 0-199");
  std::string text = RenderText(g.report);
  EXPECT_NE(text.find("more process trees (--format json lists every process)"), std::string::npos);
  EXPECT_LT(std::count(text.begin(), text.end(), '\n'), 200) << text;
}

TEST(JobReport, FormatRanksCompressesRuns) {
  EXPECT_EQ(FormatRanks({3}), "rank 3");
  EXPECT_EQ(FormatRanks({0, 1, 2, 3, 8, 10, 11}), "ranks 0-3, 8, 10, 11");
  EXPECT_EQ(FormatRanks({0, 1, 2, 3, 4, 5, 8, 10, 11, 12}), "ranks 0-5, 8, 10-12");
  EXPECT_EQ(FormatRanks({}), "");
  std::set<int64_t> all;
  for (int64_t i = 0; i < 1024; ++i) all.insert(i);
  EXPECT_EQ(FormatRanks(all), "ranks 0-1023");
  // Past the runs it names, the rest is counted.
  std::set<int64_t> odd;
  for (int64_t i = 7; i < 7 + 2 * 1024; i += 2) odd.insert(i);
  EXPECT_EQ(FormatRanks(odd, 1), "rank 7 and 1023 more");
  EXPECT_EQ(FormatRanks(odd), "ranks 7, 9, 11, 13, 15, 17 and 1018 more");
  EXPECT_EQ(FormatRanks({0, 1, 2, 9, 20, 21, 22}, 2), "ranks 0-2, 9 and 3 more");
}

// Two jobs on the same hosts with the same pids, logs in one directory: reported apart.
TEST(JobReport, TwoJobsInOneDirectoryStayApart) {
  std::string dir = forkguard::test_support::MakeTempDir("twojobs");
  JobSpec a;
  a.job = "4242";
  JobSpec b;
  b.job = "tr-1";
  b.ranks = 4;
  b.procs_per_rank = 3;
  b.hazard_ranks = 4;
  b.segv_children = 0;
  b.helper_fork = false;
  b.start_offset_ns = 3600LL * 1000000000;  // an hour later
  JobTruth ta = WriteJob(dir, a);
  JobTruth tb = WriteJob(dir, b);
  LogSet logs;
  ReadLogs({dir}, &logs);
  EXPECT_EQ(JobIds(logs), (std::vector<std::string>{"4242", "tr-1"}));
  EXPECT_EQ(static_cast<int>(logs.processes.size()), ta.processes + tb.processes)
      << "same host and pid in two jobs merged into one process";

  JobReport r = BuildJobReport(logs, nullptr);
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(r.jobs[0].job, "4242");
  EXPECT_EQ(r.jobs[0].processes, ta.processes);
  EXPECT_EQ(r.jobs[0].hazard_forks, ta.hazard_forks);
  EXPECT_EQ(r.jobs[0].hazard_sites, ta.hazard_sites);
  EXPECT_EQ(FormatRanks(r.jobs[0].ranks), "ranks 0-7");
  EXPECT_EQ(r.jobs[1].job, "tr-1");
  EXPECT_EQ(r.jobs[1].processes, tb.processes);
  EXPECT_EQ(r.jobs[1].hazard_forks, tb.hazard_forks);
  EXPECT_EQ(FormatRanks(r.jobs[1].ranks), "ranks 0-3");
  // The same call site in both jobs: two findings, one per job, never one of both.
  EXPECT_EQ(static_cast<int>(r.hazard_groups.size()), ta.hazard_sites + tb.hazard_sites);
  for (const ForkGroup& g : r.hazard_groups) {
    for (int p : g.processes) EXPECT_EQ(r.processes[p].job, g.job) << g.key;
  }
  for (const InitSite& s : r.inits) {
    for (int p : s.processes) EXPECT_EQ(r.processes[p].job, s.job);
  }
  // Every child hangs under its own job's parent.
  for (const ProcessNode& p : r.processes) {
    if (p.parent >= 0) {
      EXPECT_EQ(r.processes[p.parent].job, p.job) << p.pid;
    }
  }

  std::vector<LogSet> parts = SplitByJob(logs);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(static_cast<int>(parts[0].processes.size()), ta.processes);
  EXPECT_EQ(static_cast<int>(parts[1].processes.size()), tb.processes);
  EXPECT_EQ(parts[0].lines_used + parts[1].lines_used, logs.lines_used);
  EXPECT_TRUE(parts[1].notes.empty());

  JobReport only = BuildJobReport(parts[1], nullptr);
  EXPECT_EQ(static_cast<int>(only.processes.size()), tb.processes);
  ASSERT_EQ(only.jobs.size(), 1u);
  ASSERT_FALSE(only.hazard_groups.empty());
  EXPECT_EQ(only.hazard_groups[0].count, tb.worker_site_hazard);
  EXPECT_NE(RenderText(only).find("forkguard: job tr-1: " + std::to_string(tb.processes) +
                                  " processes (4 ranks) on 2 hosts"),
            std::string::npos)
      << RenderText(only);
  Json j = ReportToJson(r);
  const Json* jobs = FindMember(*FindMember(j, "summary"), "jobs");
  ASSERT_TRUE(jobs != nullptr && jobs->is_array());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ(GetString((*jobs)[1], "job"), "tr-1");
  EXPECT_EQ(GetString((*jobs)[1], "ranks_text"), "ranks 0-3");
  EXPECT_EQ(GetString((*FindMember(j, "findings"))[0], "job"), "4242");
}

// Ranks whose DataLoader forks every epoch: every count exact (the same findings as a job
// whose every fork is listed), the forks listed bounded per process and said to be a sample.
TEST(JobReport, ForksEveryEpochAreCountedExactlyAndSampled) {
  JobSpec spec;
  spec.forks_per_process = 100;
  Generated g = Generate(spec, /*symbolize=*/false);
  const JobReport& r = g.report;
  EXPECT_EQ(static_cast<int>(r.processes.size()), g.truth.processes);
  EXPECT_EQ(r.hazard_forks, g.truth.hazard_forks);
  // Every process makes 100 forks (a rank's workers and helper included) but the helper,
  // which execs.
  EXPECT_EQ(r.forks, 63 * 100);
  EXPECT_EQ(static_cast<int>(r.hazard_groups.size()), g.truth.hazard_sites);
  EXPECT_EQ(static_cast<int>(r.deaths.size()), g.truth.segv);
  int64_t epoch = 0;
  for (const auto& grp : r.hazard_groups) {
    if (grp.site == "0xa11ce5") {
      EXPECT_EQ(grp.count, g.truth.worker_site_hazard);
      EXPECT_EQ(grp.children_segv, g.truth.segv);  // the children with logs are linked
    }
    if (grp.site == "0xe90c4") epoch += grp.count;
  }
  for (const auto& grp : r.clean_groups)
    if (grp.site == "0xe90c4") epoch += grp.count;
  EXPECT_EQ(epoch, g.truth.epoch_forks);
  size_t per = ProcessLog::kForkSampleHead + ProcessLog::kForkSampleTail;
  EXPECT_EQ(r.fork_list.size(), 63 * per);
  for (const auto& p : r.processes)
    EXPECT_EQ(p.forks_listed, std::min(p.forks, static_cast<int>(per)));
  EXPECT_EQ(r.fork_children, r.forks);
  std::string text = RenderText(r);
  EXPECT_NE(text.find("(every fork is counted per call site; 1008 of 6300 are listed one by one"),
            std::string::npos)
      << text;
  Json j;
  std::string error;
  ASSERT_TRUE(ParseJson(RenderJson(r), &j, &error)) << error;
  EXPECT_EQ(FindMember(j, "forks")->size(), 63 * per);
  const Json* sampled = FindMember(*FindMember(j, "summary"), "forks_sampled");
  ASSERT_NE(sampled, nullptr);
  EXPECT_EQ(GetInt(*sampled, "listed", -1), static_cast<int64_t>(63 * per));
  EXPECT_NE(text.find("train.py:120 in train_epoch: hazard: fork() after RDMA initialization"),
            std::string::npos)
      << text;
  EXPECT_NE(FindMember((*FindMember(j, "processes"))[0], "forks_sampled"), nullptr);
  // RenderJson writes the forks array itself: the same text as the whole tree's.
  EXPECT_EQ(RenderJson(r), WriteJson(ReportToJson(r)) + "\n");
}

// Logs written before the job field: one job without an id, as before.
TEST(JobReport, LogsWithoutJobFieldAreOneJob) {
  Generated g = Generate(JobSpec(), /*symbolize=*/false);
  ASSERT_EQ(g.report.jobs.size(), 1u);
  EXPECT_EQ(g.report.jobs[0].job, "");
  EXPECT_EQ(RenderText(g.report).find("job "), std::string::npos);
}

// The shim chose the fix from the facts at the fork (its "fix" field): the report says the
// same words as the live message (formats/fix_text.cc), not the generic advice.
TEST(JobReport, FixComesFromTheShimsRule) {
  auto line = [](const char* fix, const char* extra) {
    return std::string(
               "{\"schema\":\"forkguard.event/1\",\"event\":\"fork\",\"ts_ns\":2,\"pid\":7,"
               "\"ppid\":1,\"tid\":7,\"host\":\"n0\",\"prog\":\"a.out\",\"rank\":0,\"seq\":1,"
               "\"verdict\":\"hazard\",\"reasons\":[\"inherited-rdma\"],\"action\":\"proceeded\","
               "\"site\":\"0x1\",\"reported\":true,\"stack\":[],\"init\":null,\"ranges\":[],"
               "\"via\":\"fork\",\"fix\":\"") +
           fix + "\"" + extra + "}\n";
  };
  LogSet mpi;
  ParseLogText("mpi.jsonl", line("mpi-init", ""), &mpi);
  JobReport r = BuildJobReport(mpi, nullptr);
  ASSERT_EQ(r.hazard_groups.size(), 1u);
  EXPECT_NE(FixFor(r.hazard_groups[0]).find("fork the workers before MPI_Init"), std::string::npos)
      << FixFor(r.hazard_groups[0]);
  EXPECT_NE(RenderText(r).find("fork the workers before MPI_Init"), std::string::npos);
  LogSet ucx;
  ParseLogText("ucx.jsonl",
               line("ucx-fork-init",
                    ",\"fork_support\":{\"on\":true,\"by\":\"libuct_ib.so.0\",\"rdma_core\":44}"),
               &ucx);
  JobReport u = BuildJobReport(ucx, nullptr);
  ASSERT_EQ(u.hazard_groups.size(), 1u);
  std::string fix = FixFor(u.hazard_groups[0]);
  EXPECT_NE(fix.find("UCX_IB_FORK_INIT=n"), std::string::npos) << fix;
  EXPECT_NE(fix.find("libuct_ib.so.0"), std::string::npos) << fix;
  // A rule this reader does not know falls back to the advice from the stack.
  LogSet future;
  ParseLogText("future.jsonl", line("some-future-rule", ""), &future);
  JobReport f = BuildJobReport(future, nullptr);
  ASSERT_EQ(f.hazard_groups.size(), 1u);
  EXPECT_NE(FixFor(f.hazard_groups[0]).find("before RDMA init"), std::string::npos);
}

}  // namespace
}  // namespace forkguard::cli
