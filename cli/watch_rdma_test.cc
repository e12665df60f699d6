// `forkguard watch` in the guest, as root, on the real device: the three programs the
// preload cannot see (a static binary, an `env -i` child, a set-user-ID program) each
// register memory on rxe0 and fork; the watcher's verdict for each is the one the shim gives
// the same program dynamically linked. With --enforce memory the kernel refuses the fork
// whose range is MADV_DONTFORK (child-segv) and lets through the one over memory this kernel
// copies, and a fork before any RDMA.
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/json.h"
#include "cli/testdata/watch_rdma_support.h"
#include "gtest/gtest.h"
#include "tests/support/rdma_device.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using test_support::ProgramResult;
using test_support::Runfile;
using test_support::RunProgram;

// Every line of the watcher's logs in `dir` against docs/event-schema.json (Debian's
// python3-jsonschema): "" when all validate, else the errors.
std::string SchemaErrors(const std::string& dir) {
  static constexpr char kCheck[] = R"(
import glob, json, sys
import jsonschema
v = jsonschema.Draft202012Validator(json.load(open(sys.argv[1])))
n = bad = 0
for f in sorted(glob.glob(sys.argv[2] + "/forkguard-watch.*.jsonl")):
    for i, line in enumerate(open(f, "rb").read().splitlines()):
        n += 1
        for e in list(v.iter_errors(json.loads(line)))[:2]:
            bad += 1
            print(f"{f}:{i + 1}: {list(e.path)}: {e.message[:200]}")
if n == 0:
    print("no watcher log lines in " + sys.argv[2])
)";
  ProgramResult r =
      RunProgram({"/usr/bin/python3", "-c", kCheck, Runfile("docs/event-schema.json"), dir},
                 test_support::RunOptions{});
  if (r.status != 0) return r.Describe();
  return r.out;
}

// A copy of the dynamic program that is set-user-ID root, for a run as nobody.
std::string SetuidProg() {
  // In /tmp: nobody must reach it (the test's own directory may be private).
  char dir_template[] = "/tmp/forkguard-suid.XXXXXX";
  std::string dir = mkdtemp(dir_template);
  chmod(dir.c_str(), 0755);
  std::string path = dir + "/hazard_suid";
  std::filesystem::copy_file(DynamicProg(), path);
  EXPECT_EQ(chown(path.c_str(), 0, 0), 0);
  EXPECT_EQ(chmod(path.c_str(), 04755), 0);
  return path;
}

TEST(WatchRdma, JudgesTheProgramsThePreloadCannotSeeAsTheShimDoes) {
  auto dev = test_support::RequireRdmaDevice();
  ASSERT_EQ(geteuid(), 0u) << "the watcher loads BPF programs: the guest runs tests as root";
  // Fork support on: rdma-core marks the registration MADV_DONTFORK (child-segv).
  std::string shim_logs;
  std::vector<std::string> shim = ShimReasons(dev.name, "1", &shim_logs);
  ASSERT_EQ(shim, std::vector<std::string>{"proceeded:child-segv,inherited-rdma"});
  // Fork support off: this kernel copies the pinned anonymous pages (inherited-rdma only).
  std::vector<std::string> shim_off = ShimReasons(dev.name, "");
  ASSERT_EQ(shim_off, std::vector<std::string>{"proceeded:inherited-rdma"});

  Watcher w;
  ASSERT_TRUE(w.ready()) << w.startup_error();
  std::string setuid_prog = SetuidProg();
  // The static binary, with and without fork support.
  ProgramResult s1 = RunProgram({StaticProg()}, {"RXE_DEV=" + dev.name, "RDMAV_FORK_SAFE=1"});
  EXPECT_EQ(s1.status, 0) << s1.Describe();
  ProgramResult s2 = RunProgram({StaticProg()}, {"RXE_DEV=" + dev.name, "RDMAV_FORK_SAFE="});
  EXPECT_EQ(s2.status, 0) << s2.Describe();
  // An `env -i` child of a program under the shim: it runs without the preload.
  ProgramResult e1 = RunProgram({Forkguard(), "run", "--no-audit", "--", "/usr/bin/env", "-i",
                                 "RXE_DEV=" + dev.name, "RDMAV_FORK_SAFE=1", DynamicProg()},
                                {"FORKGUARD_SHIM_DIR="});
  EXPECT_EQ(e1.status, 0) << e1.Describe();
  // The set-user-ID program run by nobody: the loader ignores LD_PRELOAD (AT_SECURE).
  test_support::RunOptions as_nobody =
      test_support::WithoutShimEnv({"RXE_DEV=" + dev.name, "RDMAV_FORK_SAFE=1",
                                    "LD_PRELOAD=" + Runfile("shim/libforkguard.so")});
  as_nobody.run_as = true;
  as_nobody.uid = 65534;
  as_nobody.gid = 65534;
  ProgramResult u1 = RunProgram({setuid_prog}, as_nobody);
  EXPECT_EQ(u1.status, 0) << u1.Describe();
  // forkguard ps shows the running watcher, and stops showing it once it has stopped.
  ProgramResult ps =
      RunProgram({Forkguard(), "ps", "--format", "json"}, test_support::RunOptions{});
  Json psj;
  std::string pserr;
  ASSERT_TRUE(ParseJson(ps.out, &psj, &pserr)) << pserr << ps.Describe();
  const Json* watcher = FindMember(psj, "watcher");
  ASSERT_TRUE(watcher != nullptr && watcher->is_object()) << ps.out;
  EXPECT_EQ(GetString(*watcher, "enforce"), "off") << ps.out;
  EXPECT_EQ(GetString(*watcher, "log"), w.dir()) << ps.out;
  ProgramResult stop = w.Stop();
  ProgramResult ps_after =
      RunProgram({Forkguard(), "ps", "--format", "json"}, test_support::RunOptions{});
  ASSERT_TRUE(ParseJson(ps_after.out, &psj, &pserr)) << pserr << ps_after.Describe();
  EXPECT_TRUE(FindMember(psj, "watcher") != nullptr && FindMember(psj, "watcher")->is_null())
      << ps_after.out;
  EXPECT_EQ(stop.status, 0) << stop.Describe();
  EXPECT_NE(stop.err.find("0 records lost"), std::string::npos) << stop.err;

  // The hook that judged: BPF LSM's task_alloc where "bpf" is an active LSM, else fmod_ret.
  std::string lsm = test_support::ReadFileOrEmpty("/sys/kernel/security/lsm");
  bool bpf_lsm = ("," + lsm.substr(0, lsm.find('\n')) + ",").find(",bpf,") != std::string::npos;
  EXPECT_NE(
      stop.err.find(bpf_lsm ? "(hook BPF LSM task_alloc" : "(hook fmod_ret security_task_alloc"),
      std::string::npos)
      << "active LSMs: " << lsm << stop.err;
  printf("active LSMs: %s\n%s", lsm.substr(0, lsm.find('\n')).c_str(), stop.err.c_str());
  std::vector<Json> events = Events(w.dir(), "forkguard-watch.");
  std::vector<std::string> statics = ForkReasons(events, "hazard_prog_sta");
  EXPECT_EQ(statics, (std::vector<std::string>{shim[0], shim_off[0]})) << stop.err;
  EXPECT_EQ(ForkReasons(events, "hazard_prog"), shim) << stop.err;
  EXPECT_EQ(ForkReasons(events, "hazard_suid"), shim) << stop.err;
  // One report over the shim's logs and the watcher's: the processes of both, the static
  // program's refused-or-not forks among them.
  ProgramResult report =
      RunProgram({Forkguard(), "report", shim_logs, w.dir()}, test_support::RunOptions{});
  EXPECT_EQ(report.status, 0) << report.Describe();
  EXPECT_NE(report.out.find(" hazard_prog_sta "), std::string::npos) << report.out;
  EXPECT_NE(report.out.find(" hazard_suid "), std::string::npos) << report.out;
  EXPECT_NE(report.out.find(" hazard_prog "), std::string::npos) << report.out;
  // Each header says who wrote it, and every line is one the event log's schema allows.
  for (const Json& e : events) {
    if (GetString(e, "event") == "header") {
      EXPECT_EQ(GetString(e, "source"), "watcher");
    }
  }
  EXPECT_EQ(SchemaErrors(w.dir()), "");
}

TEST(WatchRdma, EnforceMemoryRefusesTheForkThatKillsTheChildOnly) {
  auto dev = test_support::RequireRdmaDevice();
  Watcher w("memory");
  ASSERT_TRUE(w.ready()) << w.startup_error();
  // MADV_DONTFORK memory (fork support on): refused, fork() returns -1 with EPERM.
  ProgramResult refused = RunProgram({StaticProg()}, {"RXE_DEV=" + dev.name, "RDMAV_FORK_SAFE=1"});
  EXPECT_EQ(refused.status, 0) << refused.Describe();
  EXPECT_NE(refused.out.find("fork failed: Operation not permitted"), std::string::npos)
      << refused.Describe();
  // Memory this kernel copies at fork: the fork proceeds.
  ProgramResult copied = RunProgram({StaticProg()}, {"RXE_DEV=" + dev.name, "RDMAV_FORK_SAFE="});
  EXPECT_NE(copied.out.find("child: exit 0"), std::string::npos) << copied.Describe();
  // Forks before any RDMA, and a shell's posix_spawn/vfork: untouched.
  ProgramResult sh =
      RunProgram({"/bin/sh", "-c", "/bin/true && (exit 3); echo $?"}, test_support::RunOptions{});
  EXPECT_EQ(sh.out, "3\n") << sh.Describe();
  ProgramResult stop = w.Stop();
  EXPECT_EQ(stop.status, 0) << stop.Describe();
  std::vector<Json> events = Events(w.dir(), "forkguard-watch.");
  EXPECT_EQ(
      ForkReasons(events, "hazard_prog_sta"),
      (std::vector<std::string>{"refused:child-segv,inherited-rdma", "proceeded:inherited-rdma"}))
      << stop.err;
  EXPECT_EQ(SchemaErrors(w.dir()), "");
}

// The shim's suppressions: a hazardous fork the shim in the process lets through (an entry
// of its FORKGUARD_SUPPRESSIONS matches) is marked for the watcher, whose --enforce memory lets
// it through too and logs shim_suppressed; without the entry the same fork is refused.
TEST(WatchRdma, EnforceLetsThroughWhatTheShimSuppresses) {
  auto dev = test_support::RequireRdmaDevice();
  std::string dir = test_support::MakeTempDir("suppressions");
  std::string file = dir + "/forkguard.supp";
  std::ofstream(file) << "kind=* frame=lib:hazard_prog program=hazard_prog\n";
  Watcher w("memory");
  ASSERT_TRUE(w.ready()) << w.startup_error();
  std::vector<std::string> env = {"RXE_DEV=" + dev.name, "RDMAV_FORK_SAFE=1",
                                  "IBV_FORK_SAFE=", "FORKGUARD_SHIM_DIR="};
  std::vector<std::string> run = {Forkguard(),   "run", "--no-audit", "--log",
                                  dir + "/logs", "--",  DynamicProg()};
  ProgramResult refused = RunProgram(run, env);
  EXPECT_NE(refused.out.find("fork failed: Operation not permitted"), std::string::npos)
      << refused.Describe();
  env.push_back("FORKGUARD_SUPPRESSIONS=" + file);
  ProgramResult suppressed = RunProgram(run, env);
  EXPECT_EQ(suppressed.out.find("fork failed"), std::string::npos) << suppressed.Describe();
  EXPECT_NE(suppressed.out.find("child: "), std::string::npos) << suppressed.Describe();
  EXPECT_EQ(suppressed.err.find("fork after RDMA init"), std::string::npos)
      << "suppressed: the shim says nothing\n"
      << suppressed.Describe();
  ProgramResult stop = w.Stop();
  EXPECT_EQ(stop.status, 0) << stop.Describe();
  std::vector<Json> events = Events(w.dir(), "forkguard-watch.");
  EXPECT_EQ(ForkReasons(events, "hazard_prog"),
            (std::vector<std::string>{"refused:child-segv,inherited-rdma",
                                      "proceeded:child-segv,inherited-rdma"}))
      << stop.err;
  // The fork let through carries the shim's mark; the refused one does not.
  int marked_proceeded = 0, marked_refused = 0;
  for (const Json& e : events) {
    if (GetString(e, "event") != "fork" || !GetBool(e, "shim_suppressed", false)) continue;
    (GetString(e, "action") == "proceeded" ? marked_proceeded : marked_refused)++;
  }
  EXPECT_EQ(marked_proceeded, 1);
  EXPECT_EQ(marked_refused, 0);
  // The shim's own log says which entry.
  std::vector<Json> shim = Events(dir + "/logs", "forkguard.");
  int entries = 0;
  for (const Json& e : shim)
    if (GetString(e, "suppressed") == "kind=* frame=lib:hazard_prog program=hazard_prog") ++entries;
  EXPECT_EQ(entries, 1);
  EXPECT_EQ(SchemaErrors(w.dir()), "");
}

// Linux's version as major * 100 + minor (5.10: 510).
int KernelVersion() {
  utsname u{};
  uname(&u);
  int major = 0, minor = 0;
  sscanf(u.release, "%d.%d", &major, &minor);
  return major * 100 + minor;
}

// --persist: the programs stay pinned after the watcher stops, and refuse as before, until
// --unpin; a watcher started meanwhile says so and does not load a second set. Kernels that
// attach kprobes as perf events (before 5.15) cannot pin them: the watcher says so and does
// not start.
TEST(WatchRdma, PersistKeepsEnforcingUntilUnpinned) {
  auto dev = test_support::RequireRdmaDevice();
  // Whatever fails below, nothing stays pinned for the next test.
  struct UnpinAtEnd {
    ~UnpinAtEnd() { RunProgram({Forkguard(), "watch", "--unpin"}, test_support::RunOptions{}); }
  } unpin_at_end;
  Watcher w("memory", /*persist=*/true);
  if (KernelVersion() < 515) {
    EXPECT_FALSE(w.ready());
    EXPECT_NE(w.startup_error().find("cannot be pinned"), std::string::npos) << w.startup_error();
    EXPECT_EQ(access("/sys/fs/bpf/forkguard-watch", F_OK), -1) << "nothing stays pinned";
    return;
  }
  ASSERT_TRUE(w.ready()) << w.startup_error();
  ProgramResult stop = w.Stop();
  EXPECT_EQ(stop.status, 0) << stop.Describe();
  EXPECT_NE(stop.err.find("enforcement memory stays, pinned in /sys/fs/bpf/forkguard-watch"),
            std::string::npos)
      << stop.err;
  // No watcher runs, and the kernel still refuses the fork over MADV_DONTFORK memory.
  ProgramResult refused = RunProgram({StaticProg()}, {"RXE_DEV=" + dev.name, "RDMAV_FORK_SAFE=1"});
  EXPECT_NE(refused.out.find("fork failed: Operation not permitted"), std::string::npos)
      << refused.Describe();
  // `ps` says what stays pinned, with no watcher running, as root and as nobody.
  for (std::string user : {"root", "nobody"}) {
    std::vector<std::string> ps = {Forkguard(), "ps"};
    if (user != "root")
      ps.insert(ps.begin(),
                {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
    ProgramResult shown = RunProgram(ps, test_support::RunOptions{});
    EXPECT_NE(shown.out.find("no forkguard watch runs, but "), std::string::npos)
        << user << ": " << shown.Describe();
    EXPECT_NE(shown.out.find("--persist` are pinned in /sys/fs/bpf/forkguard-watch, enforce "
                             "memory"),
              std::string::npos)
        << user << ": " << shown.Describe();
  }
  Watcher second;
  EXPECT_FALSE(second.ready());
  EXPECT_NE(second.startup_error().find("--unpin"), std::string::npos) << second.startup_error();
  ProgramResult unpin = RunProgram({Forkguard(), "watch", "--unpin"}, test_support::RunOptions{});
  EXPECT_EQ(unpin.status, 0) << unpin.Describe();
  EXPECT_NE(unpin.err.find("pinned programs removed: the kernel no longer judges forks"),
            std::string::npos)
      << unpin.err;
  ProgramResult after = RunProgram({StaticProg()}, {"RXE_DEV=" + dev.name, "RDMAV_FORK_SAFE=1"});
  EXPECT_EQ(after.out.find("fork failed"), std::string::npos) << after.Describe();
  ProgramResult ps = RunProgram({Forkguard(), "ps"}, test_support::RunOptions{});
  EXPECT_EQ(ps.out.find("are pinned in"), std::string::npos) << ps.Describe();
  EXPECT_NE(after.out.find("child: "), std::string::npos) << after.Describe();
}

// 16 threads forking while 4 register: every fork and registration is in the log, or the
// records that are not were counted, logged and printed as lost.
TEST(WatchRdma, AForkStormLosesNothingSilently) {
  auto dev = test_support::RequireRdmaDevice();
  Watcher w;
  ASSERT_TRUE(w.ready()) << w.startup_error();
  ProgramResult storm = RunProgram({Runfile("cli/testdata/fork_storm"), "50", "200"},
                                   {"RXE_DEV=" + dev.name, "RDMAV_FORK_SAFE="});
  ASSERT_EQ(storm.status, 0) << storm.Describe();
  long forks = -1, regs = -1;
  ASSERT_EQ(sscanf(storm.out.c_str(), "forks %ld regs %ld", &forks, &regs), 2) << storm.out;
  EXPECT_EQ(forks, 16 * 50);
  EXPECT_EQ(regs, 4 * 200);
  ProgramResult stop = w.Stop();
  EXPECT_EQ(stop.status, 0) << stop.Describe();
  std::vector<Json> events = Events(w.dir(), "forkguard-watch.");
  int64_t fork_events = 0, reg_events = 0, lost = 0;
  for (const Json& e : events) {
    std::string type = GetString(e, "event");
    if (type == "note") lost += GetInt(e, "lost", 0);
    if (GetInt(e, "_pid", -1) != storm.pid) continue;
    if (type == "fork") ++fork_events;
    if (type == "mr_register") ++reg_events;
  }
  // What was lost was said: on stderr and in the watcher's own log.
  EXPECT_NE(stop.err.find(std::to_string(lost) + " records lost"), std::string::npos) << stop.err;
  EXPECT_EQ(fork_events + reg_events + lost >= forks + regs, true)
      << fork_events << " forks and " << reg_events << " registrations logged, " << lost
      << " records lost, of " << forks << " forks and " << regs << " registrations";
  EXPECT_LE(fork_events, forks);
  EXPECT_LE(reg_events, regs);
  printf("storm: %ld forks, %ld registrations; logged %lld forks, %lld registrations; %lld lost\n",
         forks, regs, static_cast<long long>(fork_events), static_cast<long long>(reg_events),
         static_cast<long long>(lost));
}

// A registration released in another process than its owner's: the process that inherited the
// device files and closed them last (here a child the parent left them to). The owner's
// table loses the range (its next fork carries none) and its log has the release.
TEST(WatchRdma, ARangeReleasedInAnotherProcessLeavesItsOwnersTable) {
  auto dev = test_support::RequireRdmaDevice();
  Watcher w;
  ASSERT_TRUE(w.ready()) << w.startup_error();
  ProgramResult r =
      RunProgram({StaticProg(), "--release-in-child"}, {"RXE_DEV=" + dev.name, "RDMAV_FORK_SAFE="});
  EXPECT_EQ(r.status, 0) << r.Describe();
  EXPECT_NE(r.out.find("holder: exit 0"), std::string::npos) << r.Describe();
  EXPECT_NE(r.out.find("child: exit 0"), std::string::npos) << r.Describe();
  ProgramResult stop = w.Stop();
  EXPECT_EQ(stop.status, 0) << stop.Describe();
  std::vector<Json> events = Events(w.dir(), "forkguard-watch.");
  std::vector<std::pair<int64_t, size_t>> fork_ranges;  // (time, ranges) of the owner's forks
  int64_t released = 0;
  for (const Json& e : events) {
    if (GetInt(e, "_pid", -1) != r.pid) continue;
    std::string type = GetString(e, "event");
    if (type == "fork") {
      const Json* ranges = FindMember(e, "ranges");
      ASSERT_TRUE(ranges != nullptr && ranges->is_array()) << WriteJson(e, -1);
      fork_ranges.emplace_back(GetInt(e, "_t", 0), ranges->size());
    }
    if (type == "mr_deregister" && GetInt(e, "len", 0) == 1 << 16) ++released;
  }
  std::sort(fork_ranges.begin(), fork_ranges.end());
  ASSERT_EQ(fork_ranges.size(), 2u) << stop.err;
  EXPECT_EQ(fork_ranges[0].second, 1u) << "the fork that made the holder: the live MR";
  EXPECT_EQ(fork_ranges[1].second, 0u) << "the fork after the holder released the MR";
  EXPECT_EQ(released, 1) << stop.err;
}

}  // namespace
}  // namespace forkguard::cli
