#include "tests/shim/shim_run.h"

#include <libgen.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/support/runfiles.h"
#include "tests/support/shim_lines.h"

namespace forkguard::test_support {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// A private copy of a runfile, made once per test process. Other engineers
// rebuild bazel-bin while a test runs (the Soft-RoCE guest sees the host's
// files live), so the shim and the programs must not change under a test.
std::string StableCopy(const std::string& runfile, const std::string& dir) {
  static std::map<std::string, std::string> copies;
  auto it = copies.find(runfile);
  if (it != copies.end()) return it->second;
  std::string src = Runfile(runfile);
  std::string dst = dir + "/" + runfile.substr(runfile.rfind('/') + 1);
  std::ifstream in(src, std::ios::binary);
  std::ofstream out(dst, std::ios::binary);
  out << in.rdbuf();
  out.close();
  if (!in || !out || chmod(dst.c_str(), 0755) != 0) {
    ADD_FAILURE() << "cannot copy " << src << " to " << dst;
    return src;
  }
  copies[runfile] = dst;
  return dst;
}

const std::string& CopyDir() {
  static const std::string dir = MakeTempDir("forkguard-bin");
  return dir;
}

std::string StubLibDir() {
  static const std::string dir = MakeTempDir("forkguard-stub-lib");
  StableCopy("tests/stub_ibverbs/lib/libibverbs.so.1", dir);
  StableCopy("tests/stub_ibverbs/lib/librdmacm.so.1", dir);
  return dir;
}

std::vector<std::string> ProgramEnv(const std::vector<std::string>& env, Verbs verbs) {
  std::vector<std::string> all = env;
  if (verbs == Verbs::kStub) all.push_back("LD_LIBRARY_PATH=" + StubLibDir());
  return all;
}

std::string Describe(const ShimRun& run) {
  std::string s = run.proc.Describe() + "\n--- event log (" + run.log_dir + ") ---\n";
  for (const Event& e : run.log.events) {
    s += e.file + ": " + e.name() + " pid=" + std::to_string(e.json.Int("pid"));
    if (e.name() == "fork") {
      s += " verdict=" + e.json.String("verdict") + " action=" + e.json.String("action") +
           " reasons=";
      for (const Json& r : e.json["reasons"].array) s += r.str + ",";
    } else if (e.json.Has("call")) {
      s += " call=" + e.json.String("call");
    }
    s += "\n";
  }
  for (const std::string& p : run.log.problems) s += "PROBLEM: " + p + "\n";
  return s;
}

}  // namespace

ShimRun RunUnderShim(const std::string& program, const std::vector<std::string>& args,
                     const std::string& mode, const std::vector<std::string>& env, Verbs verbs) {
  ShimRun run;
  run.log_dir = MakeTempDir("forkguard-log");
  std::vector<std::string> argv = {StableCopy(program, CopyDir())};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> e = ProgramEnv(env, verbs);
  e.push_back("LD_PRELOAD=" + ShimLibrary());
  e.push_back("FORKGUARD_LOG=" + run.log_dir);
  if (!mode.empty()) e.push_back("FORKGUARD_MODE=" + mode);
  run.proc = RunProgram(argv, WithoutShimEnv(e));
  run.report = ParseReport(run.proc.out);
  run.log = ReadEventLog(run.log_dir);
  return run;
}

std::string ShimLibrary() { return StableCopy("shim/libforkguard.so", CopyDir()); }

ProgramResult RunWithoutShim(const std::string& program, const std::vector<std::string>& args,
                             const std::vector<std::string>& env, Verbs verbs) {
  std::vector<std::string> argv = {StableCopy(program, CopyDir())};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv, WithoutShimEnv(ProgramEnv(env, verbs)));
}

bool HazardMessage::HasReason(const std::string& r) const {
  return std::find(reasons.begin(), reasons.end(), r) != reasons.end();
}

HazardMessage ParseHazardMessage(const std::string& err) {
  HazardMessage m;
  static const std::regex kHeader(R"(^forkguard: fork after RDMA init in pid (\d+) \()");
  static const std::regex kVerdict(R"(^verdict: hazard \(([^)]*)\))");
  enum class Section { kNone, kInit, kFork };
  Section section = Section::kNone;
  for (const std::string& raw : Lines(err)) {
    std::string line = Trim(test_support::StripShimLinePrefix(raw));
    std::smatch sm;
    if (std::regex_search(line, sm, kHeader)) {
      if (m.count++ == 0) {
        m.found = true;
        m.pid = std::stol(sm[1]);
      }
      section = Section::kNone;
      continue;
    }
    if (m.count != 1) continue;  // only the first message is cut into parts
    if (std::regex_search(line, sm, kVerdict)) {
      m.verdict_line = true;
      std::stringstream ss(sm[1].str());
      std::string r;
      while (std::getline(ss, r, ',')) m.reasons.push_back(Trim(r));
      section = Section::kNone;
      continue;
    }
    if (line.rfind("child-segv:", 0) == 0 || line.rfind("parent-corruption:", 0) == 0 ||
        line.rfind("inherited-rdma:", 0) == 0) {
      m.reason_lines.push_back(line);
      section = Section::kNone;
    }
    if (line.find("RDMA first initialized") != std::string::npos) section = Section::kInit;
    if (line.rfind("fork called at:", 0) == 0) section = Section::kFork;
    if (line.rfind("fix:", 0) == 0) {
      m.has_fix = true;
      section = Section::kNone;
    }
    if (line.find("mode: error - the fork fails with EPERM") != std::string::npos) {
      m.has_error_mode_line = true;
      section = Section::kNone;
    }
    if (line.rfind("forkguard: child ", 0) == 0) section = Section::kNone;
    if (section == Section::kInit) m.init_section += line + "\n";
    if (section == Section::kFork) m.fork_section += line + "\n";
  }
  return m;
}

namespace {

ChildSegvMessage FindChildLine(const std::string& err, long pid, const std::regex& re) {
  ChildSegvMessage c;
  std::vector<std::string> lines = Lines(err);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch sm;
    if (!std::regex_search(lines[i], sm, re) || std::stol(sm[1]) != pid) continue;
    c.found = true;
    c.pid = pid;
    c.addr = FromHex(sm[2]);
    c.line = lines[i];
    for (size_t j = i + 1; j < lines.size(); ++j) c.rest += lines[j] + "\n";
    break;
  }
  return c;
}

// A child_segv line's address: a "0x.." string or an integer.
uint64_t SegvAddr(const Json& segv) {
  return segv.String("addr").empty() ? static_cast<uint64_t>(segv.Int("addr"))
                                     : FromHex(segv.String("addr"));
}

}  // namespace

ChildSegvMessage FindChildSegvMessage(const std::string& err, long pid) {
  static const std::regex kChild(
      R"(forkguard: child (\d+) SIGSEGV at (0x[0-9a-fA-F]+): inside a range registered for RDMA by the parent)");
  return FindChildLine(err, pid, kChild);
}

ChildSegvMessage FindChildSegvLine(const std::string& err, long pid) {
  static const std::regex kChild(R"(forkguard: child (\d+) SIGSEGV at (0x[0-9a-fA-F]+):)");
  return FindChildLine(err, pid, kChild);
}

void ExpectWellFormedLog(const ShimRun& run) {
  const std::string ctx = Describe(run);
  EXPECT_TRUE(run.log.problems.empty()) << ctx;
  EXPECT_FALSE(run.log.files.empty()) << "no event log file at all\n" << ctx;
  static const std::regex kName(R"(^forkguard\.[^/]+\.(\d+)\.(\d+)\.jsonl$)");
  std::map<std::string, std::vector<const Event*>> by_file;
  for (const Event& e : run.log.events) by_file[e.file].push_back(&e);
  for (const std::string& f : run.log.files) {
    std::smatch sm;
    ASSERT_TRUE(std::regex_match(f, sm, kName)) << "file name " << f << "\n" << ctx;
    struct stat st;
    ASSERT_EQ(0, stat((run.log_dir + "/" + f).c_str(), &st)) << f;
    EXPECT_EQ(0600u, st.st_mode & 0777) << f << " mode";
    const long file_pid = std::stol(sm[1]);
    std::vector<int64_t> seqs;
    for (const Event* e : by_file[f]) {
      const Json& j = e->json;
      EXPECT_EQ("forkguard.event/2", j.String("schema")) << f << ": " << e->name();
      EXPECT_FALSE(e->name().empty()) << f;
      EXPECT_EQ(file_pid, j.Int("pid"))
          << f << ": " << e->name() << " written into another pid's file";
      EXPECT_GT(j.Int("ppid"), 0) << f << ": " << e->name();
      EXPECT_GT(j.Int("tid"), 0) << f << ": " << e->name();
      EXPECT_GT(j.Int("ts_ns"), 0) << f << ": " << e->name();
      EXPECT_FALSE(j.String("host").empty()) << f << ": " << e->name();
      EXPECT_TRUE(j.Has("rank")) << f << ": " << e->name();
      seqs.push_back(j.Int("seq"));
    }
    // Threads may write in any order; none may be lost or duplicated.
    std::sort(seqs.begin(), seqs.end());
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (seqs[i] != static_cast<int64_t>(i)) {
        ADD_FAILURE() << f << ": seq values are not 0.." << seqs.size() - 1
                      << " (lost or duplicated line near seq " << i << ")\n"
                      << ctx;
        break;
      }
    }
  }
}

void ExpectPrinted(const ShimRun& run, const std::vector<std::string>& texts) {
  for (const std::string& text : texts)
    EXPECT_NE(run.proc.out.find(text), std::string::npos) << text << "\n" << Describe(run);
}

void ExpectSaid(const ShimRun& run, const std::vector<std::string>& texts) {
  for (const std::string& text : texts)
    EXPECT_NE(run.proc.err.find(text), std::string::npos) << text << "\n" << Describe(run);
}

void ExpectCleanRun(const ShimRun& run) {
  const std::string ctx = Describe(run);
  EXPECT_TRUE(run.proc.Exited(0)) << ctx;
  EXPECT_TRUE(run.report.done) << ctx;
  EXPECT_EQ("", run.proc.err) << "a clean run must print nothing on stderr\n" << ctx;
  for (const Event& e : run.log.Of("fork")) {
    EXPECT_EQ("clean", e.json.String("verdict")) << ctx;
    EXPECT_TRUE(e.json["reasons"].array.empty()) << ctx;
    EXPECT_EQ("proceeded", e.json.String("action")) << ctx;
  }
  ExpectWellFormedLog(run);
}

void ExpectHazardWarning(const ShimRun& run, const std::vector<std::string>& must_have,
                         const std::vector<std::string>& must_not_have) {
  const std::string ctx = Describe(run);
  HazardMessage m = ParseHazardMessage(run.proc.err);
  ASSERT_TRUE(m.found) << "no 'forkguard: fork after RDMA init in pid' message\n" << ctx;
  EXPECT_EQ(run.proc.pid, m.pid) << ctx;
  EXPECT_TRUE(m.verdict_line) << "no 'verdict: hazard (...)' line\n" << ctx;
  for (const std::string& r : must_have) {
    EXPECT_TRUE(m.HasReason(r)) << "verdict lacks " << r << "\n" << ctx;
    bool explained = false;
    for (const std::string& l : m.reason_lines) explained |= l.rfind(r + ":", 0) == 0;
    EXPECT_TRUE(explained) << "no '" << r << ":' line explaining the reason\n" << ctx;
  }
  for (const std::string& r : must_not_have) {
    EXPECT_FALSE(m.HasReason(r)) << "verdict has " << r << "\n" << ctx;
  }
  // Both stacks, naming the program's own functions.
  EXPECT_NE(std::string::npos, m.init_section.find("fg_test_init_rdma"))
      << "'RDMA first initialized' stack does not name fg_test_init_rdma\n"
      << ctx;
  EXPECT_NE(std::string::npos, m.fork_section.find("fg_test_fork_worker"))
      << "'fork called at:' stack does not name fg_test_fork_worker\n"
      << ctx;
  EXPECT_TRUE(m.has_fix) << "no 'fix:' line\n" << ctx;

  // The log says the same.
  std::vector<Event> forks = run.log.OfPid("fork", run.proc.pid);
  ASSERT_FALSE(forks.empty()) << ctx;
  const Json& f = forks.front().json;
  EXPECT_EQ("hazard", f.String("verdict")) << ctx;
  std::set<std::string> logged;
  for (const Json& r : f["reasons"].array) logged.insert(r.str);
  std::set<std::string> printed(m.reasons.begin(), m.reasons.end());
  EXPECT_EQ(printed, logged) << "stderr and the event log disagree on the reasons\n" << ctx;
  EXPECT_TRUE(f["reported"].boolean) << ctx;
  EXPECT_FALSE(f["stack"].array.empty()) << "fork event without a stack\n" << ctx;
  ASSERT_EQ(Json::Type::kObject, f["init"].type) << "fork event without init\n" << ctx;
  EXPECT_FALSE(f["init"]["stack"].array.empty()) << ctx;
  ExpectWellFormedLog(run);
}

void ExpectChildSegvExplained(const ShimRun& run, pid_t child, uint64_t addr) {
  const std::string ctx = Describe(run);
  EXPECT_NE(std::string::npos,
            run.proc.out.find("child killed by signal " + std::to_string(SIGSEGV)))
      << "the child must still die of SIGSEGV (chain or re-raise)\n"
      << ctx;
  ChildSegvMessage c = FindChildSegvMessage(run.proc.err, child);
  ASSERT_TRUE(c.found) << "no 'forkguard: child " << child << " SIGSEGV at 0x..: inside a range "
                       << "registered for RDMA by the parent' line\n"
                       << ctx;
  EXPECT_EQ(ToHex(addr), ToHex(c.addr)) << ctx;
  // The registering stack follows, before any other forkguard line, and names
  // the program's registering function.
  std::string stack = c.rest.substr(0, c.rest.find("forkguard:"));
  EXPECT_NE(std::string::npos, stack.find("fg_test_register_buffers"))
      << "the child's message does not show the registering stack\n"
      << ctx;

  std::vector<Event> segv = run.log.OfPid("child_segv", child);
  ASSERT_EQ(1u, segv.size()) << "want one child_segv event from pid " << child << "\n" << ctx;
  const Json& s = segv.front().json;
  EXPECT_EQ(SIGSEGV, s.Int("signal")) << ctx;
  EXPECT_EQ(ToHex(addr), ToHex(SegvAddr(s))) << ctx;
  EXPECT_EQ(run.proc.pid, s.Int("ppid")) << ctx;
  // The registering stack in the child is the parent's mr_register stack
  // (same address space layout after fork): they must share return addresses.
  std::vector<uint64_t> child_ips = StackIps(s["reg_stack"]);
  ASSERT_FALSE(child_ips.empty()) << "child_segv without reg_stack\n" << ctx;
  bool shared = false;
  for (const Event& r : run.log.OfPid("mr_register", run.proc.pid)) {
    for (uint64_t ip : StackIps(r.json["stack"])) {
      shared |= std::find(child_ips.begin(), child_ips.end(), ip) != child_ips.end();
    }
  }
  EXPECT_TRUE(shared) << "child_segv.reg_stack shares no frame with any mr_register stack\n" << ctx;
}

Json OneEvent(const ShimRun& run, const std::string& event) {
  std::vector<Event> events = run.log.OfPid(event, run.proc.pid);
  EXPECT_EQ(1u, events.size()) << "want one " << event << " line from the parent\n"
                               << Describe(run);
  return events.size() == 1 ? events[0].json : Json();
}

Json ExpectInheritedRdma(const ShimRun& run) {
  const std::string ctx = Describe(run);
  EXPECT_TRUE(run.proc.Exited(0)) << ctx;
  HazardMessage m = ParseHazardMessage(run.proc.err);
  EXPECT_TRUE(m.found) << "no 'forkguard: fork after RDMA init in pid' message\n" << ctx;
  EXPECT_TRUE(m.HasReason("inherited-rdma")) << ctx;
  Json fork = OneEvent(run, "fork");
  EXPECT_EQ("hazard", fork.String("verdict")) << ctx;
  return fork;
}

Json ExpectRdmacmCaught(const ShimRun& run, const std::string& printed) {
  const std::string ctx = Describe(run);
  EXPECT_NE(std::string::npos, run.proc.out.find(printed)) << ctx;
  Json fork = ExpectInheritedRdma(run);
  EXPECT_EQ(1, fork["live"].Int("cm_ids")) << ctx;
  OneEvent(run, "rdma_init");
  ExpectWellFormedLog(run);
  return fork;
}

void ExpectSpawnIsNotAHazard(const ShimRun& run, const std::string& call) {
  const std::string ctx = Describe(run);
  EXPECT_TRUE(run.proc.Exited(0)) << ctx;
  EXPECT_EQ("", run.proc.err) << ctx;
  ASSERT_EQ(1u, run.report.children.size()) << ctx;
  Json spawn = OneEvent(run, "spawn");
  EXPECT_EQ(call, spawn.String("call")) << ctx;
  EXPECT_EQ(run.report.children[0], spawn.Int("child_pid")) << ctx;
  for (const Event& e : run.log.Of("fork")) EXPECT_NE("hazard", e.json.String("verdict")) << ctx;
  ExpectWellFormedLog(run);
}

void ExpectForkExecLogged(const ShimRun& run) {
  const std::string ctx = Describe(run);
  EXPECT_TRUE(run.proc.Exited(0)) << ctx;
  ASSERT_EQ(1u, run.report.children.size()) << ctx;
  EXPECT_NE(std::string::npos, run.proc.out.find("child exited 0")) << ctx;
  std::vector<Event> ex = run.log.OfPid("child_exec", run.report.children[0]);
  ASSERT_EQ(1u, ex.size()) << ctx;
  EXPECT_EQ("/bin/true", ex[0].json.String("path")) << ctx;
  EXPECT_EQ(run.proc.pid, ex[0].json.Int("ppid")) << ctx;
  ExpectWellFormedLog(run);
}

void ExpectForkFailedWithEperm(const ShimRun& run) {
  const std::string ctx = Describe(run);
  EXPECT_TRUE(run.proc.Exited(0)) << "the program must be able to carry on\n" << ctx;
  EXPECT_NE(std::string::npos, run.proc.out.find("fork failed: errno=1 (Operation not permitted)"))
      << ctx;
  EXPECT_TRUE(run.report.children.empty()) << "a child was created\n" << ctx;
  EXPECT_NE(std::string::npos, run.proc.out.find("parent continues: buffer intact")) << ctx;
  EXPECT_TRUE(run.report.done) << ctx;
  HazardMessage m = ParseHazardMessage(run.proc.err);
  EXPECT_TRUE(m.found) << ctx;
  EXPECT_TRUE(m.has_error_mode_line) << ctx;
  Json fork = OneEvent(run, "fork");
  EXPECT_EQ("failed", fork.String("action")) << ctx;
  EXPECT_EQ(1, fork.Int("errno")) << ctx;
  EXPECT_TRUE(run.log.Of("fork_child").empty()) << ctx;
  EXPECT_EQ(1u, run.log.files.size()) << "only the parent may have written a log\n" << ctx;
  ExpectWellFormedLog(run);
}

void ExpectOneRegisterLinePerCall(const ShimRun& run) {
  std::vector<Event> regs = run.log.OfPid("mr_register", run.proc.pid);
  EXPECT_EQ(run.report.registered.size(), regs.size())
      << "want exactly one mr_register per user call\n"
      << Describe(run);
  std::multiset<std::string> want, got;
  for (auto& [call, addr] : run.report.registered) want.insert(call + "@" + ToHex(addr));
  for (const Event& e : regs) {
    got.insert(e.json.String("call") + "@" + ToHex(static_cast<uint64_t>(e.json.Int("addr"))));
  }
  EXPECT_EQ(want, got) << Describe(run);
}

void ExpectChildSegvWarned(const ShimRun& run, const std::vector<std::string>& reasons) {
  const std::string ctx = Describe(run);
  ASSERT_TRUE(run.proc.Exited(0)) << ctx;
  ExpectHazardWarning(run, reasons, {});
  ASSERT_EQ(1u, run.report.children.size()) << ctx;
  ASSERT_FALSE(run.report.registered.empty()) << ctx;
  ExpectChildSegvExplained(run, run.report.children[0], run.report.registered[0].second);
  EXPECT_NE(std::string::npos, run.proc.out.find("parent continues: buffer intact")) << ctx;
  EXPECT_TRUE(run.report.done) << ctx;
}

void ExpectChildSegvChained(const ShimRun& run) {
  const std::string ctx = Describe(run);
  EXPECT_TRUE(run.proc.Exited(0)) << ctx;
  ASSERT_EQ(1u, run.report.children.size()) << ctx;
  EXPECT_NE(std::string::npos, run.proc.out.find("program segv handler ran")) << ctx;
  EXPECT_NE(std::string::npos, run.proc.out.find("child exited 42")) << ctx;
  EXPECT_TRUE(FindChildSegvMessage(run.proc.err, run.report.children[0]).found) << ctx;
  EXPECT_EQ(1u, run.log.OfPid("child_segv", run.report.children[0]).size()) << ctx;
}

void ExpectHeapNeighborExplained(const ShimRun& run) {
  const std::string ctx = Describe(run);
  ASSERT_TRUE(run.proc.Exited(0)) << ctx;
  ExpectHazardWarning(run, {"child-segv"}, {});
  ASSERT_EQ(1u, run.report.children.size()) << ctx;
  ASSERT_NE(0u, run.report.heap_neighbor) << ctx;
  const pid_t child = run.report.children[0];
  EXPECT_NE(std::string::npos, run.proc.out.find("child killed by signal 11")) << ctx;
  EXPECT_NE(std::string::npos, run.proc.err.find("forkguard: child " + std::to_string(child) +
                                                 " SIGSEGV at " + ToHex(run.report.heap_neighbor)))
      << ctx;
  std::vector<Event> segv = run.log.OfPid("child_segv", child);
  ASSERT_EQ(1u, segv.size()) << ctx;
  const Json& s = segv[0].json;
  EXPECT_EQ(ToHex(run.report.heap_neighbor), ToHex(SegvAddr(s))) << ctx;
  ChildSegvMessage c = FindChildSegvLine(run.proc.err, child);
  ASSERT_TRUE(c.found) << ctx;
  EXPECT_EQ(ToHex(run.report.heap_neighbor), ToHex(c.addr)) << ctx;
  EXPECT_NE(std::string::npos, c.line.find("registered for RDMA by the parent")) << ctx;
  EXPECT_NE(std::string::npos,
            c.rest.substr(0, c.rest.find("forkguard:")).find("fg_test_register_buffers"))
      << ctx;
}

}  // namespace forkguard::test_support
