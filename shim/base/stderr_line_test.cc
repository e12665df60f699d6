#include "shim/base/stderr_line.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace forkguard {
namespace {

std::string Prefix(pid_t pid) {
  char buf[96];
  size_t n = FormatStderrPrefix(buf, sizeof(buf), pid);
  return std::string(buf, n);
}

// What `fn` writes to a pipe.
template <typename Fn>
std::string Captured(Fn fn) {
  int p[2];
  EXPECT_EQ(pipe(p), 0);
  fn(p[1]);
  close(p[1]);
  std::string out;
  char buf[8192];
  for (ssize_t n; (n = read(p[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(p[0]);
  return out;
}

TEST(StderrLineTest, PrefixNamesHostRankAndPid) {
  SetStderrIdentity("node1", 3);
  EXPECT_EQ(Prefix(1234), "[node1 r3 1234] ");
  SetStderrIdentity("node1", -1);
  EXPECT_EQ(Prefix(1234), "[node1 1234] ");
  SetStderrIdentity("", 0);
  EXPECT_EQ(Prefix(5), "[? r0 5] ");
}

TEST(StderrLineTest, EveryLinePrefixedAndTerminated) {
  SetStderrIdentity("h", 7);
  std::string p = Prefix(getpid());
  std::string text = "forkguard: one\n  two\n\nthree";
  std::string out = Captured([&](int fd) { WriteLinesTo(fd, text.data(), text.size()); });
  EXPECT_EQ(out, p + "forkguard: one\n" + p + "  two\n" + p + "\n" + p + "three\n");
}

TEST(StderrLineTest, LongLineCutToPipeBufWithMarker) {
  SetStderrIdentity("h", 7);
  std::string p = Prefix(getpid());
  // A 3-byte UTF-8 character straddling the cut must not be split.
  size_t cut_room = kMaxStderrLine - p.size() - 1 - (sizeof(kCutMarker) - 1);
  std::string text =
      std::string(cut_room - 1, 'a') + "\xe2\x80\x93" + std::string(6000, 'b') + "\nnext\n";
  std::string out = Captured([&](int fd) { WriteLinesTo(fd, text.data(), text.size()); });
  size_t nl = out.find('\n');
  ASSERT_NE(nl, std::string::npos);
  std::string first = out.substr(0, nl + 1);
  EXPECT_LE(first.size(), kMaxStderrLine);
  EXPECT_EQ(first.rfind(p, 0), 0u);
  EXPECT_EQ(first.substr(first.size() - sizeof(kCutMarker)), std::string(kCutMarker) + "\n");
  std::string kept = first.substr(p.size(), first.size() - p.size() - sizeof(kCutMarker));
  EXPECT_EQ(kept.find_first_not_of('a'), std::string::npos) << "cut inside the character";
  EXPECT_EQ(out.substr(nl + 1), p + "next\n");
  // A line that fits exactly is not cut.
  std::string exact(kMaxStderrLine - p.size() - 1, 'x');
  out = Captured([&](int fd) { WriteLinesTo(fd, exact.data(), exact.size()); });
  EXPECT_EQ(out, p + exact + "\n");
}

TEST(StderrLineTest, PreservesErrno) {
  SetStderrIdentity("h", 1);
  std::string out = Captured([&](int fd) {
    errno = 1234;
    WriteLinesTo(fd, "x\n", 2);
    EXPECT_EQ(errno, 1234);
    errno = 0;
  });
  EXPECT_EQ(out.back(), '\n');
  errno = 0;
  WriteLinesTo(-1, "x\n", 2);  // EBADF inside, not seen outside
  EXPECT_EQ(errno, 0);
}

// Many processes, long multi-line messages, one pipe: lines interleave only whole.
TEST(StderrLineTest, ConcurrentWritersInterleaveOnlyBetweenLines) {
  constexpr int kProcs = 24;
  constexpr int kMessages = 40;
  SetStderrIdentity("node0", 0);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  std::vector<pid_t> kids;
  for (int k = 0; k < kProcs; ++k) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(p[0]);
      SetStderrIdentity("node0", k);
      std::string msg;
      for (int i = 0; i < 30; ++i) {
        // Lines of 100..3900 bytes: a 30-line message is far over PIPE_BUF.
        msg += "line " + std::to_string(i) + " " + std::string(100 + 130 * i, 'a' + k % 26) + "\n";
      }
      for (int m = 0; m < kMessages; ++m) WriteLinesTo(p[1], msg.data(), msg.size());
      _exit(0);
    }
    kids.push_back(pid);
  }
  close(p[1]);
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = read(p[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(p[0]);
  for (pid_t pid : kids) {
    int st = 0;
    waitpid(pid, &st, 0);
  }
  std::map<pid_t, int> next_line;  // per writer: the line number it must write next
  std::istringstream in(out);
  std::string line;
  int lines = 0;
  for (; std::getline(in, line); ++lines) {
    ASSERT_EQ(line.rfind("[node0 r", 0), 0u) << "line " << lines << " not prefixed";
    int k = -1, pid = -1, i = -1;
    char rest[8];
    ASSERT_EQ(sscanf(line.c_str(), "[node0 r%d %d] line %d %1s", &k, &pid, &i, rest), 4) << line;
    ASSERT_EQ(i, next_line[pid] % 30) << "pid " << pid << " lost or split a line";
    ++next_line[pid];
    std::string body = line.substr(line.find(' ', line.find("] line ") + 7) + 1);
    ASSERT_EQ(body, std::string(100 + 130 * i, 'a' + k % 26)) << "line torn or mixed";
  }
  EXPECT_EQ(lines, kProcs * kMessages * 30);
  EXPECT_EQ(next_line.size(), static_cast<size_t>(kProcs));
}

}  // namespace
}  // namespace forkguard
