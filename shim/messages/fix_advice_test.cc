// One test per rule of the `fix:` line, plus precedence where two apply.
#include "shim/messages/fix_advice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace forkguard {
namespace {

using ::testing::HasSubstr;

// A Python stack from (file, func) pairs, innermost first.
PythonStack Py(std::initializer_list<std::pair<const char*, const char*>> frames) {
  PythonStack py;
  py.depth = 0;
  for (const auto& [file, func] : frames) {
    PythonStack::Frame& f = py.frames[py.depth++];
    strcpy(f.file, file);
    strcpy(f.func, func);
    f.line = 1;
  }
  return py;
}

std::string Text(FixRule rule, const char* lib = nullptr) {
  char buf[1024];
  TextBuffer b(buf, sizeof(buf));
  FormatFix(b, rule, lib);
  return std::string(b.data(), b.size());
}

// The rule's `fix:` text (for `library`) contains each of `parts`.
void ExpectFixSays(FixRule rule, const char* library, std::initializer_list<const char*> parts) {
  SCOPED_TRACE(FixRuleName(rule));
  std::string t = Text(rule, library);
  for (const char* part : parts) EXPECT_THAT(t, HasSubstr(part));
}

constexpr char kTorch[] = "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py";
constexpr char kPopenFork[] = "/usr/lib/python3.11/multiprocessing/popen_fork.py";

TEST(FixAdviceTest, DataLoaderInTheForkStack) {
  PythonStack py = Py({{kPopenFork, "_launch"},
                       {"/usr/lib/python3.11/multiprocessing/process.py", "start"},
                       {kTorch, "__init__"},
                       {"train.py", "main"}});
  FixFacts f;
  f.fork_py = &py;
  EXPECT_EQ(FixRule::kDataLoader, ChooseFix(f));
  ExpectFixSays(FixRule::kDataLoader, nullptr, {"persistent_workers=True"});
}

TEST(FixAdviceTest, MultiprocessingForkContext) {
  PythonStack py = Py({{kPopenFork, "_launch"},
                       {"/usr/lib/python3.11/multiprocessing/process.py", "start"},
                       {"train.py", "main"}});
  FixFacts f;
  f.fork_py = &py;
  EXPECT_EQ(FixRule::kMultiprocessingFork, ChooseFix(f));
  ExpectFixSays(FixRule::kMultiprocessingFork, nullptr,
                {"'forkserver'", "before RDMA init", "set_forkserver_preload()"});
}

TEST(FixAdviceTest, OsForkInUserCode) {
  PythonStack py = Py({{"train.py", "start_workers"}, {"train.py", "main"}});
  FixFacts f;
  f.fork_py = &py;
  EXPECT_EQ(FixRule::kPythonFork, ChooseFix(f));
  ExpectFixSays(FixRule::kPythonFork, nullptr, {"os.fork() before RDMA init", "posix_spawn"});
}

TEST(FixAdviceTest, MpiInitInTheInitStack) {
  FixFacts f;
  f.init_in_mpi = true;
  EXPECT_EQ(FixRule::kMpiInit, ChooseFix(f));  // C MPI program
  PythonStack py = Py({{"rank.py", "main"}});
  f.fork_py = &py;
  EXPECT_EQ(FixRule::kMpiInit, ChooseFix(f));  // mpi4py + os.fork
  ExpectFixSays(FixRule::kMpiInit, nullptr, {"before MPI_Init"});
}

TEST(FixAdviceTest, UcxForkInitWhereTheKernelCopiesPinnedPages) {
  FixFacts f;
  f.fork_init_by_ucx = true;
  f.child_segv = true;
  f.fork_support_needless = true;
  f.init_in_mpi = true;  // UCX under MPI: the cheapest fix still wins
  EXPECT_EQ(FixRule::kUcxForkInit, ChooseFix(f));
  ExpectFixSays(FixRule::kUcxForkInit, "libuct_ib.so.0",
                {"UCX_IB_FORK_INIT=n", "ibv_fork_init from libuct_ib.so.0"});
  // Where the kernel does not copy the pinned pages UCX's fork support is needed: not this advice.
  f.fork_support_needless = false;
  EXPECT_EQ(FixRule::kMpiInit, ChooseFix(f));
  f.fork_support_needless = true;
  f.child_segv = false;
  EXPECT_EQ(FixRule::kMpiInit, ChooseFix(f));
}

TEST(FixAdviceTest, CProgram) {
  FixFacts f;
  EXPECT_EQ(FixRule::kCProgram, ChooseFix(f));
  PythonStack empty;
  empty.depth = 0;
  f.fork_py = &empty;
  EXPECT_EQ(FixRule::kCProgram, ChooseFix(f));
  ExpectFixSays(FixRule::kCProgram, nullptr, {"fork first", "posix_spawn"});
}

TEST(FixAdviceTest, LibraryCacheOnly) {
  PythonStack py = Py({{"train.py", "main"}});
  FixFacts f;
  f.fork_py = &py;
  f.library_cache_only = true;
  EXPECT_EQ(FixRule::kLibraryCache, ChooseFix(f));
  ExpectFixSays(FixRule::kLibraryCache, "librdmacm", {"librdmacm keeps its device context"});
}

TEST(FixAdviceTest, PreexecFnSubprocessWithDontforkRanges) {
  PythonStack py = Py({{"/usr/lib/python3.11/subprocess.py", "_execute_child"},
                       {"/usr/lib/python3.11/subprocess.py", "__init__"},
                       {"train.py", "main"}});
  FixFacts f;
  f.fork_py = &py;
  f.child_execs = true;
  f.child_segv = true;
  EXPECT_EQ(FixRule::kPreexecFn, ChooseFix(f));
  ExpectFixSays(FixRule::kPreexecFn, nullptr,
                {"start_new_session=True instead of preexec_fn=os.setsid"});
}

TEST(FixAdviceTest, RuleNamesAreDistinct) {
  EXPECT_STREQ("dataloader", FixRuleName(FixRule::kDataLoader));
  EXPECT_STREQ("multiprocessing-fork", FixRuleName(FixRule::kMultiprocessingFork));
  EXPECT_STREQ("python-fork", FixRuleName(FixRule::kPythonFork));
  EXPECT_STREQ("mpi-init", FixRuleName(FixRule::kMpiInit));
  EXPECT_STREQ("ucx-fork-init", FixRuleName(FixRule::kUcxForkInit));
  EXPECT_STREQ("c-program", FixRuleName(FixRule::kCProgram));
  EXPECT_STREQ("library-cache", FixRuleName(FixRule::kLibraryCache));
  EXPECT_STREQ("preexec-fn", FixRuleName(FixRule::kPreexecFn));
}

}  // namespace
}  // namespace forkguard
