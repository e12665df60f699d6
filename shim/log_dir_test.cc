#include "shim/log_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
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

  static bool Make(const std::string& path, std::string* why = nullptr) {
    char w[600];
    TextBuffer y(w, sizeof(w));
    bool ok = MakeLogDir(path.c_str(), y);
    if (why != nullptr) *why = y.data();
    return ok;
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

}  // namespace
}  // namespace forkguard
