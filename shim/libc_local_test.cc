// The shim's own copies of libc functions (libc_local.c, compiled here with an fg_local_
// prefix) against glibc's, on the same inputs: same results, same errno.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern "C" {
void* fg_local_memcpy(void*, const void*, size_t);
void* fg_local_memset(void*, int, size_t);
int fg_local_memcmp(const void*, const void*, size_t);
void* fg_local_memchr(const void*, int, size_t);
size_t fg_local_strlen(const char*);
size_t fg_local_strnlen(const char*, size_t);
int fg_local_strcmp(const char*, const char*);
int fg_local_strncmp(const char*, const char*, size_t);
int fg_local_strcasecmp(const char*, const char*);
char* fg_local_strcpy(char*, const char*);
char* fg_local_strncpy(char*, const char*, size_t);
char* fg_local_strcat(char*, const char*);
char* fg_local_strncat(char*, const char*, size_t);
char* fg_local_strchrnul(const char*, int);
char* fg_local_strchr(const char*, int);
char* fg_local_strrchr(const char*, int);
char* fg_local_strstr(const char*, const char*);
char* fg_local___strcpy_chk(char*, const char*, size_t);
long fg_local_strtol(const char*, char**, int);
long fg_local_atol(const char*);
int fg_local_atoi(const char*);
char* fg_local_getenv(const char*);
int fg_local_sigemptyset(sigset_t*);
int fg_local_sigaddset(sigset_t*, int);
ssize_t fg_local_read(int, void*, size_t);
ssize_t fg_local_write(int, const void*, size_t);
ssize_t fg_local_writev(int, const struct iovec*, int);
ssize_t fg_local_pread(int, void*, size_t, off_t);
int fg_local_close(int);
int fg_local_unlink(const char*);
int fg_local_mkdir(const char*, mode_t);
int fg_local_mkdirat(int, const char*, mode_t);
ssize_t fg_local_readlink(const char*, char*, size_t);
ssize_t fg_local_readlinkat(int, const char*, char*, size_t);
int fg_local_access(const char*, int);
int fg_local_rename(const char*, const char*);
pid_t fg_local_getpid(void);
pid_t fg_local_getppid(void);
uid_t fg_local_getuid(void);
uid_t fg_local_geteuid(void);
gid_t fg_local_getgid(void);
void* fg_local_mmap(void*, size_t, int, int, int, off_t);
int fg_local_munmap(void*, size_t);
int fg_local_pipe2(int*, int);
int fg_local_fstatat(int, const char*, struct stat*, int);
int fg_local_fstat(int, struct stat*);
int fg_local_uname(struct utsname*);
int fg_local_gethostname(char*, size_t);
int fg_local_socket(int, int, int);
}

namespace {

int Sign(int v) { return (v > 0) - (v < 0); }

const std::vector<std::string>& Strings() {
  static const std::vector<std::string> s = {
      "",     "a",    "A",    "abc",   "abd",  "ABC",    "ab",    "abcdef",  "\xff",
      "\x7f", "warn", "WARN", "Error", "0x1f", "  -42x", "a/b/c", "/dev/ib", "forkguard"};
  return s;
}

TEST(LibcLocal, MemoryFunctions) {
  for (const auto& a : Strings()) {
    for (const auto& b : Strings()) {
      const size_t n = std::min(a.size(), b.size());
      EXPECT_EQ(Sign(fg_local_memcmp(a.data(), b.data(), n)), Sign(memcmp(a.data(), b.data(), n)));
    }
    for (int c : {0, int{'a'}, int{'b'}, int{'/'}, 0xff}) {
      EXPECT_EQ(fg_local_memchr(a.data(), c, a.size()), memchr(a.data(), c, a.size()));
    }
  }
  std::vector<char> x(1000), y(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<char>(i * 7);
  EXPECT_EQ(fg_local_memcpy(y.data() + 3, x.data() + 5, 900), y.data() + 3);
  EXPECT_EQ(memcmp(y.data() + 3, x.data() + 5, 900), 0);
  EXPECT_EQ(fg_local_memset(y.data(), 0xab, 17), y.data());
  for (int i = 0; i < 17; ++i) EXPECT_EQ(static_cast<unsigned char>(y[i]), 0xab);
  EXPECT_EQ(y[17], x[5 + 14]);
}

TEST(LibcLocal, StringFunctions) {
  for (const auto& a : Strings()) {
    const char* s = a.c_str();
    EXPECT_EQ(fg_local_strlen(s), strlen(s));
    for (size_t m : {size_t{0}, size_t{1}, size_t{2}, size_t{5}, size_t{100}})
      EXPECT_EQ(fg_local_strnlen(s, m), strnlen(s, m));
    for (int c : {0, int{'a'}, int{'b'}, int{'/'}, 0xff, int{'x'}}) {
      EXPECT_EQ(fg_local_strchr(s, c), strchr(s, c)) << s << " " << c;
      EXPECT_EQ(fg_local_strrchr(s, c), strrchr(s, c)) << s << " " << c;
      EXPECT_EQ(fg_local_strchrnul(s, c), strchrnul(s, c)) << s << " " << c;
    }
    for (const auto& b : Strings()) {
      const char* t = b.c_str();
      EXPECT_EQ(Sign(fg_local_strcmp(s, t)), Sign(strcmp(s, t))) << s << " " << t;
      EXPECT_EQ(Sign(fg_local_strcasecmp(s, t)), Sign(strcasecmp(s, t))) << s << " " << t;
      for (size_t m : {0, 1, 2, 3, 50}) {
        EXPECT_EQ(Sign(fg_local_strncmp(s, t, m)), Sign(strncmp(s, t, m))) << s << " " << t;
      }
      EXPECT_EQ(fg_local_strstr(s, t), strstr(s, t)) << s << " " << t;
      char mine[64], theirs[64];
      memset(mine, 'z', sizeof(mine));
      memset(theirs, 'z', sizeof(theirs));
      EXPECT_EQ(fg_local_strcpy(mine, s), mine);
      strcpy(theirs, s);
      EXPECT_EQ(fg_local_strcat(mine, t), mine);
      strcat(theirs, t);
      EXPECT_EQ(memcmp(mine, theirs, sizeof(mine)), 0);
      for (size_t m : {0, 1, 3, 20}) {
        memset(mine, 'z', sizeof(mine));
        memset(theirs, 'z', sizeof(theirs));
        fg_local_strncpy(mine, s, m);
        strncpy(theirs, s, m);
        EXPECT_EQ(memcmp(mine, theirs, sizeof(mine)), 0);
        strcpy(mine, "x");
        strcpy(theirs, "x");
        fg_local_strncat(mine, t, m);
        strncat(theirs, t, m);
        EXPECT_EQ(memcmp(mine, theirs, sizeof(mine)), 0);
      }
    }
  }
  char small[4];
  EXPECT_EQ(fg_local___strcpy_chk(small, "abc", sizeof(small)), small);
  EXPECT_STREQ(small, "abc");
  EXPECT_DEATH(fg_local___strcpy_chk(small, "abcd", sizeof(small)), "");
}

TEST(LibcLocal, Numbers) {
  const std::vector<std::string> inputs = {"0",
                                           "42",
                                           "-42",
                                           "+7",
                                           "  \t12abc",
                                           "0x1F",
                                           "0X",
                                           "017",
                                           "08",
                                           "z",
                                           "",
                                           "-",
                                           "0x",
                                           "9223372036854775807",
                                           "9223372036854775808",
                                           "-9223372036854775808",
                                           "-9223372036854775809",
                                           "99999999999999999999999",
                                           "  -0x10",
                                           "1e5",
                                           "  +"};
  for (const auto& in : inputs) {
    for (int base : {0, 8, 10, 16, 36}) {
      char* e1 = nullptr;
      char* e2 = nullptr;
      errno = 0;
      long mine = fg_local_strtol(in.c_str(), &e1, base);
      int mine_errno = errno;
      errno = 0;
      long theirs = strtol(in.c_str(), &e2, base);
      EXPECT_EQ(mine, theirs) << "'" << in << "' base " << base;
      EXPECT_EQ(e1, e2) << "'" << in << "' base " << base;
      EXPECT_EQ(mine_errno, errno) << "'" << in << "' base " << base;
    }
    EXPECT_EQ(fg_local_atol(in.c_str()), atol(in.c_str())) << in;
    if (in.size() < 10) {
      EXPECT_EQ(fg_local_atoi(in.c_str()), atoi(in.c_str())) << in;
    }
  }
  errno = 0;
  char* e = nullptr;
  EXPECT_EQ(fg_local_strtol("5", &e, 1), 0);
  EXPECT_EQ(errno, EINVAL);
}

TEST(LibcLocal, GetenvAndSignalSets) {
  setenv("FG_LOCAL_TEST_VAR", "value=1", 1);
  setenv("FG_LOCAL_TEST", "short", 1);
  for (const char* name : {"FG_LOCAL_TEST_VAR", "FG_LOCAL_TEST", "FG_LOCAL", "PATH", "NOPE_X"}) {
    EXPECT_EQ(fg_local_getenv(name), getenv(name)) << name;
  }
  // The signals a set holds (glibc's sigemptyset clears the kernel's 64 bits, not the whole
  // sigset_t; the rest is never read).
  auto members = [](const sigset_t& set) {
    std::string m;
    for (int sig = 1; sig < NSIG; ++sig) m += sigismember(&set, sig) == 1 ? '1' : '0';
    return m;
  };
  sigset_t mine, theirs;
  memset(&mine, 0x5a, sizeof(mine));
  memset(&theirs, 0xa5, sizeof(theirs));
  EXPECT_EQ(fg_local_sigemptyset(&mine), 0);
  sigemptyset(&theirs);
  EXPECT_EQ(members(mine), std::string(NSIG - 1, '0'));
  EXPECT_EQ(members(mine), members(theirs));
  for (int sig : {-1, 0, 1, SIGSEGV, 31, 32, 33, 34, SIGRTMAX, 64, 65, 1000}) {
    errno = 0;
    int r1 = fg_local_sigaddset(&mine, sig);
    int e1 = errno;
    errno = 0;
    int r2 = sigaddset(&theirs, sig);
    EXPECT_EQ(r1, r2) << sig;
    EXPECT_EQ(e1, errno) << sig;
    EXPECT_EQ(members(mine), members(theirs)) << sig;
  }
}

#if defined(__x86_64__)
TEST(LibcLocal, SystemCalls) {
  EXPECT_EQ(fg_local_getpid(), getpid());
  EXPECT_EQ(fg_local_getppid(), getppid());
  EXPECT_EQ(fg_local_getuid(), getuid());
  EXPECT_EQ(fg_local_geteuid(), geteuid());
  EXPECT_EQ(fg_local_getgid(), getgid());
  struct utsname a, b;
  ASSERT_EQ(fg_local_uname(&a), 0);
  ASSERT_EQ(uname(&b), 0);
  EXPECT_STREQ(a.nodename, b.nodename);
  char h1[256], h2[256];
  ASSERT_EQ(fg_local_gethostname(h1, sizeof(h1)), 0);
  ASSERT_EQ(gethostname(h2, sizeof(h2)), 0);
  EXPECT_STREQ(h1, h2);
  errno = 0;
  EXPECT_EQ(fg_local_gethostname(h1, 1), -1);
  EXPECT_EQ(errno, ENAMETOOLONG);

  std::string dir = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
                    "/libc_local." + std::to_string(getpid());
  ASSERT_EQ(fg_local_mkdir(dir.c_str(), 0700), 0);
  errno = 0;
  EXPECT_EQ(fg_local_mkdir(dir.c_str(), 0700), -1);
  EXPECT_EQ(errno, EEXIST);
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dfd, 0);
  ASSERT_EQ(fg_local_mkdirat(dfd, "sub", 0700), 0);
  EXPECT_EQ(fg_local_access((dir + "/sub").c_str(), W_OK), 0);
  errno = 0;
  EXPECT_EQ(fg_local_access((dir + "/none").c_str(), F_OK), -1);
  EXPECT_EQ(errno, ENOENT);

  const std::string file = dir + "/f";
  int fd = open(file.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(fg_local_write(fd, "hello ", 6), 6);
  struct iovec iov[2] = {{const_cast<char*>("big "), 4}, {const_cast<char*>("world"), 5}};
  EXPECT_EQ(fg_local_writev(fd, iov, 2), 9);
  char buf[32] = {};
  EXPECT_EQ(fg_local_pread(fd, buf, sizeof(buf), 6), 9);
  EXPECT_STREQ(buf, "big world");
  lseek(fd, 0, SEEK_SET);
  memset(buf, 0, sizeof(buf));
  EXPECT_EQ(fg_local_read(fd, buf, 5), 5);
  EXPECT_STREQ(buf, "hello");
  struct stat s1, s2;
  ASSERT_EQ(fg_local_fstat(fd, &s1), 0);
  ASSERT_EQ(fstat(fd, &s2), 0);
  EXPECT_EQ(s1.st_ino, s2.st_ino);
  EXPECT_EQ(s1.st_size, 15);
  ASSERT_EQ(fg_local_fstatat(dfd, "f", &s1, AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_EQ(s1.st_ino, s2.st_ino);
  void* m = fg_local_mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(m, MAP_FAILED);
  EXPECT_EQ(memcmp(m, "hello big", 9), 0);
  EXPECT_EQ(fg_local_munmap(m, 4096), 0);
  errno = 0;
  EXPECT_EQ(fg_local_mmap(nullptr, 4096, PROT_READ, MAP_SHARED, -1, 0), MAP_FAILED);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(fg_local_close(fd), 0);
  errno = 0;
  EXPECT_EQ(fg_local_close(fd), -1);
  EXPECT_EQ(errno, EBADF);

  ASSERT_EQ(symlink("f", (dir + "/link").c_str()), 0);
  char l1[64] = {}, l2[64] = {};
  EXPECT_EQ(fg_local_readlink((dir + "/link").c_str(), l1, sizeof(l1)), 1);
  EXPECT_EQ(fg_local_readlinkat(dfd, "link", l2, sizeof(l2)), 1);
  EXPECT_STREQ(l1, "f");
  EXPECT_STREQ(l2, "f");
  EXPECT_EQ(fg_local_rename(file.c_str(), (dir + "/g").c_str()), 0);
  EXPECT_EQ(fg_local_unlink((dir + "/g").c_str()), 0);
  EXPECT_EQ(fg_local_unlink((dir + "/link").c_str()), 0);
  errno = 0;
  EXPECT_EQ(fg_local_unlink((dir + "/g").c_str()), -1);
  EXPECT_EQ(errno, ENOENT);
  rmdir((dir + "/sub").c_str());
  close(dfd);
  rmdir(dir.c_str());

  int p[2];
  ASSERT_EQ(fg_local_pipe2(p, O_CLOEXEC), 0);
  EXPECT_EQ(fcntl(p[0], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  close(p[0]);
  close(p[1]);
  int s = fg_local_socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(s, 0);
  close(s);
}
#endif

}  // namespace
