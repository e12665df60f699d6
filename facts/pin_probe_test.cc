// The pin probe on this host's kernel (6.x: it copies pinned pages at fork, and every kernel
// since 5.9 does so for anonymous memory), and its per-boot cache.
#include "facts/pin_probe.h"

#include <fcntl.h>
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

// A system cache directory that does not exist: the tests of the user's cache do not depend
// on what this host's /run/forkguard holds.
constexpr char kNoSystemDir[] = "/nonexistent/forkguard";

// Makes `path` a FIFO with `mode` and reads it with `read` in a child that SIGALRM kills after
// 5 s (a read that blocks): the child's wait status (-1 when it did not run); the child exits 0
// when `read` refused the FIFO.
template <typename Read>
int StatusOfReadingAFifo(const std::string& path, mode_t mode, Read read) {
  if (mkfifo(path.c_str(), mode) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    alarm(5);
    PinProbe p;
    _exit(read(&p) ? 1 : 0);
  }
  int st = -1;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
  return st;
}

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
  EXPECT_FALSE(ReadUserPinProbeCache(&p, false));
  bool probed = false;
  PinProbe first = PinProbeForThisBoot(&probed, nullptr, kNoSystemDir);
  EXPECT_TRUE(probed);
  struct stat st;
  ASSERT_EQ(0, stat(dir.c_str(), &st));
  EXPECT_EQ(0700u, st.st_mode & 0777);
  char path[1200];
  ASSERT_TRUE(PinProbeCachePath(path, sizeof(path)));
  ASSERT_EQ(0, stat(path, &st));
  EXPECT_EQ(0600u, st.st_mode & 0777);
  PinProbe second = PinProbeForThisBoot(&probed, nullptr, kNoSystemDir);
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
  int st = StatusOfReadingAFifo(path_, 0600,
                                [](PinProbe* p) { return ReadUserPinProbeCache(p, false); });
  ASSERT_NE(st, -1);
  ASSERT_FALSE(WIFSIGNALED(st)) << "killed by signal " << WTERMSIG(st) << ": the read blocked";
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "a FIFO was read as a cache";
}

// A file someone else could have written (group or world writable) or owned by another user
// does not feed the verdict; this user's 0600 file does.
TEST_F(PinProbeCacheFile, OnlyAFileOfThisUserThatNoOneElseCanWriteIsRead) {
  WriteGood();
  PinProbe p;
  EXPECT_TRUE(ReadUserPinProbeCache(&p, false));
  EXPECT_EQ(PinFate::kIntact, p.fate[0]);
  for (mode_t mode : {0666, 0622, 0620, 0602}) {
    ASSERT_EQ(0, chmod(path_.c_str(), mode));
    EXPECT_FALSE(ReadUserPinProbeCache(&p, false)) << std::oct << mode;
  }
  ASSERT_EQ(0, chmod(path_.c_str(), 0644));
  EXPECT_TRUE(ReadUserPinProbeCache(&p, false));
  if (geteuid() == 0) {
    ASSERT_EQ(0, chown(path_.c_str(), 65534, 65534));
    EXPECT_FALSE(ReadUserPinProbeCache(&p, false)) << "a file of uid 65534";
  }
  // A symlink to a good file is not followed.
  unlink(path_.c_str());
  std::string real = dir_ + "/real";
  WriteGood();
  ASSERT_EQ(0, rename(path_.c_str(), real.c_str()));
  ASSERT_EQ(0, symlink(real.c_str(), path_.c_str()));
  EXPECT_FALSE(ReadUserPinProbeCache(&p, false));
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
  EXPECT_FALSE(ReadPinProbeCache(&p, true, kNoSystemDir, nullptr));
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

// The system cache (`forkguard probe --system`): a directory of this test's own in place of
// /run/forkguard (dir_), a user's cache directory beside it (FORKGUARD_CACHE_DIR). The tests
// run as root, as `forkguard probe --system` does; files are chowned to uid 65534 to be
// another user's.
class SystemPinProbeCache : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0u, geteuid()) << "the system cache is root's: these tests run as root";
    std::string base = std::string(getenv("TEST_TMPDIR")) + "/system";
    ASSERT_EQ(0, system(("rm -rf '" + base + "'").c_str()));
    ASSERT_EQ(0, mkdir(base.c_str(), 0755));
    run_ = base + "/run";
    ASSERT_EQ(0, mkdir(run_.c_str(), 0755));
    dir_ = run_ + "/forkguard";
    user_ = base + "/user";
    ASSERT_EQ(0, mkdir(user_.c_str(), 0700));
    setenv("FORKGUARD_CACHE_DIR", user_.c_str(), 1);
  }
  void TearDown() override { unsetenv("FORKGUARD_CACHE_DIR"); }

  // Writes `p` as the system cache; its path in path_.
  void WriteSystem(const PinProbe& p) {
    char err[256];
    ASSERT_TRUE(WriteSystemPinProbeCache(p, dir_.c_str(), err, sizeof(err))) << err;
    char path[1200];
    ASSERT_TRUE(SystemPinProbeCachePath(dir_.c_str(), path, sizeof(path)));
    path_ = path;
  }
  static PinProbe Answers(PinFate anonymous, PinFate hugetlb, ProbeWhy hugetlb_why) {
    PinProbe p;
    int a = static_cast<int>(MemoryKind::kAnonymous);
    int h = static_cast<int>(MemoryKind::kHugetlb);
    int t = static_cast<int>(MemoryKind::kThp);
    p.fate[a] = anonymous;
    p.why[a] = anonymous == PinFate::kUnknown ? ProbeWhy::kMemlock : ProbeWhy::kNone;
    p.fate[t] = PinFate::kUnknown;
    p.why[t] = ProbeWhy::kNoThp;
    p.fate[h] = hugetlb;
    p.why[h] = hugetlb_why;
    return p;
  }
  bool ReadSystem(PinProbe* p) { return ReadSystemPinProbeCache(p, dir_.c_str()); }

  std::string run_, dir_, user_, path_;
};

constexpr int kAnon = static_cast<int>(MemoryKind::kAnonymous);
constexpr int kHuge = static_cast<int>(MemoryKind::kHugetlb);
constexpr int kThp = static_cast<int>(MemoryKind::kThp);

// The directory is made root's 0755, the file 0644, whatever the umask; read back as written.
TEST_F(SystemPinProbeCache, WrittenRootOwnedAndReadBack) {
  mode_t old = umask(077);
  WriteSystem(Answers(PinFate::kIntact, PinFate::kStale, ProbeWhy::kNone));
  umask(old);
  struct stat st;
  ASSERT_EQ(0, lstat(dir_.c_str(), &st));
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(0755u, st.st_mode & 07777);
  EXPECT_EQ(0u, st.st_uid);
  ASSERT_EQ(0, lstat(path_.c_str(), &st));
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(0644u, st.st_mode & 07777);
  EXPECT_EQ(0u, st.st_uid);
  PinProbe p;
  ASSERT_TRUE(ReadSystem(&p));
  EXPECT_EQ(PinFate::kIntact, p.fate[kAnon]) << Describe(p);
  EXPECT_EQ(PinFate::kStale, p.fate[kHuge]) << Describe(p);
  EXPECT_EQ(ProbeWhy::kNoThp, p.why[kThp]) << Describe(p);
  // Nothing else is left in the directory (the temporary file was renamed).
  EXPECT_EQ(0, system(("test \"$(ls -A '" + dir_ + "' | wc -l)\" = 1").c_str()));
  // Written again (a later run in the same boot): replaced in place.
  WriteSystem(Answers(PinFate::kIntact, PinFate::kIntact, ProbeWhy::kNone));
  ASSERT_TRUE(ReadSystem(&p));
  EXPECT_EQ(PinFate::kIntact, p.fate[kHuge]) << Describe(p);
}

// A directory already there with a mode others can write is made 0755 before the file goes in.
TEST_F(SystemPinProbeCache, WriteTightensTheDirectorysMode) {
  ASSERT_EQ(0, mkdir(dir_.c_str(), 0700));
  ASSERT_EQ(0, chmod(dir_.c_str(), 0777));
  WriteSystem(Answers(PinFate::kIntact, PinFate::kStale, ProbeWhy::kNone));
  struct stat st;
  ASSERT_EQ(0, stat(dir_.c_str(), &st));
  EXPECT_EQ(0755u, st.st_mode & 07777);
}

// The writer follows no symbolic link: not one in the directory's place, not one in the file's
// place (replaced, not written through), and it writes nothing into another user's directory.
TEST_F(SystemPinProbeCache, WriteFollowsNoSymlinkAndRefusesAnotherUsersDirectory) {
  std::string elsewhere = run_ + "/elsewhere";
  ASSERT_EQ(0, mkdir(elsewhere.c_str(), 0755));
  ASSERT_EQ(0, symlink(elsewhere.c_str(), dir_.c_str()));
  char err[256];
  EXPECT_FALSE(WriteSystemPinProbeCache(PinProbe(), dir_.c_str(), err, sizeof(err)));
  EXPECT_NE(std::string(err).find(dir_), std::string::npos) << err;
  EXPECT_EQ(0, system(("test -z \"$(ls -A '" + elsewhere + "')\"").c_str())) << "written through";
  ASSERT_EQ(0, unlink(dir_.c_str()));

  WriteSystem(Answers(PinFate::kIntact, PinFate::kStale, ProbeWhy::kNone));
  std::string victim = run_ + "/victim";
  ASSERT_EQ(0, close(open(victim.c_str(), O_WRONLY | O_CREAT, 0644)));
  ASSERT_EQ(0, unlink(path_.c_str()));
  ASSERT_EQ(0, symlink(victim.c_str(), path_.c_str()));
  WriteSystem(Answers(PinFate::kIntact, PinFate::kStale, ProbeWhy::kNone));
  struct stat st;
  ASSERT_EQ(0, lstat(path_.c_str(), &st));
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the link was replaced by the file";
  ASSERT_EQ(0, stat(victim.c_str(), &st));
  EXPECT_EQ(0, st.st_size) << "written through the link";

  ASSERT_EQ(0, chown(dir_.c_str(), 65534, 65534));
  EXPECT_FALSE(WriteSystemPinProbeCache(PinProbe(), dir_.c_str(), err, sizeof(err)));
  EXPECT_NE(std::string(err).find("owned by uid 65534"), std::string::npos) << err;
  EXPECT_FALSE(WriteSystemPinProbeCache(PinProbe(), "relative/dir", err, sizeof(err)));
}

// Trusted only when root wrote it where only root can write: the directory and the file owned
// by root and not writable by group or others, a regular file, no symbolic link, under 2 KiB.
TEST_F(SystemPinProbeCache, OnlyRootsFileInRootsDirectoryIsRead) {
  WriteSystem(Answers(PinFate::kIntact, PinFate::kStale, ProbeWhy::kNone));
  PinProbe p;
  ASSERT_TRUE(ReadSystem(&p));

  ASSERT_EQ(0, chown(path_.c_str(), 65534, 65534));
  EXPECT_FALSE(ReadSystem(&p)) << "a file of uid 65534";
  ASSERT_EQ(0, chown(path_.c_str(), 0, 0));
  for (mode_t mode : {0664, 0646, 0666}) {
    ASSERT_EQ(0, chmod(path_.c_str(), mode));
    EXPECT_FALSE(ReadSystem(&p)) << "file mode " << std::oct << mode;
  }
  ASSERT_EQ(0, chmod(path_.c_str(), 0600));
  EXPECT_TRUE(ReadSystem(&p)) << "root's 0600 file (readable by root, as this test)";
  ASSERT_EQ(0, chmod(path_.c_str(), 0644));

  ASSERT_EQ(0, chown(dir_.c_str(), 65534, 65534));
  EXPECT_FALSE(ReadSystem(&p)) << "a directory of uid 65534";
  ASSERT_EQ(0, chown(dir_.c_str(), 0, 0));
  for (mode_t mode : {0775, 0757, 0777, 01777}) {
    ASSERT_EQ(0, chmod(dir_.c_str(), mode));
    EXPECT_FALSE(ReadSystem(&p)) << "directory mode " << std::oct << mode;
  }
  ASSERT_EQ(0, chmod(dir_.c_str(), 0755));
  EXPECT_TRUE(ReadSystem(&p));

  // The directory through a symbolic link: refused (O_NOFOLLOW), though what it names is good.
  std::string link = run_ + "/link";
  ASSERT_EQ(0, symlink(dir_.c_str(), link.c_str()));
  EXPECT_FALSE(ReadSystemPinProbeCache(&p, link.c_str()));

  // The file as a symbolic link to a good file: refused.
  std::string real = dir_ + "/real";
  ASSERT_EQ(0, rename(path_.c_str(), real.c_str()));
  ASSERT_EQ(0, symlink(real.c_str(), path_.c_str()));
  EXPECT_FALSE(ReadSystem(&p));
  ASSERT_EQ(0, unlink(path_.c_str()));

  // 2 KiB or more: not a cache.
  std::string big = "forkguard pin-probe 1\nanonymous intact\n";
  big.resize(2048, '#');
  FILE* f = fopen(path_.c_str(), "w");
  ASSERT_NE(nullptr, f);
  fwrite(big.data(), 1, big.size(), f);
  fclose(f);
  ASSERT_EQ(0, chmod(path_.c_str(), 0644));
  EXPECT_FALSE(ReadSystem(&p));
  ASSERT_EQ(0, truncate(path_.c_str(), 2047));
  EXPECT_TRUE(ReadSystem(&p)) << "2047 bytes";
  ASSERT_EQ(0, unlink(path_.c_str()));

  // A FIFO in the file's place is refused at once.
  int st = StatusOfReadingAFifo(path_, 0644, [this](PinProbe* q) { return ReadSystem(q); });
  ASSERT_NE(st, -1);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
}

// The merge, per kind: a measured answer from either cache wins (the user's first); without
// one, the user's unknown and its reason, else the system's.
TEST(PinProbeMerge, MeasuredWinsPerKind) {
  PinProbe user;
  user.fate[kAnon] = PinFate::kIntact;
  user.why[kAnon] = ProbeWhy::kNone;
  user.fate[kHuge] = PinFate::kUnknown;
  user.why[kHuge] = ProbeWhy::kMemlock;
  user.fate[kThp] = PinFate::kUnknown;
  user.why[kThp] = ProbeWhy::kNoThp;
  PinProbe sys;
  sys.fate[kAnon] = PinFate::kUnknown;
  sys.why[kAnon] = ProbeWhy::kFailed;
  sys.err[kAnon] = 5;
  sys.fate[kHuge] = PinFate::kStale;
  sys.why[kHuge] = ProbeWhy::kNone;
  sys.fate[kThp] = PinFate::kUnknown;
  sys.why[kThp] = ProbeWhy::kNoIoUring;
  PinProbe m;
  MergePinProbe(&user, &sys, &m);
  EXPECT_EQ(PinFate::kIntact, m.fate[kAnon]) << "the user's measured answer: " << Describe(m);
  EXPECT_EQ(ProbeWhy::kNone, m.why[kAnon]);
  EXPECT_EQ(0, m.err[kAnon]);
  EXPECT_EQ(PinFate::kStale, m.fate[kHuge]) << "the system's measured answer: " << Describe(m);
  EXPECT_EQ(ProbeWhy::kNone, m.why[kHuge]);
  EXPECT_EQ(PinFate::kUnknown, m.fate[kThp]);
  EXPECT_EQ(ProbeWhy::kNoThp, m.why[kThp]) << "the user's reason: " << Describe(m);

  // Both measured (they agree on one kernel; if not, the user's).
  sys.fate[kAnon] = PinFate::kStale;
  sys.why[kAnon] = ProbeWhy::kNone;
  MergePinProbe(&user, &sys, &m);
  EXPECT_EQ(PinFate::kIntact, m.fate[kAnon]);

  // A kind the user's cache lacks (not probed): the system's answer, even unknown.
  user.why[kThp] = ProbeWhy::kNotProbed;
  MergePinProbe(&user, &sys, &m);
  EXPECT_EQ(ProbeWhy::kNoIoUring, m.why[kThp]);

  // One cache alone is that cache; none is "not probed".
  MergePinProbe(nullptr, &sys, &m);
  EXPECT_EQ(PinFate::kStale, m.fate[kAnon]);
  EXPECT_EQ(ProbeWhy::kNoIoUring, m.why[kThp]);
  MergePinProbe(&user, nullptr, &m);
  EXPECT_EQ(ProbeWhy::kMemlock, m.why[kHuge]);
  MergePinProbe(nullptr, nullptr, &m);
  for (int i = 0; i < kMemoryKinds; ++i) EXPECT_EQ(ProbeWhy::kNotProbed, m.why[i]);
}

// What the shim reads (ReadPinProbeCache): the system cache with no user cache (the first
// process of a boot), the user's measured answer over the system's changeable unknown, and
// the system cache alone under AT_SECURE.
TEST_F(SystemPinProbeCache, ThisBootsAnswerMergesBothCaches) {
  PinProbe p;
  unsigned from = 99;
  EXPECT_FALSE(ReadPinProbeCache(&p, false, dir_.c_str(), &from));
  EXPECT_EQ(0u, from);

  // The boot's probe ran before hugetlb pages were reserved.
  WriteSystem(Answers(PinFate::kIntact, PinFate::kUnknown, ProbeWhy::kNoHugetlbPages));
  ASSERT_TRUE(ReadPinProbeCache(&p, false, dir_.c_str(), &from));
  EXPECT_EQ(kFromSystemCache, from);
  EXPECT_EQ(PinFate::kIntact, p.fate[kAnon]);
  EXPECT_EQ(ProbeWhy::kNoHugetlbPages, p.why[kHuge]);

  // The user measured hugetlb later: that answer stands.
  PinProbe mine = Answers(PinFate::kIntact, PinFate::kStale, ProbeWhy::kNone);
  char err[256];
  ASSERT_TRUE(WritePinProbeCache(mine, err, sizeof(err))) << err;
  ASSERT_TRUE(ReadPinProbeCache(&p, false, dir_.c_str(), &from));
  EXPECT_EQ(kFromUserCache | kFromSystemCache, from);
  EXPECT_EQ(PinFate::kStale, p.fate[kHuge]) << Describe(p);

  // Under AT_SECURE the user's cache is not named; the system's is read.
  ASSERT_TRUE(ReadPinProbeCache(&p, true, dir_.c_str(), &from));
  EXPECT_EQ(kFromSystemCache, from);
  EXPECT_EQ(PinFate::kIntact, p.fate[kAnon]);
  EXPECT_EQ(ProbeWhy::kNoHugetlbPages, p.why[kHuge]);

  // A refused system cache leaves the user's alone.
  ASSERT_EQ(0, chown(path_.c_str(), 65534, 65534));
  ASSERT_TRUE(ReadPinProbeCache(&p, false, dir_.c_str(), &from));
  EXPECT_EQ(kFromUserCache, from);
  EXPECT_FALSE(ReadPinProbeCache(&p, true, dir_.c_str(), &from));
}

// doctor's and run's answer (PinProbeForThisBoot): a system cache that measured every kind is
// taken as it is, no probe runs and no user cache is written; a kind it has as unknown for a
// reason that can change is probed again, into the user's cache.
TEST_F(SystemPinProbeCache, ForThisBootTakesTheSystemCache) {
  PinProbe all = Answers(PinFate::kIntact, PinFate::kStale, ProbeWhy::kNone);
  all.fate[kThp] = PinFate::kIntact;
  all.why[kThp] = ProbeWhy::kNone;
  WriteSystem(all);
  bool probed = true;
  unsigned from = 0;
  PinProbe p = PinProbeForThisBoot(&probed, &from, dir_.c_str());
  EXPECT_FALSE(probed);
  EXPECT_EQ(kFromSystemCache, from);
  EXPECT_EQ(PinFate::kStale, p.fate[kHuge]) << "the system's answer, not this host's";
  PinProbe u;
  EXPECT_FALSE(ReadUserPinProbeCache(&u, false)) << "no user cache written";

  // Anonymous unknown for memlock (can change): probed again here, where it is intact.
  WriteSystem(Answers(PinFate::kUnknown, PinFate::kStale, ProbeWhy::kNone));
  p = PinProbeForThisBoot(&probed, &from, dir_.c_str());
  EXPECT_TRUE(probed);
  EXPECT_EQ(PinFate::kIntact, p.fate[kAnon]) << Describe(p);
  EXPECT_EQ(PinFate::kStale, p.fate[kHuge]) << Describe(p);
  ASSERT_TRUE(ReadUserPinProbeCache(&u, false));
  EXPECT_EQ(PinFate::kIntact, u.fate[kAnon]);
}

}  // namespace
}  // namespace forkguard::facts
