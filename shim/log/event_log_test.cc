#include "shim/log/event_log.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <simdjson.h>

#include "formats/text_buffer.h"
#include "shim/child/child.h"

namespace forkguard {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A strict RFC 8259 syntax check (simdjson, the CLI's reader), enough to prove every line is
// valid JSON.
bool IsValidJson(const std::string& s) {
  simdjson::dom::parser parser;
  return parser.parse(s).error() == simdjson::SUCCESS;
}

TEST(TextBufferTest, NumbersAndSizes) {
  char buf[256];
  TextBuffer b(buf, sizeof(buf));
  b.Dec(-42).Char(' ').UDec(0).Char(' ').Hex(0xbeef).Char(' ').Dec(INT64_MIN);
  EXPECT_STREQ(buf, "-42 0 beef -9223372036854775808");
  b.Clear();
  b.Size(4u << 20).Str("|").Size(512).Str("|").Size(1536).Str("|").Size(3ull << 30);
  EXPECT_STREQ(buf, "4.0 MiB|512 B|1.5 KiB|3.0 GiB");
}

TEST(TextBufferTest, TruncatesSafely) {
  char buf[8];
  TextBuffer b(buf, sizeof(buf));
  b.Str("0123456789");
  EXPECT_TRUE(b.truncated());
  EXPECT_EQ(b.size(), 7u);
  EXPECT_STREQ(buf, "0123456");
}

// The check itself: what the writers must never produce fails it.
TEST(TextBufferTest, JsonCheckRejectsBrokenLines) {
  EXPECT_TRUE(IsValidJson("{\"a\":[1,\"b\"]}"));
  EXPECT_FALSE(IsValidJson("{\"a\":1"));
  EXPECT_FALSE(IsValidJson("\"a\x01\""));  // a raw control character
  EXPECT_FALSE(IsValidJson("\"\xff\""));   // not UTF-8
  EXPECT_FALSE(IsValidJson("{} {}"));
}

TEST(TextBufferTest, JsonEscaping) {
  char buf[512];
  TextBuffer b(buf, sizeof(buf));
  b.JsonStr("a\"b\\c\nd\te\x01\x7f");
  EXPECT_STREQ(buf, "\"a\\\"b\\\\c\\nd\\te\\u0001\\u007f\"");
  EXPECT_TRUE(IsValidJson(buf));
  b.Clear();
  b.JsonStr("caf\xc3\xa9 \xff\xfe bad \xe2\x82");  // valid UTF-8, invalid bytes, cut sequence
  EXPECT_TRUE(IsValidJson(buf));
  EXPECT_THAT(std::string(buf), HasSubstr("caf\xc3\xa9"));
  EXPECT_THAT(std::string(buf), HasSubstr("\\ufffd"));
  b.Clear();
  b.JsonStr(nullptr);
  EXPECT_STREQ(buf, "null");
}

// Forks, runs `body` in the child (what it returns is the child's exit status) and waits for
// it: the child's pid (-1 when fork or waitpid failed), its wait status in *status.
template <typename Body>
pid_t ForkAndWait(Body body, int* status) {
  pid_t child = fork();
  if (child == 0) _exit(body());
  if (child < 0 || waitpid(child, status, 0) != child) return -1;
  return child;
}

class EventLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = getenv("TEST_TMPDIR");
    dir_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/evlog_XXXXXX";
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
  }
  std::vector<std::string> Files() {
    std::vector<std::string> out;
    std::string cmd = "ls " + dir_;
    FILE* p = popen(cmd.c_str(), "r");
    char line[4096];
    while (p != nullptr && fgets(line, sizeof(line), p) != nullptr) {
      std::string s(line);
      if (!s.empty() && s.back() == '\n') s.pop_back();
      out.push_back(dir_ + "/" + s);
    }
    if (p != nullptr) pclose(p);
    return out;
  }
  std::string dir_;
};

TEST_F(EventLogTest, WritesValidLinesWithCommonFields) {
  EventLog log;
  LogIdentity id;
  id.host = "host\"1";
  id.prog = "prog";
  id.rank = 3;
  log.Configure(dir_.c_str(), id, nullptr, nullptr);
  ASSERT_TRUE(log.enabled());
  char buf[4096];
  TextBuffer b(buf, sizeof(buf));
  log.Begin(b, "note");
  b.Str(",\"text\":").JsonStr("hello \"world\"\n");
  log.End(b);
  RawStack s;
  s.depth = 2;
  s.ips[0] = reinterpret_cast<uintptr_t>(&IsValidJson);
  s.ips[1] = 0x1234;
  for (int i = 0; i < 2; ++i) {  // the same stack twice: one record, one id
    log.Begin(b, "rdma_init");
    AppendStackRef(b, log, "stack", s, nullptr, false);
    log.End(b);
  }

  std::vector<std::string> files = Files();
  ASSERT_EQ(files.size(), 1u);
  struct stat st;
  ASSERT_EQ(stat(files[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_THAT(files[0], HasSubstr("/forkguard.host\"1." + std::to_string(getpid()) + "."));
  std::ifstream in(files[0]);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    EXPECT_TRUE(IsValidJson(line)) << line;
    lines.push_back(line);
  }
  // header, note, module (this test binary), stack, rdma_init, rdma_init.
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0].rfind("{\"schema\":\"forkguard.event/2\",\"event\":\"header\"", 0), 0u)
      << lines[0];
  EXPECT_THAT(lines[0], HasSubstr("\"rank\":3,\"local_rank\":null,\"job\":null"));
  EXPECT_THAT(lines[0], HasSubstr("\"pid\":" + std::to_string(getpid())));
  EXPECT_THAT(lines[0], HasSubstr("\"start_ns\":"));
  EXPECT_EQ(lines[1].rfind("{\"event\":\"note\",\"ts\":", 0), 0u) << lines[1];
  EXPECT_THAT(lines[1], HasSubstr("\"seq\":0"));
  EXPECT_THAT(lines[1], Not(HasSubstr("\"pid\"")));
  EXPECT_EQ(lines[2].rfind("{\"event\":\"module\",\"id\":0,\"path\":\"/", 0), 0u) << lines[2];
  EXPECT_THAT(lines[2], HasSubstr("\"build_id\":"));
  // The unknown 0x1234 is a raw address (module -1).
  EXPECT_EQ(lines[3].rfind("{\"event\":\"stack\",\"id\":0,\"frames\":[[0,", 0), 0u) << lines[3];
  EXPECT_THAT(lines[3], HasSubstr(",[-1,4660]]}"));
  EXPECT_THAT(lines[4], HasSubstr("\"seq\":1,\"stack\":0}"));
  EXPECT_THAT(lines[5], HasSubstr("\"seq\":2,\"stack\":0}"));
}

// A forked child's file starts its own tables: it never refers to an id of the parent's.
TEST_F(EventLogTest, ForkedChildReemitsItsStacks) {
  EventLog log;
  log.Configure(dir_.c_str(), LogIdentity(), nullptr, nullptr);
  RawStack s;
  s.depth = 1;
  s.ips[0] = reinterpret_cast<uintptr_t>(&IsValidJson);
  char buf[1024];
  TextBuffer b(buf, sizeof(buf));
  log.Begin(b, "rdma_init");
  AppendStackRef(b, log, "stack", s, nullptr, false);
  log.End(b);
  int st = 0;
  pid_t child = ForkAndWait(
      [&] {
        log.ResetInChild(456);
        TextBuffer c(buf, sizeof(buf));
        log.Begin(c, "rdma_init");
        AppendStackRef(c, log, "stack", s, nullptr, false);
        log.End(c);
        return 0;
      },
      &st);
  ASSERT_GT(child, 0);
  std::ifstream in(dir_ + "/forkguard.." + std::to_string(child) + ".456.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[0], HasSubstr("\"pid\":" + std::to_string(child)));
  EXPECT_EQ(lines[1].rfind("{\"event\":\"module\",\"id\":0,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("{\"event\":\"stack\",\"id\":0,", 0), 0u) << lines[2];
  EXPECT_THAT(lines[3], HasSubstr("\"seq\":0,"));
  EXPECT_THAT(lines[3], HasSubstr("\"stack\":0}"));
}

TEST_F(EventLogTest, OversizedLineBecomesANote) {
  EventLog log;
  log.Configure(dir_.c_str(), LogIdentity(), nullptr, nullptr);
  char buf[200];
  TextBuffer b(buf, sizeof(buf));
  log.Begin(b, "fork");
  b.Str(",\"text\":").JsonStr(std::string(1000, 'x').c_str());
  log.End(b);
  std::vector<std::string> files = Files();
  ASSERT_EQ(files.size(), 1u);
  std::ifstream in(files[0]);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));  // the header
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_TRUE(IsValidJson(line)) << line;
  EXPECT_THAT(line, HasSubstr("\"event\":\"note\""));
}

TEST_F(EventLogTest, RejectsSymlinkCreatesMissingDirectories) {
  std::string link = dir_ + "/link";
  ASSERT_EQ(symlink(dir_.c_str(), link.c_str()), 0);
  std::vector<std::string> warnings;
  auto sink = [](const char* line, void* ctx) {
    static_cast<std::vector<std::string>*>(ctx)->push_back(line);
  };
  EventLog a;
  a.Configure(link.c_str(), LogIdentity(), sink, &warnings);
  EXPECT_FALSE(a.enabled());
  EventLog b;
  b.Configure((dir_ + "/missing/nested").c_str(), LogIdentity(), sink, &warnings);
  EXPECT_TRUE(b.enabled());
  EventLog c;
  c.Configure((dir_ + "/%q").c_str(), LogIdentity(), sink, &warnings);
  EXPECT_FALSE(c.enabled());
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[0], HasSubstr("symlink"));
  EXPECT_EQ(warnings[1].rfind("forkguard: ignoring FORKGUARD_LOG=", 0), 0u);
  EXPECT_THAT(warnings[1], HasSubstr("unknown template %q"));
  struct stat st;
  ASSERT_EQ(stat((dir_ + "/missing/nested").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// The names of the files in `dir` ("" when it cannot be listed).
std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> out;
  FILE* p = popen(("ls -A " + dir + " 2>/dev/null").c_str(), "r");
  char line[4096];
  while (p != nullptr && fgets(line, sizeof(line), p) != nullptr) {
    std::string s(line);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    out.push_back(s);
  }
  if (p != nullptr) pclose(p);
  return out;
}

void WriteNote(EventLog& log) {
  char buf[1024];
  TextBuffer b(buf, sizeof(buf));
  log.Begin(b, "note");
  log.End(b);
}

// Files are created through the directory's descriptor: the directory swapped for a symlink
// after Configure checked it does not move them; a descriptor the program closed (or reused)
// is noticed and the path walked again with the same checks, which refuse the symlink.
TEST_F(EventLogTest, FilesGoIntoTheCheckedDirectoryNotWhereItsPathNowLeads) {
  EventLog log;
  LogIdentity id;
  id.job = "5";
  log.Configure((dir_ + "/%j").c_str(), id, nullptr, nullptr);
  ASSERT_TRUE(log.enabled());
  ASSERT_EQ(mkdir((dir_ + "/elsewhere").c_str(), 0700), 0);
  ASSERT_EQ(rename((dir_ + "/5").c_str(), (dir_ + "/checked").c_str()), 0);
  ASSERT_EQ(symlink((dir_ + "/elsewhere").c_str(), (dir_ + "/5").c_str()), 0);
  WriteNote(log);
  EXPECT_EQ(FilesIn(dir_ + "/checked").size(), 1u);
  EXPECT_TRUE(FilesIn(dir_ + "/elsewhere").empty()) << "a file created through the symlink";
  // A child that closed every descriptor but 0-2 (as subprocess does before exec), its log
  // reset with process start `start`: the path is walked again, and its symlink refused.
  auto closing_child = [&](int64_t start) {
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    log.ResetInChild(start);
    WriteNote(log);
    return 0;
  };
  int st = 0;
  ASSERT_GT(ForkAndWait([&] { return closing_child(123); }, &st), 0);
  EXPECT_TRUE(FilesIn(dir_ + "/elsewhere").empty()) << "a file created through the symlink";
  // Back in place: the walk finds it again.
  ASSERT_EQ(unlink((dir_ + "/5").c_str()), 0);
  ASSERT_EQ(rename((dir_ + "/checked").c_str(), (dir_ + "/5").c_str()), 0);
  ASSERT_GT(ForkAndWait([&] { return closing_child(456); }, &st), 0);
  EXPECT_EQ(FilesIn(dir_ + "/5").size(), 2u) << "the second child's file is missing";
}

// A job directory another user made first under a shared (sticky, world-writable) root is not
// logged into: one warning names it.
TEST_F(EventLogTest, JobDirectoryMadeByAnotherUserIsRefusedWithOneWarning) {
  ASSERT_EQ(geteuid(), 0u) << "needs root to chown to uid 65534";
  ASSERT_EQ(chmod(dir_.c_str(), 01777), 0);
  ASSERT_EQ(mkdir((dir_ + "/9").c_str(), 0777), 0);
  ASSERT_EQ(chmod((dir_ + "/9").c_str(), 0777), 0);
  ASSERT_EQ(chown((dir_ + "/9").c_str(), 65534, 65534), 0);
  std::vector<std::string> warnings;
  auto sink = [](const char* line, void* ctx) {
    static_cast<std::vector<std::string>*>(ctx)->push_back(line);
  };
  EventLog log;
  LogIdentity id;
  id.job = "9";
  id.host = "node1";
  log.Configure((dir_ + "/%j/%h").c_str(), id, sink, &warnings);
  EXPECT_FALSE(log.enabled());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr(dir_ + "/9 is owned by uid 65534, not by this user"));
  EXPECT_TRUE(FilesIn(dir_ + "/9").empty());
}

// Templates are expanded once, at Configure: a forked child logs into its parent's directory
// (%p is the parent's pid there), in a file of its own named with its own pid.
TEST_F(EventLogTest, TemplatesExpandedOnceForkedChildKeepsTheDirectory) {
  EventLog log;
  LogIdentity id;
  id.host = "node3";
  id.rank = 5;
  id.local_rank = 1;
  id.job = "77";
  id.step = 4;
  std::string tmpl = dir_ + "/%j/%h/r%r.%p";
  log.Configure(tmpl.c_str(), id, nullptr, nullptr);
  ASSERT_TRUE(log.enabled());
  std::string expect_dir = dir_ + "/77/node3/r5." + std::to_string(getpid());
  WriteNote(log);
  int st = 0;
  pid_t child = ForkAndWait(
      [&] {
        log.ResetInChild(123);
        WriteNote(log);
        return 0;
      },
      &st);
  ASSERT_GT(child, 0);
  std::string child_file = expect_dir + "/forkguard.node3." + std::to_string(child) + ".123.jsonl";
  std::ifstream cin(child_file);
  std::string line;
  ASSERT_TRUE(std::getline(cin, line)) << child_file;  // its header
  EXPECT_THAT(line, HasSubstr("\"rank\":5,\"local_rank\":1,\"job\":\"77\",\"step\":4,"));
  EXPECT_THAT(line, HasSubstr("\"pid\":" + std::to_string(child)));
  FILE* p = popen(("ls " + expect_dir).c_str(), "r");
  char name[512];
  int files = 0;
  while (p != nullptr && fgets(name, sizeof(name), p) != nullptr) ++files;
  if (p != nullptr) pclose(p);
  EXPECT_EQ(files, 2) << "parent and child, one file each, in " << expect_dir;
}

// The mr_counts lines of a file, summed: registrations, their bytes, deregistrations, per stack
// id (n only), and the lines.
struct CountTotals {
  uint64_t n = 0;
  uint64_t bytes = 0;
  uint64_t deregs = 0;
  std::map<int, uint64_t> n_by_stack;
  int lines = 0;
  int all_lines = 0;
  std::vector<std::string> bad;  // lines that are not valid JSON
};

uint64_t NumberAfter(const std::string& s, size_t at) {
  return strtoull(s.c_str() + at, nullptr, 10);
}

CountTotals ReadCounts(const std::string& file) {
  CountTotals t;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    ++t.all_lines;
    if (!IsValidJson(line)) t.bad.push_back(line);
    if (line.rfind("{\"event\":\"mr_counts\",", 0) != 0) continue;
    ++t.lines;
    // Each site entry: {"stack":S[,"call":..][,"dontfork":true],"n":N,"bytes":B}
    for (size_t at = line.find("{\"stack\":"); at != std::string::npos;
         at = line.find("{\"stack\":", at + 1)) {
      int stack = static_cast<int>(NumberAfter(line, at + 9));
      size_t n_at = line.find("\"n\":", at);
      size_t b_at = line.find("\"bytes\":", at);
      uint64_t n = NumberAfter(line, n_at + 4);
      t.n += n;
      t.n_by_stack[stack] += n;
      t.bytes += NumberAfter(line, b_at + 8);
    }
    size_t d = line.find("\"deregs\":");
    if (d != std::string::npos) t.deregs += NumberAfter(line, d + 9);
  }
  return t;
}

RawStack StackOf(int depth, uintptr_t salt) {
  RawStack s;
  s.depth = depth;
  for (int i = 0; i < depth; ++i) s.ips[i] = reinterpret_cast<uintptr_t>(&IsValidJson) + salt + i;
  return s;
}

// A site's first registration is a line (the caller's); AddRegistrationSite makes later ones
// counts, which go out with the next line and nowhere else.
void FirstLineAt(EventLog& log, const RawStack& s, uint64_t key, const char* call) {
  uint32_t epoch = log.file_epoch();
  char buf[1024];
  TextBuffer b(buf, sizeof(buf));
  log.Begin(b, "mr_register");
  AppendStackRef(b, log, "stack", s, nullptr, false);
  log.End(b);
  int id = log.StackId(s, nullptr);
  ASSERT_GE(id, 0);
  log.AddRegistrationSite(key, id, call, false, epoch);
}

TEST_F(EventLogTest, RegistrationsAtASeenSiteAreCountedAndGoOutWithTheNextLine) {
  EventLog log;
  log.Configure(dir_.c_str(), LogIdentity(), nullptr, nullptr);
  RawStack s = StackOf(3, 0);
  uint64_t key = EventLog::RegistrationKey(s, nullptr, false);
  EXPECT_NE(key, EventLog::RegistrationKey(s, "ibv_reg_mr_iova2", false));
  EXPECT_NE(key, EventLog::RegistrationKey(s, nullptr, true));
  EXPECT_FALSE(log.CountRegistration(key, 4096)) << "no line for the site yet";
  FirstLineAt(log, s, key, nullptr);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(log.CountRegistration(key, 4096 * (i + 1)));
  for (int i = 0; i < 3; ++i) log.CountDeregistration();
  std::vector<std::string> files = Files();
  ASSERT_EQ(files.size(), 1u);
  CountTotals before = ReadCounts(files[0]);
  EXPECT_EQ(before.lines, 0) << "counts wait for a line";
  char buf[1024];
  TextBuffer b(buf, sizeof(buf));
  log.Begin(b, "note");
  log.End(b);
  CountTotals after = ReadCounts(files[0]);
  EXPECT_TRUE(after.bad.empty()) << after.bad[0];
  EXPECT_EQ(after.lines, 1);
  EXPECT_EQ(after.n, 5u);
  EXPECT_EQ(after.bytes, 4096u * 15);
  EXPECT_EQ(after.deregs, 3u);
  EXPECT_EQ(after.n_by_stack[0], 5u);
  log.FlushCounts();  // nothing pending: no line
  b.Clear();
  log.Begin(b, "note");
  log.End(b);
  EXPECT_EQ(ReadCounts(files[0]).lines, 1);
  // The count line directly follows the line it went out with.
  std::ifstream in(files[0]);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines[lines.size() - 3].rfind("{\"event\":\"note\"", 0), 0u);
  EXPECT_EQ(lines[lines.size() - 2].rfind("{\"event\":\"mr_counts\"", 0), 0u);
  EXPECT_THAT(lines[lines.size() - 2],
              HasSubstr("\"sites\":[{\"stack\":0,\"n\":5,\"bytes\":61440}]"));
}

// `sites` sites, each with its first line written (FirstLineAt), their keys: site i's stack is
// StackOf(depth, i * salt_step), its call `odd_call` for odd i, else ibv_reg_mr (nullptr).
std::vector<uint64_t> SitesWithFirstLines(EventLog& log, int sites, int depth, uintptr_t salt_step,
                                          const char* odd_call = nullptr) {
  std::vector<uint64_t> keys;
  for (int i = 0; i < sites; ++i) {
    RawStack s = StackOf(depth, static_cast<uintptr_t>(i) * salt_step);
    const char* call = i % 2 ? odd_call : nullptr;
    keys.push_back(EventLog::RegistrationKey(s, call, false));
    FirstLineAt(log, s, keys.back(), call);
  }
  return keys;
}

// More sites pending than one line holds: FlushCounts writes them all.
TEST_F(EventLogTest, FlushWritesEverySite) {
  EventLog log;
  log.Configure(dir_.c_str(), LogIdentity(), nullptr, nullptr);
  constexpr int kSites = 30;
  std::vector<uint64_t> keys = SitesWithFirstLines(log, kSites, 2, 16, "ibv_reg_mr_iova2");
  for (int r = 0; r < 7; ++r)
    for (uint64_t k : keys) ASSERT_TRUE(log.CountRegistration(k, 10));
  log.FlushCounts();
  std::vector<std::string> files = Files();
  ASSERT_EQ(files.size(), 1u);
  CountTotals t = ReadCounts(files[0]);
  EXPECT_TRUE(t.bad.empty()) << t.bad[0];
  EXPECT_EQ(t.n, 7u * kSites);
  EXPECT_EQ(t.bytes, 70u * kSites);
  EXPECT_EQ(t.n_by_stack.size(), static_cast<size_t>(kSites));
  EXPECT_GE(t.lines, 4);  // 8 sites a line
}

// Many threads count at a few sites while others write lines (which take the counts along)
// and flush: every count is written exactly once, every line whole.
TEST_F(EventLogTest, ConcurrentCountsAreExactAndLinesWhole) {
  EventLog log;
  log.Configure(dir_.c_str(), LogIdentity(), nullptr, nullptr);
  constexpr int kSites = 3;
  std::vector<uint64_t> keys = SitesWithFirstLines(log, kSites, 4, 64);
  constexpr int kCounters = 4;
  constexpr int kIters = 20000;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kCounters; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        EXPECT_TRUE(log.CountRegistration(keys[(i + t) % kSites], 3));
        log.CountDeregistration();
      }
    });
  }
  std::thread writer([&] {
    char buf[512];
    while (!stop.load()) {
      TextBuffer b(buf, sizeof(buf));
      log.Begin(b, "note");
      log.End(b);
      log.FlushCounts();
    }
  });
  for (std::thread& t : threads) t.join();
  stop.store(true);
  writer.join();
  log.FlushCounts();
  std::vector<std::string> files = Files();
  ASSERT_EQ(files.size(), 1u);
  CountTotals t = ReadCounts(files[0]);
  EXPECT_TRUE(t.bad.empty()) << t.bad[0];
  EXPECT_EQ(t.n, uint64_t{kCounters} * kIters);
  EXPECT_EQ(t.bytes, uint64_t{kCounters} * kIters * 3);
  EXPECT_EQ(t.deregs, uint64_t{kCounters} * kIters);
}

// Threads meet a new site at once: the first to come writes its line (or several, racing),
// the others count there as soon as the site is in the table; nothing is lost in between.
TEST_F(EventLogTest, CountsAtASiteAddedWhileOthersCountAreExact) {
  EventLog log;
  log.Configure(dir_.c_str(), LogIdentity(), nullptr, nullptr);
  RawStack s = StackOf(5, 0);
  uint64_t key = EventLog::RegistrationKey(s, nullptr, false);
  constexpr int kThreadsHere = 4;
  constexpr int kIters = 5000;
  std::atomic<int> lines{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreadsHere; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) {
      }
      char buf[512];
      for (int i = 0; i < kIters; ++i) {
        if (!log.CountRegistration(key, 1)) {
          FirstLineAt(log, s, key, nullptr);
          lines.fetch_add(1);
        }
        TextBuffer b(buf, sizeof(buf));
        log.Begin(b, "note");
        log.End(b);
      }
    });
  }
  go.store(true);
  for (std::thread& t : threads) t.join();
  log.FlushCounts();
  std::vector<std::string> files = Files();
  ASSERT_EQ(files.size(), 1u);
  CountTotals t = ReadCounts(files[0]);
  EXPECT_TRUE(t.bad.empty()) << t.bad[0];
  EXPECT_EQ(t.n + static_cast<uint64_t>(lines.load()), uint64_t{kThreadsHere} * kIters);
}

// Counts wait at most 100 ms for a line: the first count or deregistration after that
// writes them on its own.
TEST_F(EventLogTest, CountsWithNoLineAreWrittenByALaterCount) {
  EventLog log;
  log.Configure(dir_.c_str(), LogIdentity(), nullptr, nullptr);
  uint64_t key = SitesWithFirstLines(log, 1, 2, 0)[0];
  ASSERT_TRUE(log.CountRegistration(key, 1));  // starts the clock
  ASSERT_TRUE(log.CountRegistration(key, 1));
  std::vector<std::string> files = Files();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(ReadCounts(files[0]).lines, 0);
  usleep(150 * 1000);
  log.CountDeregistration();
  CountTotals t = ReadCounts(files[0]);
  EXPECT_EQ(t.lines, 1);
  EXPECT_EQ(t.n, 2u);
  EXPECT_EQ(t.deregs, 1u);
}

// A forked child never writes its parent's counts: they stay the parent's, for its next line.
TEST_F(EventLogTest, ForkedChildLeavesItsParentsCounts) {
  EventLog log;
  log.Configure(dir_.c_str(), LogIdentity(), nullptr, nullptr);
  uint64_t key = SitesWithFirstLines(log, 1, 2, 0)[0];
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(log.CountRegistration(key, 8));
  int st = 0;
  pid_t child = ForkAndWait(
      [&] {
        log.ResetInChild(789);
        // A new file: the site is not in it, so its registration is a line again.
        bool counted = log.CountRegistration(key, 8);
        log.CountDeregistration();
        char buf[512];
        TextBuffer c(buf, sizeof(buf));
        log.Begin(c, "note");
        log.End(c);
        log.FlushCounts();
        return counted ? 1 : 0;
      },
      &st);
  ASSERT_GT(child, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the child counted at its parent's site";
  CountTotals c = ReadCounts(dir_ + "/forkguard.." + std::to_string(child) + ".789.jsonl");
  EXPECT_EQ(c.n, 0u);
  EXPECT_EQ(c.deregs, 1u);
  log.FlushCounts();
  std::string parent_file;
  for (const std::string& f : Files())
    if (f.find("." + std::to_string(getpid()) + ".") != std::string::npos) parent_file = f;
  CountTotals p = ReadCounts(parent_file);
  EXPECT_EQ(p.n, 4u);
  EXPECT_EQ(p.bytes, 32u);
  EXPECT_EQ(p.deregs, 0u);
}

TEST(ChildSegvTest, MessageNamesTheRange) {
  char buf[1024];
  ChildSegvRange r{0x1000, 0x401000, 0x1000, 0x401000, "ibv_reg_mr", "    #0 f (a+0x1)\n",
                   0,      nullptr};
  size_t n = FormatChildSegv(buf, sizeof(buf), 77, 0x2000, r);
  std::string s(buf, n);
  EXPECT_EQ(s,
            "forkguard: child 77 SIGSEGV at 0x2000: inside a range registered for RDMA by the "
            "parent (0x1000-0x401000, 4.0 MiB) registered by ibv_reg_mr at:\n    #0 f (a+0x1)\n");
  r.start = 0x1800;
  n = FormatChildSegv(buf, sizeof(buf), 77, 0x1000, r);
  EXPECT_THAT(std::string(buf, n), HasSubstr("in a page shared with a range"));
}

}  // namespace
}  // namespace forkguard
