#include "shim/event_log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "shim/child.h"
#include "shim/text_buffer.h"

namespace forkguard {
namespace {

// A strict RFC 8259 syntax check, enough to prove every line is valid JSON.
class JsonChecker {
 public:
  explicit JsonChecker(const std::string& s) : s_(s) {}
  bool Valid() {
    Ws();
    if (!Value()) return false;
    Ws();
    return i_ == s_.size();
  }

 private:
  bool Value() {
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') return Object();
    if (c == '[') return Array();
    if (c == '"') return String();
    if (c == '-' || (c >= '0' && c <= '9')) return Number();
    for (const char* lit : {"true", "false", "null"}) {
      std::string l(lit);
      if (s_.compare(i_, l.size(), l) == 0) {
        i_ += l.size();
        return true;
      }
    }
    return false;
  }
  bool Object() {
    ++i_;
    Ws();
    if (Peek('}')) return ++i_, true;
    for (;;) {
      Ws();
      if (!String()) return false;
      Ws();
      if (!Peek(':')) return false;
      ++i_;
      Ws();
      if (!Value()) return false;
      Ws();
      if (Peek('}')) return ++i_, true;
      if (!Peek(',')) return false;
      ++i_;
    }
  }
  bool Array() {
    ++i_;
    Ws();
    if (Peek(']')) return ++i_, true;
    for (;;) {
      Ws();
      if (!Value()) return false;
      Ws();
      if (Peek(']')) return ++i_, true;
      if (!Peek(',')) return false;
      ++i_;
    }
  }
  bool String() {
    if (!Peek('"')) return false;
    ++i_;
    while (i_ < s_.size()) {
      auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') return ++i_, true;
      if (c < 0x20) return false;
      if (c == '\\') {
        ++i_;
        if (i_ >= s_.size()) return false;
        char e = s_[i_];
        if (e == 'u') {
          for (int k = 0; k < 4; ++k) {
            ++i_;
            if (i_ >= s_.size() || !isxdigit(static_cast<unsigned char>(s_[i_]))) return false;
          }
        } else if (std::string("\"\\/bfnrt").find(e) == std::string::npos) {
          return false;
        }
      }
      ++i_;
    }
    return false;
  }
  bool Number() {
    size_t start = i_;
    if (Peek('-')) ++i_;
    while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    return i_ > start;
  }
  bool Peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  void Ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t')) ++i_;
  }
  const std::string& s_;
  size_t i_ = 0;
};

bool IsValidJson(const std::string& s) { return JsonChecker(s).Valid(); }

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

TEST(TextBufferTest, JsonEscaping) {
  char buf[512];
  TextBuffer b(buf, sizeof(buf));
  b.JsonStr("a\"b\\c\nd\te\x01\x7f");
  EXPECT_STREQ(buf, "\"a\\\"b\\\\c\\nd\\te\\u0001\\u007f\"");
  EXPECT_TRUE(IsValidJson(buf));
  b.Clear();
  b.JsonStr("caf\xc3\xa9 \xff\xfe bad \xe2\x82");  // valid UTF-8, invalid bytes, cut sequence
  EXPECT_TRUE(IsValidJson(buf));
  EXPECT_NE(std::string(buf).find("caf\xc3\xa9"), std::string::npos);
  EXPECT_NE(std::string(buf).find("\\ufffd"), std::string::npos);
  b.Clear();
  b.JsonStr(nullptr);
  EXPECT_STREQ(buf, "null");
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
  EXPECT_NE(files[0].find("/forkguard.host\"1." + std::to_string(getpid()) + "."),
            std::string::npos);
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
  EXPECT_NE(lines[0].find("\"rank\":3,\"local_rank\":null,\"job\":null"), std::string::npos);
  EXPECT_NE(lines[0].find("\"pid\":" + std::to_string(getpid())), std::string::npos);
  EXPECT_NE(lines[0].find("\"start_ns\":"), std::string::npos);
  EXPECT_EQ(lines[1].rfind("{\"event\":\"note\",\"ts\":", 0), 0u) << lines[1];
  EXPECT_NE(lines[1].find("\"seq\":0"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("\"pid\""), std::string::npos) << lines[1];
  EXPECT_EQ(lines[2].rfind("{\"event\":\"module\",\"id\":0,\"path\":\"/", 0), 0u) << lines[2];
  EXPECT_NE(lines[2].find("\"build_id\":"), std::string::npos) << lines[2];
  // The unknown 0x1234 is a raw address (module -1).
  EXPECT_EQ(lines[3].rfind("{\"event\":\"stack\",\"id\":0,\"frames\":[[0,", 0), 0u) << lines[3];
  EXPECT_NE(lines[3].find(",[-1,4660]]}"), std::string::npos) << lines[3];
  EXPECT_NE(lines[4].find("\"seq\":1,\"stack\":0}"), std::string::npos) << lines[4];
  EXPECT_NE(lines[5].find("\"seq\":2,\"stack\":0}"), std::string::npos) << lines[5];
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
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    log.ResetInChild(456);
    TextBuffer c(buf, sizeof(buf));
    log.Begin(c, "rdma_init");
    AppendStackRef(c, log, "stack", s, nullptr, false);
    log.End(c);
    _exit(0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  std::ifstream in(dir_ + "/forkguard.." + std::to_string(child) + ".456.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find("\"pid\":" + std::to_string(child)), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1].rfind("{\"event\":\"module\",\"id\":0,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("{\"event\":\"stack\",\"id\":0,", 0), 0u) << lines[2];
  EXPECT_NE(lines[3].find("\"seq\":0,"), std::string::npos) << lines[3];
  EXPECT_NE(lines[3].find("\"stack\":0}"), std::string::npos) << lines[3];
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
  EXPECT_NE(line.find("\"event\":\"note\""), std::string::npos);
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
  EXPECT_NE(warnings[0].find("symlink"), std::string::npos);
  EXPECT_EQ(warnings[1].rfind("forkguard: ignoring FORKGUARD_LOG=", 0), 0u);
  EXPECT_NE(warnings[1].find("unknown template %q"), std::string::npos) << warnings[1];
  struct stat st;
  ASSERT_EQ(stat((dir_ + "/missing/nested").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
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
  char buf[1024];
  TextBuffer b(buf, sizeof(buf));
  log.Begin(b, "note");
  log.End(b);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    log.ResetInChild(123);
    TextBuffer c(buf, sizeof(buf));
    log.Begin(c, "note");
    log.End(c);
    _exit(0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  std::string child_file = expect_dir + "/forkguard.node3." + std::to_string(child) + ".123.jsonl";
  std::ifstream cin(child_file);
  std::string line;
  ASSERT_TRUE(std::getline(cin, line)) << child_file;  // its header
  EXPECT_NE(line.find("\"rank\":5,\"local_rank\":1,\"job\":\"77\",\"step\":4,"), std::string::npos)
      << line;
  EXPECT_NE(line.find("\"pid\":" + std::to_string(child)), std::string::npos) << line;
  FILE* p = popen(("ls " + expect_dir).c_str(), "r");
  char name[512];
  int files = 0;
  while (p != nullptr && fgets(name, sizeof(name), p) != nullptr) ++files;
  if (p != nullptr) pclose(p);
  EXPECT_EQ(files, 2) << "parent and child, one file each, in " << expect_dir;
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
  EXPECT_NE(std::string(buf, n).find("in a page shared with a range"), std::string::npos);
}

}  // namespace
}  // namespace forkguard
