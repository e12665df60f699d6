// One test per rule of the `fix:` line, plus precedence where two apply.
#include "shim/fix_advice.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace forkguard {
namespace {

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
  EXPECT_NE(std::string::npos, Text(FixRule::kDataLoader).find("persistent_workers=True"));
}

TEST(FixAdviceTest, MultiprocessingForkContext) {
  PythonStack py = Py({{kPopenFork, "_launch"},
                       {"/usr/lib/python3.11/multiprocessing/process.py", "start"},
                       {"train.py", "main"}});
  FixFacts f;
  f.fork_py = &py;
  EXPECT_EQ(FixRule::kMultiprocessingFork, ChooseFix(f));
  std::string t = Text(FixRule::kMultiprocessingFork);
  EXPECT_NE(std::string::npos, t.find("'forkserver'")) << t;
  EXPECT_NE(std::string::npos, t.find("before RDMA init")) << t;
  EXPECT_NE(std::string::npos, t.find("set_forkserver_preload()")) << t;
}

TEST(FixAdviceTest, OsForkInUserCode) {
  PythonStack py = Py({{"train.py", "start_workers"}, {"train.py", "main"}});
  FixFacts f;
  f.fork_py = &py;
  EXPECT_EQ(FixRule::kPythonFork, ChooseFix(f));
  std::string t = Text(FixRule::kPythonFork);
  EXPECT_NE(std::string::npos, t.find("os.fork() before RDMA init")) << t;
  EXPECT_NE(std::string::npos, t.find("posix_spawn")) << t;
}

TEST(FixAdviceTest, MpiInitInTheInitStack) {
  FixFacts f;
  f.init_in_mpi = true;
  EXPECT_EQ(FixRule::kMpiInit, ChooseFix(f));  // C MPI program
  PythonStack py = Py({{"rank.py", "main"}});
  f.fork_py = &py;
  EXPECT_EQ(FixRule::kMpiInit, ChooseFix(f));  // mpi4py + os.fork
  EXPECT_NE(std::string::npos, Text(FixRule::kMpiInit).find("before MPI_Init"));
}

TEST(FixAdviceTest, UcxForkInitWhereTheKernelCopiesPinnedPages) {
  FixFacts f;
  f.fork_init_by_ucx = true;
  f.child_segv = true;
  f.fork_support_needless = true;
  f.init_in_mpi = true;  // UCX under MPI: the cheapest fix still wins
  EXPECT_EQ(FixRule::kUcxForkInit, ChooseFix(f));
  std::string t = Text(FixRule::kUcxForkInit, "libuct_ib.so.0");
  EXPECT_NE(std::string::npos, t.find("UCX_IB_FORK_INIT=n")) << t;
  EXPECT_NE(std::string::npos, t.find("ibv_fork_init from libuct_ib.so.0")) << t;
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
  std::string t = Text(FixRule::kCProgram);
  EXPECT_NE(std::string::npos, t.find("fork first")) << t;
  EXPECT_NE(std::string::npos, t.find("posix_spawn")) << t;
}

TEST(FixAdviceTest, LibraryCacheOnly) {
  PythonStack py = Py({{"train.py", "main"}});
  FixFacts f;
  f.fork_py = &py;
  f.library_cache_only = true;
  EXPECT_EQ(FixRule::kLibraryCache, ChooseFix(f));
  std::string t = Text(FixRule::kLibraryCache, "librdmacm");
  EXPECT_NE(std::string::npos, t.find("librdmacm keeps its device context")) << t;
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
  std::string t = Text(FixRule::kPreexecFn);
  EXPECT_NE(std::string::npos, t.find("start_new_session=True instead of preexec_fn=os.setsid"))
      << t;
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
