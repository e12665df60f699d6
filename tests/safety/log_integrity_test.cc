// Log integrity: 64 processes x 1,004 events each (4 threads per process
// writing concurrently) into ONE FORKGUARD_LOG directory at the same time. Every
// line must parse as JSON, none torn, counts exact per process and per event type,
// seq contiguous per process, files 0600. A registration at a site the file already has a
// line for is counted (mr_counts), not written: registrations (lines + counts) and
// deregistrations exact. And processes SIGKILLed at any instant while their threads log:
// every line written is whole, nothing but the lines in flight is lost, a stack record
// always precedes its first use (formats/EVENT_LOG.md), and the counts lost are only those not yet
// gone out with a line, never more than were made.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "tests/safety/safety_util.h"

namespace forkguard::safety {
namespace {

using cli::GetInt;
using cli::GetString;

constexpr int kProcesses = 64;
constexpr int kThreads = 4;
constexpr int kIters = 83;
// process_start, fork_init, rdma_init + rdma_call (open), rdma_call x2 (alloc/dealloc PD),
// 3 per thread iteration (alloc PD, a registration, dealloc PD: a tracked MR's deregistration
// is counted), rdma_call (close), process_exit. A registration is an mr_register line the
// first time at its site, else counted in an mr_counts line that goes out with the next line.
constexpr int kEventsPerProcess = 1 + 1 + 2 + 2 + 3 * kThreads * kIters + 1 + 1;
static_assert(kEventsPerProcess == 1004);
constexpr int kRegistrations = kThreads * kIters;

// stress_prog's run options: under the shim with the stub libibverbs, logging into log_dir.
RunOptions StressOptions(const std::string& log_dir, int timeout_s) {
  RunOptions opt = SafetyRunOptions();
  opt.env = {"LD_PRELOAD=" + Preload(), "FORKGUARD_LOG=" + log_dir,
             "LD_LIBRARY_PATH=" + StubLibDir()};
  opt.timeout_s = timeout_s;
  return opt;
}

struct Counted {
  int64_t n = 0;
  int64_t bytes = 0;
  int64_t deregs = 0;
};

// The sums of the mr_counts lines among `lines`.
Counted SumCounts(const std::vector<const LogLine*>& lines) {
  Counted c;
  for (const LogLine* l : lines) {
    if (l->Event() != "mr_counts") continue;
    c.deregs += GetInt(l->json, "deregs", 0);
    const cli::Json* sites = cli::FindMember(l->json, "sites");
    if (sites == nullptr) continue;
    for (const cli::Json& site : *sites) {
      c.n += GetInt(site, "n", 0);
      c.bytes += GetInt(site, "bytes", 0);
    }
  }
  return c;
}

TEST(LogIntegrity, SixtyFourProcessesThousandEventsEachNothingTornOrLost) {
  std::string log_dir = MakeDir("integrity-log", false);
  std::string out_dir = MakeDir("integrity-out", false);
  RunOptions opt = StressOptions(log_dir, 300);
  std::string prog = Program("tests/safety/stress_prog");
  std::vector<StartedProgram> started;
  for (int i = 0; i < kProcesses; ++i) {
    started.push_back(StartProgramToFiles(
        {prog, "spam", std::to_string(kThreads), std::to_string(kIters), "0", "stub0"}, opt,
        out_dir + "/p" + std::to_string(i) + ".out", out_dir + "/p" + std::to_string(i) + ".err"));
  }
  std::set<int64_t> pids;
  for (int i = 0; i < kProcesses; ++i) {
    ProgramResult r = WaitForFiles(started[i], 300);
    ASSERT_TRUE(r.Exited(0)) << "process " << i << ": " << r.Describe();
    EXPECT_EQ(r.err, "") << "process " << i;
    pids.insert(r.pid);
  }

  LogDir log = ReadLogDir(log_dir);
  EXPECT_TRUE(log.problems.empty()) << ::testing::PrintToString(log.problems);
  EXPECT_TRUE(log.other_files.empty()) << ::testing::PrintToString(log.other_files);
  EXPECT_EQ(log.files.size(), static_cast<size_t>(kProcesses));
  for (const auto& [name, mode] : log.file_modes) EXPECT_EQ(mode, 0600u) << name;

  std::map<std::string, std::vector<const LogLine*>> by_file;
  for (const LogLine& l : log.lines) by_file[l.file].push_back(&l);
  std::set<int64_t> logged_pids;
  for (const auto& [file, lines] : by_file) {
    std::vector<int64_t> seqs;
    std::map<std::string, int> counts;
    std::set<int64_t> file_pids;
    for (const LogLine* l : lines) {
      seqs.push_back(l->Int("seq"));
      counts[l->Event()]++;
      file_pids.insert(l->Int("pid"));
      EXPECT_EQ(GetString(l->json, "schema"), "forkguard.event/2") << file;
    }
    ASSERT_EQ(file_pids.size(), 1u) << file << ": lines of several processes in one file";
    int64_t pid = *file_pids.begin();
    logged_pids.insert(pid);
    EXPECT_NE(file.find("." + std::to_string(pid) + "."), std::string::npos) << file;
    std::sort(seqs.begin(), seqs.end());
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (seqs[i] != static_cast<int64_t>(i)) {
        ADD_FAILURE() << file << ": seq " << i << " missing or duplicated";
        break;
      }
    }
    // Registrations: the first at the site a line (one per thread at most, when they race to
    // it), the rest counted; every one exactly once.
    int registered_lines = counts["mr_register"];
    EXPECT_GE(registered_lines, 1) << file;
    EXPECT_LE(registered_lines, kThreads) << file;
    Counted c = SumCounts(lines);
    EXPECT_EQ(registered_lines + c.n, kRegistrations) << file;
    EXPECT_EQ(4096 * (registered_lines + c.n), 4096 * registered_lines + c.bytes) << file;
    EXPECT_EQ(c.deregs, kRegistrations) << file;
    EXPECT_EQ(static_cast<int>(lines.size()),
              kEventsPerProcess - kRegistrations + registered_lines + counts["mr_counts"])
        << file;
    counts.erase("mr_register");
    counts.erase("mr_counts");
    std::map<std::string, int> want = {{"process_start", 1},
                                       {"fork_init", 1},
                                       {"rdma_init", 1},
                                       {"rdma_call", 1 + 2 + 2 * kThreads * kIters + 1},
                                       {"process_exit", 1}};
    EXPECT_EQ(counts, want) << file;
  }
  EXPECT_EQ(logged_pids, pids);
  RemoveTree(log_dir);
  RemoveTree(out_dir);
}

// One write(2) per line (O_APPEND; a line with the counts that go out with it: one writev):
// a process killed at any instant leaves whole lines and loses at most the lines each thread
// had not written yet, and of the registrations only the counts that had not gone out with a
// line: never one counted twice, never more lost than the threads can have had in flight.
TEST(LogIntegrity, KilledAtAnyInstantLosesOnlyTheLinesInFlight) {
  std::string log_dir = MakeDir("integrity-kill-log", false);
  std::string out_dir = MakeDir("integrity-kill-out", false);
  RunOptions opt = StressOptions(log_dir, 120);
  std::string prog = Program("tests/safety/stress_prog");
  std::mt19937 rng(12345);
  constexpr int kKilled = 16;
  std::map<int64_t, int64_t> made;  // pid -> registrations returned (the program's tally)
  std::map<int64_t, std::string> errs;
  for (int i = 0; i < kKilled; ++i) {
    std::string tally = out_dir + "/tally" + std::to_string(i);
    StartedProgram s = StartProgramToFiles(
        {prog, "spam", std::to_string(kThreads), "100000", "0", "stub0", tally}, opt,
        out_dir + "/k" + std::to_string(i) + ".out", out_dir + "/k" + std::to_string(i) + ".err");
    // Once its threads are logging (its file holds more than the header and the start:
    // under load a process can take a while to get there), at a random instant of it: the
    // threads write a line every ~2 us here.
    std::string mark = "." + std::to_string(s.pid) + ".";
    for (int waited = 0; waited < 20000; ++waited) {
      off_t size = 0;
      if (DIR* d = opendir(log_dir.c_str())) {
        while (dirent* e = readdir(d)) {
          struct stat st;
          if (strstr(e->d_name, mark.c_str()) != nullptr &&
              stat((log_dir + "/" + e->d_name).c_str(), &st) == 0)
            size = st.st_size;
        }
        closedir(d);
      }
      if (size >= 16 * 1024) break;
      usleep(1000);
    }
    usleep(1000 + static_cast<useconds_t>(rng() % 30000));
    ASSERT_EQ(kill(s.pid, SIGKILL), 0);
    ProgramResult r = WaitForFiles(s, 60);
    ASSERT_FALSE(r.timed_out);
    std::string words = ReadFileOrEmpty(tally);
    ASSERT_EQ(words.size(), sizeof(uint64_t) * kThreads) << tally;
    int64_t sum = 0;
    for (int t = 0; t < kThreads; ++t) {
      uint64_t v = 0;
      memcpy(&v, words.data() + sizeof(v) * t, sizeof(v));
      sum += static_cast<int64_t>(v);
    }
    made[s.pid] = sum;
    errs[s.pid] = r.err;
  }
  LogDir log = ReadLogDir(log_dir, /*allow_truncated_last=*/true);
  EXPECT_TRUE(log.problems.empty()) << ::testing::PrintToString(log.problems);
  EXPECT_EQ(log.files.size(), static_cast<size_t>(kKilled));
  std::map<std::string, std::vector<int64_t>> seqs;
  std::map<std::string, std::vector<const LogLine*>> by_file;
  for (const LogLine& l : log.lines) {
    if (cli::FindMember(l.json, "seq") != nullptr) seqs[l.file].push_back(l.Int("seq"));
    by_file[l.file].push_back(&l);
  }
  for (auto& [file, s] : seqs) {
    std::sort(s.begin(), s.end());
    EXPECT_EQ(std::adjacent_find(s.begin(), s.end()), s.end()) << file << ": a duplicated seq";
    // Lost: seq values below the highest one that are missing. At most two lines in flight
    // per thread (the spam threads and the main thread): an event and the mr_counts line
    // that goes out with it.
    int64_t missing = s.back() + 1 - static_cast<int64_t>(s.size());
    EXPECT_LE(missing, 2 * (kThreads + 1)) << file;
    EXPECT_GT(s.size(), 10u) << file << ": killed before it logged much; raise the delay";
  }
  for (auto& [file, lines] : by_file) {
    int64_t pid = lines.front()->Int("pid");
    ASSERT_TRUE(made.count(pid)) << file;
    int64_t logged = SumCounts(lines).n;
    std::map<std::string, int> kinds;
    for (const LogLine* l : lines) {
      logged += l->Event() == "mr_register";
      kinds[l->Event()]++;
    }
    std::string sample;
    for (const LogLine* l : lines) {
      if (l->Event() == "mr_counts" && sample.size() < 3000)
        sample += cli::WriteJson(l->json, -1) + "\n";
    }
    SCOPED_TRACE(::testing::PrintToString(kinds) + "\nstderr: " + errs[pid] + "\n" + sample);
    // A registration is counted inside ibv_reg_mr, before the program's tally: at most one
    // per thread counted and not yet tallied.
    EXPECT_LE(logged, made[pid] + kThreads) << file;
    // Not yet gone out at the kill: each thread's latest count (its own next line takes it),
    // and the counts taken by a line each thread may have had in flight (at most one count
    // per thread each).
    EXPECT_LE(made[pid] - logged, kThreads + kThreads * kThreads)
        << file << ": " << made[pid] << " made, " << logged << " logged";
    EXPECT_GT(logged, 10) << file;
    if (::testing::Test::HasFailure()) {
      if (const char* keep = getenv("TEST_UNDECLARED_OUTPUTS_DIR"); keep != nullptr)
        CopyInto(log_dir + "/" + file, keep);
    }
  }
  RemoveTree(log_dir);
  RemoveTree(out_dir);
}

}  // namespace
}  // namespace forkguard::safety
