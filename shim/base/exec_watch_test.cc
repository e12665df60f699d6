#include "shim/base/exec_watch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace forkguard {
namespace {

std::string TempFile(const std::string& name, const std::string& text, mode_t mode) {
  std::string path = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  FILE* f = fopen(path.c_str(), "w");
  fputs(text.c_str(), f);
  fclose(f);
  chmod(path.c_str(), mode);
  return path;
}

TEST(ExecWatch, EnvPreloadsShim) {
  char a[] = "LD_PRELOAD=/x/libother.so:/opt/fg/lib/libforkguard.so";
  char b[] = "LD_PRELOAD=/x/libother.so";
  char c[] = "PATH=/bin:libforkguard.so";
  char* with[] = {c, a, nullptr};
  char* without[] = {b, c, nullptr};
  char* empty[] = {nullptr};
  EXPECT_TRUE(EnvPreloadsShim(with));
  EXPECT_FALSE(EnvPreloadsShim(without));
  EXPECT_FALSE(EnvPreloadsShim(empty));
  EXPECT_FALSE(EnvPreloadsShim(nullptr));
}

TEST(ExecWatch, ElfIsDynamic) {
  int fd = open("/bin/true", O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ElfIsDynamic(fd), 1);
  close(fd);
  fd = open(TempFile("text", "not an ELF file\n", 0644).c_str(), O_RDONLY);
  EXPECT_EQ(ElfIsDynamic(fd), -1);
  close(fd);
}

TEST(ExecWatch, Reasons) {
  char pre[] = "LD_PRELOAD=/lib/libforkguard.so";
  char* watched[] = {pre, nullptr};
  char* cleared[] = {nullptr};
  char resolved[512];
  EXPECT_EQ(ExecUnwatchedReasons("/bin/true", watched, false, resolved, sizeof(resolved)), 0u);
  EXPECT_STREQ(resolved, "/bin/true");
  EXPECT_EQ(ExecUnwatchedReasons("/bin/true", cleared, false, resolved, sizeof(resolved)),
            unsigned{kExecPreloadRemoved});
  // A #! script is judged by its interpreter (dynamic here).
  std::string script = TempFile("script.sh", "#!/bin/sh\nexit 0\n", 0755);
  EXPECT_EQ(ExecUnwatchedReasons(script.c_str(), watched, false, resolved, sizeof(resolved)), 0u);
  // A name without '/' is looked up along PATH for the p forms.
  EXPECT_EQ(ExecUnwatchedReasons("true", watched, true, resolved, sizeof(resolved)), 0u);
  EXPECT_EQ(std::string(resolved).substr(std::string(resolved).rfind('/')), "/true");
  EXPECT_EQ(ExecUnwatchedReasons("no-such-program-here", watched, true, resolved, sizeof(resolved)),
            0u);
  EXPECT_STREQ(resolved, "");
  EXPECT_STREQ(ExecUnwatchedName(kExecStatic), "static");
  EXPECT_STREQ(ExecUnwatchedName(kExecSetuid), "setuid");
  EXPECT_STREQ(ExecUnwatchedName(kExecPreloadRemoved), "preload-removed");
}

}  // namespace
}  // namespace forkguard
