#include "shim/next_symbol.h"

#include <dlfcn.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace forkguard {
namespace {

// This test program stands where the preloaded shim stands: the objects after it, up to
// libc, are what dlsym(RTLD_NEXT) called from here searches.
void Here() {}

// Every libc function the shim's constructor resolves.
constexpr const char* kWrapped[] = {
    "fork",     "_Fork",    "daemon",     "forkpty",    "vfork",       "execve", "execv",
    "execvp",   "execvpe",  "fexecve",    "madvise",    "open",        "open64", "openat",
    "openat64", "__open_2", "__open64_2", "__openat_2", "__openat64_2"};

TEST(NextSymbols, FindsWhatDlsymFindsForEveryWrappedFunction) {
  NextSymbols next(reinterpret_cast<const void*>(&Here));
  for (const char* name : kWrapped) {
    void* want = dlsym(RTLD_NEXT, name);
    ASSERT_NE(want, nullptr) << name;
    EXPECT_EQ(next.Find(name), want) << name;
  }
}

TEST(NextSymbols, TakesTheDefaultVersionOfAVersionedFunction) {
  // posix_spawn has an old hidden version (GLIBC_2.2.5) and the default (GLIBC_2.15).
  NextSymbols next(reinterpret_cast<const void*>(&Here));
  void* want = dlsym(RTLD_NEXT, "posix_spawn");
  ASSERT_NE(want, nullptr);
  EXPECT_EQ(next.Find("posix_spawn"), want);
  EXPECT_NE(next.Find("posix_spawn"), dlvsym(RTLD_NEXT, "posix_spawn", "GLIBC_2.2.5"));
}

TEST(NextSymbols, LeavesIndirectAndUnknownFunctionsToDlsym) {
  NextSymbols next(reinterpret_cast<const void*>(&Here));
  EXPECT_EQ(next.Find("memcpy"), nullptr);  // an IFUNC: its resolver picks the address
  EXPECT_EQ(next.Find("forkguard_no_such_function"), nullptr);
}

TEST(NextSymbols, AnswersNothingForAnObjectLoadedAfterLibc) {
  // From libc itself (as from a library dlopen'ed after it) RTLD_NEXT searches another
  // scope: nothing is answered.
  NextSymbols next(reinterpret_cast<const void*>(&getpid));
  EXPECT_EQ(next.Find("fork"), nullptr);
}

}  // namespace
}  // namespace forkguard
