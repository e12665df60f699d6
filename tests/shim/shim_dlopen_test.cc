// libforkguard.so loaded with dlopen (not first in the symbol search order: a plugin host,
// or a program under AT_SECURE that cannot use LD_PRELOAD). Its exported wrappers, called
// through dlsym, must reach the real libc functions (regression: they rejected libc's own
// definition as "ourselves" and failed with ENOSYS).
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace {

void* Shim() {
  static void* h = [] {
    std::string path = forkguard::test_support::Runfile("shim/libforkguard.so");
    return dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  }();
  return h;
}

TEST(ShimDlopen, ForkWrapperForks) {
  ASSERT_NE(nullptr, Shim()) << dlerror();
  auto fork_fn = reinterpret_cast<pid_t (*)()>(dlsym(Shim(), "fork"));
  ASSERT_NE(nullptr, fork_fn);
  ASSERT_NE(reinterpret_cast<void*>(fork_fn), reinterpret_cast<void*>(&fork))
      << "dlsym(shim) should name the shim's wrapper";
  errno = 0;
  pid_t p = fork_fn();
  if (p == 0) _exit(7);
  ASSERT_GT(p, 0) << "shim fork() wrapper: " << strerror(errno);
  int status = 0;
  ASSERT_EQ(p, waitpid(p, &status, 0));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(7, WEXITSTATUS(status));
}

TEST(ShimDlopen, OpenAndMadviseWrappersForward) {
  ASSERT_NE(nullptr, Shim()) << dlerror();
  auto open_fn = reinterpret_cast<int (*)(const char*, int, ...)>(dlsym(Shim(), "open"));
  ASSERT_NE(nullptr, open_fn);
  errno = 0;
  int fd = open_fn("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << "shim open() wrapper: " << strerror(errno);
  close(fd);

  auto madvise_fn = reinterpret_cast<int (*)(void*, size_t, int)>(dlsym(Shim(), "madvise"));
  ASSERT_NE(nullptr, madvise_fn);
  size_t page = static_cast<size_t>(getpagesize());
  void* m = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(MAP_FAILED, m);
  errno = 0;
  EXPECT_EQ(0, madvise_fn(m, page, MADV_DONTFORK)) << strerror(errno);
  EXPECT_EQ(0, madvise_fn(m, page, MADV_DOFORK)) << strerror(errno);
  munmap(m, page);
}

}  // namespace
