// Issue 8, log integrity: 64 processes x 1,004 events each (4 threads per process
// writing concurrently) into ONE FORKGUARD_LOG directory at the same time. Every
// line must parse as JSON, none torn, counts exact per process and per event type,
// seq contiguous 0..1003 per process, files 0600. And processes SIGKILLed at any instant
// while their threads log: every line written is whole, nothing but the lines in flight
// is lost, a stack record always precedes its first use (EVENT_LOG.md).
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

constexpr int kProcesses = 64;
constexpr int kThreads = 4;
constexpr int kIters = 83;
// process_start, fork_init, rdma_init + rdma_call (open), rdma_call x2 (alloc/dealloc PD),
// 3 per thread iteration (alloc PD, mr_register, dealloc PD: a tracked MR's deregistration is
// not logged), rdma_call (close), process_exit.
constexpr int kEventsPerProcess = 1 + 1 + 2 + 2 + 3 * kThreads * kIters + 1 + 1;
static_assert(kEventsPerProcess == 1004);

TEST(LogIntegrity, SixtyFourProcessesThousandEventsEachNothingTornOrLost) {
  std::string log_dir = MakeDir("integrity-log", false);
  std::string out_dir = MakeDir("integrity-out", false);
  RunOptions opt;
  opt.env = {"LD_PRELOAD=" + Preload(), "FORKGUARD_LOG=" + log_dir,
             "LD_LIBRARY_PATH=" + StubLibDir()};
  opt.watchdog_seconds = 300;
  std::string prog = Program("tests/safety/stress_prog");
  std::vector<Started> started;
  for (int i = 0; i < kProcesses; ++i) {
    started.push_back(
        Start({prog, "spam", std::to_string(kThreads), std::to_string(kIters), "0", "stub0"}, opt,
              "p" + std::to_string(i), out_dir));
  }
  std::set<int64_t> pids;
  for (int i = 0; i < kProcesses; ++i) {
    safety::Run r = Wait(started[i], 300);
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
    ASSERT_EQ(lines.size(), static_cast<size_t>(kEventsPerProcess)) << file;
    std::vector<int64_t> seqs;
    std::map<std::string, int> counts;
    std::set<int64_t> file_pids;
    for (const LogLine* l : lines) {
      seqs.push_back(l->Int("seq"));
      counts[l->Event()]++;
      file_pids.insert(l->Int("pid"));
      EXPECT_EQ(l->json.GetString("schema"), "forkguard.event/2") << file;
    }
    ASSERT_EQ(file_pids.size(), 1u) << file << ": lines of several processes in one file";
    int64_t pid = *file_pids.begin();
    logged_pids.insert(pid);
    EXPECT_NE(file.find("." + std::to_string(pid) + "."), std::string::npos) << file;
    std::sort(seqs.begin(), seqs.end());
    for (int i = 0; i < kEventsPerProcess; ++i) {
      if (seqs[i] != i) {
        ADD_FAILURE() << file << ": seq " << i << " missing or duplicated";
        break;
      }
    }
    std::map<std::string, int> want = {{"process_start", 1},
                                       {"fork_init", 1},
                                       {"rdma_init", 1},
                                       {"rdma_call", 1 + 2 + 2 * kThreads * kIters + 1},
                                       {"mr_register", kThreads * kIters},
                                       {"process_exit", 1}};
    EXPECT_EQ(counts, want) << file;
  }
  EXPECT_EQ(logged_pids, pids);
  RemoveTree(log_dir);
  RemoveTree(out_dir);
}

// One write(2) per line (O_APPEND): a process killed at any instant leaves whole lines and
// loses at most the line each thread had not written yet.
TEST(LogIntegrity, KilledAtAnyInstantLosesOnlyTheLinesInFlight) {
  std::string log_dir = MakeDir("integrity-kill-log", false);
  std::string out_dir = MakeDir("integrity-kill-out", false);
  RunOptions opt;
  opt.env = {"LD_PRELOAD=" + Preload(), "FORKGUARD_LOG=" + log_dir,
             "LD_LIBRARY_PATH=" + StubLibDir()};
  opt.watchdog_seconds = 120;
  std::string prog = Program("tests/safety/stress_prog");
  std::mt19937 rng(12345);
  constexpr int kKilled = 16;
  for (int i = 0; i < kKilled; ++i) {
    Started s = Start({prog, "spam", std::to_string(kThreads), "100000", "0", "stub0"}, opt,
                      "k" + std::to_string(i), out_dir);
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
    safety::Run r = Wait(s, 60);
    ASSERT_FALSE(r.timed_out);
  }
  LogDir log = ReadLogDir(log_dir, /*allow_truncated_last=*/true);
  EXPECT_TRUE(log.problems.empty()) << ::testing::PrintToString(log.problems);
  EXPECT_EQ(log.files.size(), static_cast<size_t>(kKilled));
  std::map<std::string, std::vector<int64_t>> seqs;
  for (const LogLine& l : log.lines) {
    if (l.json.Find("seq") != nullptr) seqs[l.file].push_back(l.Int("seq"));
  }
  for (auto& [file, s] : seqs) {
    std::sort(s.begin(), s.end());
    EXPECT_EQ(std::adjacent_find(s.begin(), s.end()), s.end()) << file << ": a duplicated seq";
    // Lost: seq values below the highest one that are missing. At most one line in flight
    // per thread (the spam threads and the main thread).
    int64_t missing = s.back() + 1 - static_cast<int64_t>(s.size());
    EXPECT_LE(missing, kThreads + 1) << file;
    EXPECT_GT(s.size(), 10u) << file << ": killed before it logged much; raise the delay";
  }
  RemoveTree(log_dir);
  RemoveTree(out_dir);
}

}  // namespace
}  // namespace forkguard::safety
