#include "tests/safety/stress_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace forkguard::safety {
namespace {

using cli::FindMember;
using cli::GetBool;
using cli::GetInt;
using cli::GetString;

struct Rec {
  std::string phase;
  long tid = 0;
  long child = 0;
};

const cli::Json* Get(const cli::Json& v, const char* key) {
  const cli::Json* p = FindMember(v, key);
  static const cli::Json kNull;
  return p != nullptr ? p : &kNull;
}

bool HasString(const cli::Json& arr, const std::string& s) {
  for (const cli::Json& v : arr) {
    if (v.is_string() && v.get_ref<const std::string&>() == s) return true;
  }
  return false;
}

}  // namespace

void CheckStress(int n, const std::string& dev, const std::vector<std::string>& extra_env,
                 int watchdog_seconds) {
  std::string log_dir = MakeDir("stress-log", false);
  RunOptions opt = SafetyRunOptions();
  opt.env = extra_env;
  opt.env.push_back("LD_PRELOAD=" + Preload());
  opt.env.push_back("FORKGUARD_LOG=" + log_dir);
  opt.env.push_back("RDMAV_FORK_SAFE=1");  // registered ranges are MADV_DONTFORK: child-segv too
  opt.timeout_s = watchdog_seconds;
  ProgramResult run =
      RunProgram({Program("tests/safety/stress_prog"), "stress", std::to_string(n), dev}, opt);
  ASSERT_FALSE(run.timed_out) << "deadlock or livelock: " << run.Describe();
  ASSERT_TRUE(run.Exited(0)) << run.Describe();

  // What the program did.
  std::vector<Rec> recs;
  uint64_t pinned_addr = 0, pinned_len = 0;
  bool done = false;
  {
    std::istringstream in(run.out);
    std::string word;
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream l(line);
      l >> word;
      if (word == "fork") {
        Rec r;
        l >> r.phase >> r.tid >> r.child;
        recs.push_back(r);
      } else if (word == "pinned") {
        std::string a;
        l >> a >> pinned_len;
        pinned_addr = std::stoull(a, nullptr, 16);
      } else if (word == "done") {
        done = true;
      }
    }
  }
  ASSERT_TRUE(done) << run.Describe();
  ASSERT_EQ(recs.size(), static_cast<size_t>(3 * 16 * n));
  ASSERT_NE(pinned_addr, 0u);

  // What the shim logged.
  LogDir log = ReadLogDir(log_dir);
  EXPECT_TRUE(log.problems.empty()) << "torn or invalid lines:\n"
                                    << ::testing::PrintToString(log.problems);
  std::map<std::string, std::vector<int64_t>> seqs;
  for (const LogLine& l : log.lines) seqs[l.file].push_back(l.Int("seq"));
  for (auto& [file, s] : seqs) {
    std::sort(s.begin(), s.end());
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != static_cast<int64_t>(i)) {
        ADD_FAILURE() << file << ": seq not contiguous from 0 at index " << i << " (" << s[i]
                      << ")";
        break;
      }
    }
  }
  for (const auto& [name, mode] : log.file_modes) {
    EXPECT_EQ(mode, 0600u) << name;
  }

  // Parent's fork / fork_child events per thread, in seq order.
  std::map<long, std::vector<const LogLine*>> forks, children;
  std::vector<LogLine> parent_lines;
  for (const LogLine& l : log.lines) {
    if (l.Int("pid") == run.pid) parent_lines.push_back(l);
  }
  std::sort(parent_lines.begin(), parent_lines.end(),
            [](const LogLine& a, const LogLine& b) { return a.Int("seq") < b.Int("seq"); });
  for (const LogLine& l : parent_lines) {
    if (l.Event() == "fork") forks[l.Int("tid")].push_back(&l);
    if (l.Event() == "fork_child") children[l.Int("tid")].push_back(&l);
  }
  size_t fork_events = 0;
  for (auto& [tid, v] : forks) fork_events += v.size();
  EXPECT_EQ(fork_events, recs.size()) << "every fork must be logged exactly once";

  std::map<long, std::vector<Rec>> by_tid;
  for (const Rec& r : recs) by_tid[r.tid].push_back(r);
  // With multiplicity: under load the kernel may hand a pid out twice in one run (the pid
  // space wraps while other jobs fork), which a set would count as a lost line.
  std::multiset<long> child_pids_logged, child_pids_made;
  for (const Rec& r : recs) child_pids_made.insert(r.child);
  int bad = 0;
  for (auto& [tid, rs] : by_tid) {
    const auto& fv = forks[tid];
    const auto& cv = children[tid];
    if (fv.size() != rs.size() || cv.size() != rs.size()) {
      ADD_FAILURE() << "thread " << tid << ": " << rs.size() << " forks made, " << fv.size()
                    << " fork events, " << cv.size() << " fork_child events";
      continue;
    }
    for (size_t k = 0; k < rs.size() && bad < 20; ++k) {
      const cli::Json& f = fv[k]->json;
      const cli::Json& c = cv[k]->json;
      std::string where = "thread " + std::to_string(tid) + " fork #" + std::to_string(k) +
                          " (phase " + rs[k].phase + ", child " + std::to_string(rs[k].child) +
                          "): ";
      if (GetInt(c, "child_pid", -1) != rs[k].child) {
        ADD_FAILURE() << where << "fork_child says " << GetInt(c, "child_pid", -1);
        ++bad;
      }
      if (!(fv[k]->Int("seq") < cv[k]->Int("seq")) ||
          (k + 1 < rs.size() && !(cv[k]->Int("seq") < fv[k + 1]->Int("seq")))) {
        ADD_FAILURE() << where << "fork / fork_child events out of order";
        ++bad;
      }
      child_pids_logged.insert(GetInt(c, "child_pid", -1));
      std::string verdict = GetString(f, "verdict");
      const cli::Json& live = *Get(f, "live");
      if (rs[k].phase == "pinned") {
        bool pinned_listed = false;
        bool pinned_dontfork = false;
        for (const cli::Json& r : *Get(f, "ranges")) {
          if (static_cast<uint64_t>(GetInt(r, "addr", 0)) == pinned_addr &&
              static_cast<uint64_t>(GetInt(r, "len", 0)) == pinned_len) {
            pinned_listed = true;
            pinned_dontfork = GetBool(r, "dontfork", false);
          }
        }
        bool ok = verdict == "hazard" && pinned_listed && pinned_dontfork &&
                  HasString(*Get(f, "reasons"), "child-segv") &&
                  HasString(*Get(f, "reasons"), "inherited-rdma") &&
                  GetInt(live, "contexts", -1) == 1 && GetInt(live, "pds", -1) >= 1 &&
                  GetInt(live, "mrs", -1) >= 1 && GetString(f, "action") == "proceeded";
        if (!ok) {
          ADD_FAILURE() << where << "with the pinned MR live the verdict must be hazard "
                        << "(child-segv, inherited-rdma) listing the pinned range as dontfork; got "
                        << cli::WriteJson(f, -1).substr(0, 1500);
          ++bad;
        }
      } else {
        bool ok = verdict == "clean" && Get(f, "ranges")->empty() &&
                  GetInt(live, "contexts", -1) == 0 && GetInt(live, "mrs", -1) == 0 &&
                  GetString(f, "action") == "proceeded";
        if (!ok) {
          ADD_FAILURE() << where << "no RDMA resource can be live: the verdict must be clean; got "
                        << cli::WriteJson(f, -1).substr(0, 1500);
          ++bad;
        }
      }
    }
  }
  EXPECT_TRUE(child_pids_logged == child_pids_made) << "child pids logged more or less than once";
  RemoveTree(log_dir);
}

}  // namespace forkguard::safety
