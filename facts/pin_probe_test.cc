// The pin probe on this host's kernel (6.x: it copies pinned pages at fork, and every kernel
// since 5.9 does so for anonymous memory), and its per-boot cache.
#include "facts/pin_probe.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace forkguard::facts {
namespace {

std::string Describe(const PinProbe& p) {
  char buf[512];
  size_t n = FormatPinProbe(p, buf, sizeof(buf));
  return std::string(buf, n);
}

TEST(PinProbe, AnonymousIsIntactOnThisHost) {
  PinProbe p;
  ProbeKind(MemoryKind::kAnonymous, &p);
  int a = static_cast<int>(MemoryKind::kAnonymous);
  EXPECT_EQ(PinFate::kIntact, p.fate[a]) << Describe(p);
  EXPECT_EQ(ProbeWhy::kNone, p.why[a]) << Describe(p);
}

// The detector can say stale: pinned pages the parent no longer maps keep the old data.
TEST(PinProbe, SaysStaleWhenThePinKeepsTheOldPage) {
  PinProbe p;
  ProbeKindForTesting(MemoryKind::kAnonymous, &p, /*discard_instead_of_fork=*/true);
  EXPECT_EQ(PinFate::kStale, p.fate[static_cast<int>(MemoryKind::kAnonymous)]) << Describe(p);
}

// THP and hugetlb: measured where the host has them, else unknown with the reason - never
// stale on this 6.x host.
TEST(PinProbe, HugePagesAreIntactOrUnknownWithAReason) {
  utsname u{};
  ASSERT_EQ(0, uname(&u));
  ASSERT_GE(atoi(u.release), 6) << "this test knows the host's kernel 6.x: " << u.release;
  PinProbe p = RunPinProbe();
  for (MemoryKind k : {MemoryKind::kThp, MemoryKind::kHugetlb}) {
    int i = static_cast<int>(k);
    EXPECT_NE(PinFate::kStale, p.fate[i]) << MemoryKindName(k) << "\n" << Describe(p);
    if (p.fate[i] == PinFate::kUnknown) {
      EXPECT_NE(ProbeWhy::kNone, p.why[i]) << Describe(p);
      EXPECT_NE(ProbeWhy::kFailed, p.why[i]) << Describe(p);
    }
  }
  printf("%s", Describe(p).c_str());
}

TEST(PinProbe, TextRoundTrip) {
  PinProbe p;
  p.fate[0] = PinFate::kIntact;
  p.why[0] = ProbeWhy::kNone;
  p.fate[1] = PinFate::kUnknown;
  p.why[1] = ProbeWhy::kFailed;
  p.err[1] = 22;
  p.fate[2] = PinFate::kStale;
  p.why[2] = ProbeWhy::kNone;
  char buf[512];
  size_t n = FormatPinProbe(p, buf, sizeof(buf));
  buf[n] = '\0';
  PinProbe q;
  ASSERT_TRUE(ParsePinProbe(buf, &q)) << buf;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p.fate[i], q.fate[i]) << buf;
    EXPECT_EQ(p.why[i], q.why[i]) << buf;
    EXPECT_EQ(p.err[i], q.err[i]) << buf;
  }
  EXPECT_FALSE(ParsePinProbe("something else\nanonymous intact\n", &q));
  EXPECT_FALSE(ParsePinProbe("forkguard pin-probe 1\nanonymous sideways\n", &q));
}

TEST(PinProbe, CachedOncePerBoot) {
  std::string dir = std::string(getenv("TEST_TMPDIR")) + "/cache/sub";
  setenv("FORKGUARD_CACHE_DIR", dir.c_str(), 1);
  PinProbe p;
  EXPECT_FALSE(ReadPinProbeCache(&p));
  bool probed = false;
  PinProbe first = PinProbeForThisBoot(&probed);
  EXPECT_TRUE(probed);
  struct stat st;
  ASSERT_EQ(0, stat(dir.c_str(), &st));
  EXPECT_EQ(0700u, st.st_mode & 0777);
  char path[1200];
  ASSERT_TRUE(PinProbeCachePath(path, sizeof(path)));
  ASSERT_EQ(0, stat(path, &st));
  EXPECT_EQ(0600u, st.st_mode & 0777);
  PinProbe second = PinProbeForThisBoot(&probed);
  // The second call reads the cache; it probes again only kinds unknown for a reason that
  // can change within a boot (here: hugetlb without reserved pages).
  int huge = static_cast<int>(MemoryKind::kHugetlb);
  int thp = static_cast<int>(MemoryKind::kThp);
  bool changeable =
      (first.fate[huge] == PinFate::kUnknown && first.why[huge] == ProbeWhy::kNoHugetlbPages) ||
      (first.fate[thp] == PinFate::kUnknown && first.why[thp] == ProbeWhy::kNoThp);
  EXPECT_EQ(changeable, probed);
  for (int i = 0; i < kMemoryKinds; ++i) {
    EXPECT_EQ(first.fate[i], second.fate[i]);
    EXPECT_EQ(first.why[i], second.why[i]);
  }
  unsetenv("FORKGUARD_CACHE_DIR");
}

// A cache directory of this test's own, named by FORKGUARD_CACHE_DIR, with this boot's file
// path in path_ (nothing there yet).
class PinProbeCacheFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(getenv("TEST_TMPDIR")) + "/cachefile";
    mkdir(dir_.c_str(), 0700);
    setenv("FORKGUARD_CACHE_DIR", dir_.c_str(), 1);
    char path[1200];
    ASSERT_TRUE(PinProbeCachePath(path, sizeof(path)));
    path_ = path;
    unlink(path_.c_str());
  }
  void TearDown() override {
    unlink(path_.c_str());
    unsetenv("FORKGUARD_CACHE_DIR");
  }
  // A good cache file at path_, mode 0600.
  void WriteGood() {
    PinProbe p;
    p.fate[0] = PinFate::kIntact;
    char err[256];
    ASSERT_TRUE(WritePinProbeCache(p, err, sizeof(err))) << err;
  }
  std::string dir_;
  std::string path_;
};

// A FIFO where the cache file goes is refused at once: the reader never waits for a writer.
TEST_F(PinProbeCacheFile, FifoDoesNotHang) {
  ASSERT_EQ(0, mkfifo(path_.c_str(), 0600));
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(5);  // killed by SIGALRM if the read blocks
    PinProbe p;
    _exit(ReadPinProbeCache(&p) ? 1 : 0);
  }
  int st = 0;
  ASSERT_EQ(pid, waitpid(pid, &st, 0));
  ASSERT_FALSE(WIFSIGNALED(st)) << "killed by signal " << WTERMSIG(st) << ": the read blocked";
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "a FIFO was read as a cache";
}

// A file someone else could have written (group or world writable) or owned by another user
// does not feed the verdict; this user's 0600 file does.
TEST_F(PinProbeCacheFile, OnlyAFileOfThisUserThatNoOneElseCanWriteIsRead) {
  WriteGood();
  PinProbe p;
  EXPECT_TRUE(ReadPinProbeCache(&p));
  EXPECT_EQ(PinFate::kIntact, p.fate[0]);
  for (mode_t mode : {0666, 0622, 0620, 0602}) {
    ASSERT_EQ(0, chmod(path_.c_str(), mode));
    EXPECT_FALSE(ReadPinProbeCache(&p)) << std::oct << mode;
  }
  ASSERT_EQ(0, chmod(path_.c_str(), 0644));
  EXPECT_TRUE(ReadPinProbeCache(&p));
  if (geteuid() == 0) {
    ASSERT_EQ(0, chown(path_.c_str(), 65534, 65534));
    EXPECT_FALSE(ReadPinProbeCache(&p)) << "a file of uid 65534";
  }
  // A symlink to a good file is not followed.
  unlink(path_.c_str());
  std::string real = dir_ + "/real";
  WriteGood();
  ASSERT_EQ(0, rename(path_.c_str(), real.c_str()));
  ASSERT_EQ(0, symlink(real.c_str(), path_.c_str()));
  EXPECT_FALSE(ReadPinProbeCache(&p));
  unlink(real.c_str());
}

// Under AT_SECURE no path comes from the environment: with a good cache where
// FORKGUARD_CACHE_DIR (or XDG_CACHE_HOME, HOME) points, nothing is read or named.
TEST_F(PinProbeCacheFile, SecureProcessTakesNoPathFromTheEnvironment) {
  WriteGood();
  PinProbe p;
  ASSERT_TRUE(ReadPinProbeCache(&p, false));
  char out[1200];
  EXPECT_FALSE(PinProbeCacheDir(out, sizeof(out), true));
  EXPECT_FALSE(PinProbeCachePath(out, sizeof(out), true));
  EXPECT_FALSE(ReadPinProbeCache(&p, true));
  unsetenv("FORKGUARD_CACHE_DIR");
  setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
  EXPECT_TRUE(PinProbeCacheDir(out, sizeof(out), false));
  EXPECT_FALSE(PinProbeCacheDir(out, sizeof(out), true));
  unsetenv("XDG_CACHE_HOME");
  EXPECT_FALSE(PinProbeCacheDir(out, sizeof(out), true)) << "HOME=" << getenv("HOME");
  // This test is not under AT_SECURE: the one-argument forms read the environment.
  setenv("FORKGUARD_CACHE_DIR", dir_.c_str(), 1);
  EXPECT_TRUE(ReadPinProbeCache(&p));
}

}  // namespace
}  // namespace forkguard::facts
