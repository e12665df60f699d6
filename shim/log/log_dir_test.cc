#include "shim/log/log_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace forkguard {
namespace {

constexpr uid_t kNobody = 65534;

std::string Expand(const char* tmpl, const LogPathFields& f, std::string* why = nullptr) {
  char out[1024], w[256];
  TextBuffer o(out, sizeof(out)), y(w, sizeof(w));
  bool ok = ExpandLogPath(tmpl, f, o, y);
  if (why != nullptr) *why = y.data();
  return ok ? std::string(o.data()) : std::string("FAILED");
}

TEST(LogPathTest, EachTemplate) {
  LogPathFields f;
  f.host = "node1";
  f.pid = 4321;
  f.rank = 7;
  f.job = "job.42";
  EXPECT_EQ(Expand("/fg/%j/%h/%p", f), "/fg/job.42/node1/4321");
  EXPECT_EQ(Expand("/fg/r%r-%%-%h", f), "/fg/r7-%-node1");
  EXPECT_EQ(Expand("/fg/plain", f), "/fg/plain");
  f.rank = -1;
  f.job = "";
  EXPECT_EQ(Expand("/fg/%j/%r", f), "/fg/nojob/norank");
}

TEST(LogPathTest, BadTemplatesSayWhy) {
  LogPathFields f;
  f.host = "h";
  std::string why;
  EXPECT_EQ(Expand("/fg/%x", f, &why), "FAILED");
  EXPECT_NE(why.find("unknown template %x"), std::string::npos) << why;
  EXPECT_EQ(Expand("/fg/%", f, &why), "FAILED");
  EXPECT_NE(why.find("at the end"), std::string::npos) << why;
  f.host = "..";
  EXPECT_EQ(Expand("/fg/%h", f, &why), "FAILED");
  std::string big(2000, 'x');
  f.host = big.c_str();
  EXPECT_EQ(Expand("/fg/%h", f, &why), "FAILED");
  EXPECT_EQ(why, "path too long");
}

class LogDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Under /tmp, not TEST_TMPDIR: uid 65534 must be able to reach it.
    base_ = "/tmp/forkguard-logdir-XXXXXX";
    ASSERT_NE(mkdtemp(base_.data()), nullptr);
    chmod(base_.c_str(), 0755);
  }
  void TearDown() override { system(("rm -rf '" + base_ + "'").c_str()); }

  // `path` as a template without '%': every component fixed.
  static bool Make(const std::string& path, std::string* why = nullptr) {
    return MakeFrom(path, path, why);
  }
  // The directory `tmpl` expands to, whose expanded components start with `expanded`.
  static bool MakeFrom(const std::string& tmpl, const std::string& path,
                       std::string* why = nullptr) {
    char w[600];
    TextBuffer y(w, sizeof(w));
    int fd = OpenLogDir(path.c_str(), LogDirFixedPrefix(tmpl.c_str()), &y);
    if (why != nullptr) *why = y.data();
    if (fd < 0) return false;
    struct stat by_fd, by_path;
    EXPECT_EQ(fstat(fd, &by_fd), 0);
    EXPECT_EQ(stat(path.c_str(), &by_path), 0) << path;
    EXPECT_EQ(by_fd.st_ino, by_path.st_ino) << "the descriptor is not " << path;
    close(fd);
    return true;
  }
  static mode_t Mode(const std::string& path) {
    struct stat st;
    return lstat(path.c_str(), &st) == 0 ? st.st_mode : 0;
  }
  std::string base_;
};

TEST_F(LogDirTest, ExistingDirectoryIsUsed) { EXPECT_TRUE(Make(base_)); }

TEST_F(LogDirTest, MissingAndNestedMissingAreCreated0700) {
  mode_t old = umask(0);
  EXPECT_TRUE(Make(base_ + "/one"));
  EXPECT_TRUE(Make(base_ + "/a/b/c//d/"));
  umask(old);
  for (const char* p : {"/one", "/a", "/a/b", "/a/b/c", "/a/b/c/d"}) {
    EXPECT_TRUE(S_ISDIR(Mode(base_ + p))) << p;
    EXPECT_EQ(Mode(base_ + p) & 07777, 0700u) << p;
  }
  EXPECT_TRUE(Make(base_ + "/a/b/c/d")) << "again: already there";
}

TEST_F(LogDirTest, SymlinkOwnedByAnotherUserRefusedNothingCreated) {
  ASSERT_EQ(geteuid(), 0u) << "needs root to chown a symlink to uid 65534";
  ASSERT_EQ(mkdir((base_ + "/target").c_str(), 0777), 0);
  ASSERT_EQ(symlink((base_ + "/target").c_str(), (base_ + "/theirs").c_str()), 0);
  ASSERT_EQ(lchown((base_ + "/theirs").c_str(), kNobody, kNobody), 0);
  std::string why;
  EXPECT_FALSE(Make(base_ + "/theirs/job/host", &why));
  EXPECT_NE(why.find("/theirs is a symlink owned by uid 65534"), std::string::npos) << why;
  EXPECT_EQ(Mode(base_ + "/target/job"), 0u) << "created through their symlink";
}

TEST_F(LogDirTest, OwnSymlinkOnTheWayIsFollowedButNotAsTheLastComponent) {
  ASSERT_EQ(mkdir((base_ + "/target").c_str(), 0700), 0);
  ASSERT_EQ(symlink((base_ + "/target").c_str(), (base_ + "/mine").c_str()), 0);
  EXPECT_TRUE(Make(base_ + "/mine/job"));
  EXPECT_TRUE(S_ISDIR(Mode(base_ + "/target/job")));
  std::string why;
  EXPECT_FALSE(Make(base_ + "/mine", &why));
  EXPECT_EQ(why, "it is a symlink");
}

TEST_F(LogDirTest, RegularFileInTheWay) {
  int fd = open((base_ + "/file").c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  std::string why;
  EXPECT_FALSE(Make(base_ + "/file/sub", &why));
  EXPECT_EQ(why, base_ + "/file is not a directory");
  EXPECT_FALSE(Make(base_ + "/file", &why));
  EXPECT_EQ(why, "not a directory");
}

TEST_F(LogDirTest, DotDotAndRelativeRefused) {
  std::string why;
  EXPECT_FALSE(Make(base_ + "/x/../y", &why));
  EXPECT_EQ(why, "'..' in the path");
  EXPECT_FALSE(Make("relative/dir", &why));
}

// Root may create anywhere: the unwritable case runs as uid 65534 in a child.
TEST_F(LogDirTest, UnwritableParentAsUnprivilegedUser) {
  ASSERT_EQ(geteuid(), 0u) << "needs root to switch to uid 65534";
  std::string ro = base_ + "/ro";
  ASSERT_EQ(mkdir(ro.c_str(), 0555), 0);
  ASSERT_EQ(chown(ro.c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(chmod(ro.c_str(), 0555), 0);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(p[0]);
    if (setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(2);
    std::string why;
    bool ok = Make(ro + "/job/host", &why);
    ssize_t ignored = write(p[1], why.data(), why.size());
    (void)ignored;
    _exit(ok ? 0 : 1);
  }
  close(p[1]);
  char buf[700];
  ssize_t n = read(p[0], buf, sizeof(buf));
  close(p[0]);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ(WEXITSTATUS(st), 1) << "created in a 0555 directory as uid 65534?";
  std::string why(buf, n > 0 ? n : 0);
  EXPECT_EQ(why, "cannot create " + ro + "/job: Permission denied");
  EXPECT_EQ(Mode(ro + "/job"), 0u);
}

TEST_F(LogDirTest, DirectoryOfAnotherUserRefused) {
  ASSERT_EQ(geteuid(), 0u) << "needs root to chown";
  ASSERT_EQ(mkdir((base_ + "/theirs").c_str(), 0777), 0);
  ASSERT_EQ(chown((base_ + "/theirs").c_str(), kNobody, kNobody), 0);
  std::string why;
  EXPECT_FALSE(Make(base_ + "/theirs", &why));
  EXPECT_EQ(why, "not owned by this user");
  // Below it, our own new directory is fine (a shared, world-writable job area).
  ASSERT_EQ(chmod((base_ + "/theirs").c_str(), 01777), 0);
  EXPECT_TRUE(Make(base_ + "/theirs/mine"));
}

TEST(LogDirFixedPrefixTest, UpToTheFirstComponentWithAPercent) {
  EXPECT_EQ(LogDirFixedPrefix("/shared/fg/%j/%h"), strlen("/shared/fg"));
  EXPECT_EQ(LogDirFixedPrefix("/shared/fg/job%j/x"), strlen("/shared/fg"));
  EXPECT_EQ(LogDirFixedPrefix("/%j/%h"), 0u);
  EXPECT_EQ(LogDirFixedPrefix("/home/u/logs"), strlen("/home/u/logs"));
  EXPECT_EQ(LogDirFixedPrefix("/a//b/%p"), strlen("/a//b"));
}

// A shared root as a site sets it up (root's, sticky, world-writable): each user's new job
// directories are created 0700 and used.
TEST_F(LogDirTest, TemplateBelowASharedStickyRoot) {
  ASSERT_EQ(chmod(base_.c_str(), 01777), 0);
  mode_t old = umask(0);
  EXPECT_TRUE(MakeFrom(base_ + "/%j/%h", base_ + "/42/node1"));
  umask(old);
  EXPECT_EQ(Mode(base_ + "/42") & 07777, 0700u);
  EXPECT_EQ(Mode(base_ + "/42/node1") & 07777, 0700u);
  EXPECT_TRUE(MakeFrom(base_ + "/%j/%h", base_ + "/42/node1")) << "again: already ours";
}

// Another user made a future job's directory first, in the shared root: not entered, and the
// reason names it (nothing is created inside it).
TEST_F(LogDirTest, JobDirectoryPreCreatedByAnotherUserRefused) {
  ASSERT_EQ(geteuid(), 0u) << "needs root to chown to uid 65534";
  ASSERT_EQ(chmod(base_.c_str(), 01777), 0);
  for (mode_t mode : {0700, 0755, 0777}) {
    std::string job = base_ + "/job" + std::to_string(mode);
    ASSERT_EQ(mkdir(job.c_str(), mode), 0);
    ASSERT_EQ(chmod(job.c_str(), mode), 0);
    ASSERT_EQ(chown(job.c_str(), kNobody, kNobody), 0);
    std::string why;
    EXPECT_FALSE(MakeFrom(base_ + "/job%j/%h", job + "/node1", &why)) << mode;
    EXPECT_EQ(why, job + " is owned by uid 65534, not by this user") << mode;
    EXPECT_EQ(Mode(job + "/node1"), 0u) << "created in another user's directory";
  }
  // The fixed prefix may be anyone's (the site's root): only the expanded part is checked.
  ASSERT_EQ(chown(base_.c_str(), kNobody, kNobody), 0);
  EXPECT_TRUE(MakeFrom(base_ + "/j%j", base_ + "/j1"));
}

// Ours, but writable by others (made by hand with a loose umask): refused too.
TEST_F(LogDirTest, ExpandedDirectoryWritableByOthersRefused) {
  ASSERT_EQ(mkdir((base_ + "/7").c_str(), 0700), 0);
  ASSERT_EQ(chmod((base_ + "/7").c_str(), 0770), 0);
  std::string why;
  EXPECT_FALSE(MakeFrom(base_ + "/%j/%h", base_ + "/7/h", &why));
  EXPECT_EQ(why, base_ + "/7 is writable by group or others");
  EXPECT_EQ(Mode(base_ + "/7/h"), 0u);
}

// Below the fixed prefix no symlink is followed, not even this user's own: its target could
// be changed after the check.
TEST_F(LogDirTest, SymlinkInTheExpandedPartRefused) {
  ASSERT_EQ(mkdir((base_ + "/target").c_str(), 0700), 0);
  ASSERT_EQ(symlink((base_ + "/target").c_str(), (base_ + "/42").c_str()), 0);
  std::string why;
  EXPECT_FALSE(MakeFrom(base_ + "/%j/%h", base_ + "/42/node1", &why));
  EXPECT_EQ(why, base_ + "/42 is a symlink");
  EXPECT_EQ(Mode(base_ + "/target/node1"), 0u) << "created through the symlink";
  EXPECT_FALSE(MakeFrom(base_ + "/%j", base_ + "/42", &why));
  EXPECT_EQ(why, base_ + "/42 is a symlink");
  // A file in the way.
  int fd = open((base_ + "/43").c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_FALSE(MakeFrom(base_ + "/%j/%h", base_ + "/43/node1", &why));
  EXPECT_EQ(why, base_ + "/43 is not a directory");
}

}  // namespace
}  // namespace forkguard
