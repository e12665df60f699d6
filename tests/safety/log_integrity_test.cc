// Issue 8, log integrity: 64 processes x 1,004 events each (4 threads per process
// writing concurrently) into ONE FORKGUARD_LOG directory at the same time. Every
// line must parse as JSON, none torn, counts exact per process and per event type,
// seq contiguous 0..1003 per process, files 0600.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
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

}  // namespace
}  // namespace forkguard::safety
