#include "facts/machine_facts.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace forkguard::facts {
namespace {

TEST(MachineFacts, RdmaCoreVersionFromLibraryName) {
  EXPECT_EQ(44, RdmaCoreFromLibName("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0"));
  EXPECT_EQ(56, RdmaCoreFromLibName("/opt/rc56/lib/libibverbs.so.1.15.56.0"));
  EXPECT_EQ(-1, RdmaCoreFromLibName("/usr/lib/x86_64-linux-gnu/libibverbs.so.1"));
  EXPECT_EQ(-1, RdmaCoreFromLibName("/lib/libc.so.6"));
}

TEST(MachineFacts, SmapsHeaderAndFlags) {
  SmapsVma v;
  const char anon[] = "7f0000000000-7f0000010000 rw-p 00000000 00:00 0 ";
  ASSERT_TRUE(ParseSmapsHeader(anon, strlen(anon), &v));
  EXPECT_EQ(0x7f0000000000u, v.start);
  EXPECT_EQ(0x7f0000010000u, v.end);
  EXPECT_FALSE(v.shared);
  EXPECT_FALSE(v.file_backed);
  const char thp[] = "AnonHugePages:      2048 kB";
  EXPECT_FALSE(ApplySmapsAttribute(thp, strlen(thp), &v));
  const char flags[] = "VmFlags: rd wr mr mw me dc ac sd hg";
  EXPECT_TRUE(ApplySmapsAttribute(flags, strlen(flags), &v));
  EXPECT_TRUE(v.dontfork);
  EXPECT_FALSE(v.hugetlb);
  EXPECT_EQ(MemoryKind::kThp, v.Kind());

  const char shm[] = "7f00aa000000-7f00aa200000 rw-s 00000000 00:0f 4242 /anon_hugepage (deleted)";
  ASSERT_TRUE(ParseSmapsHeader(shm, strlen(shm), &v));
  const char ht[] = "VmFlags: rd wr sh mr mw me ms de ht sd";
  ApplySmapsAttribute(ht, strlen(ht), &v);
  EXPECT_TRUE(v.hugetlb);
  EXPECT_EQ(MemoryKind::kShared, v.Kind());  // shared first: fork copies no shared page

  const char file[] = "55d0c0000000-55d0c0001000 r--p 00000000 fd:01 131 /usr/bin/true";
  ASSERT_TRUE(ParseSmapsHeader(file, strlen(file), &v));
  EXPECT_EQ(MemoryKind::kPrivateFile, v.Kind());
  EXPECT_FALSE(ParseSmapsHeader("Size: 4 kB", 10, &v));
  const char noflag[] = "VmFlags: rd wr mr mw me ac sd";
  EXPECT_FALSE(VmFlagsHas(noflag, strlen(noflag), "dc"));
}

// The kinds of real mappings of this process.
TEST(MachineFacts, KindOfRealRanges) {
  const size_t len = 64 << 10;
  void* anon = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(MAP_FAILED, anon);
  madvise(anon, len, MADV_NOHUGEPAGE);
  memset(anon, 1, len);
  EXPECT_EQ(MemoryKind::kAnonymous, KindOfRange(reinterpret_cast<uintptr_t>(anon), len));
  void* shared = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(MAP_FAILED, shared);
  EXPECT_EQ(MemoryKind::kShared, KindOfRange(reinterpret_cast<uintptr_t>(shared), len));
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* file = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  ASSERT_NE(MAP_FAILED, file);
  EXPECT_EQ(MemoryKind::kPrivateFile, KindOfRange(reinterpret_cast<uintptr_t>(file), 4096));
  munmap(file, 4096);
  munmap(shared, len);
  munmap(anon, len);
  // Unmapped now: not found.
  EXPECT_EQ(MemoryKind::kUnknown, KindOfRange(reinterpret_cast<uintptr_t>(anon), len));
}

TEST(MachineFacts, ForkSafeFromTheEnvironment) {
  unsetenv("RDMAV_FORK_SAFE");
  unsetenv("IBV_FORK_SAFE");
  char buf[64];
  EXPECT_FALSE(ForkSafeFromEnvironment(buf, sizeof(buf)));
  setenv("IBV_FORK_SAFE", "", 1);  // any value turns it on, the empty one too
  ASSERT_TRUE(ForkSafeFromEnvironment(buf, sizeof(buf)));
  EXPECT_STREQ("IBV_FORK_SAFE=", buf);
  setenv("RDMAV_FORK_SAFE", "1", 1);
  ASSERT_TRUE(ForkSafeFromEnvironment(buf, sizeof(buf)));
  EXPECT_STREQ("RDMAV_FORK_SAFE=1", buf);
  unsetenv("RDMAV_FORK_SAFE");
  unsetenv("IBV_FORK_SAFE");
}

TEST(MachineFacts, BootIdAndReportedCopyOnFork) {
  char id[64];
  ASSERT_TRUE(BootId(id, sizeof(id)));
  EXPECT_EQ(36u, strlen(id)) << id;
  const char* why = nullptr;
  Tri t = ReportedCopyOnFork(&why);
  ASSERT_NE(nullptr, why);
  // Without ib_core there is nothing to ask: unknown, and it says why.
  if (access("/sys/class/infiniband", F_OK) != 0) {
    EXPECT_EQ(Tri::kUnknown, t) << why;
  }
}

}  // namespace
}  // namespace forkguard::facts
