// Python first: the text and Markdown reports of Python processes head each site
// with the user's line, name the library the call went through and fold the
// interpreter's native frames (--native shows them). Logs recorded on rxe0
// (cli/testdata/real_rxe_python/: tests/python/mpi_rank_fork.py under
// `mpirun -np 2` with Open MPI over libfabric verbs, and
// tests/python/multiprocessing_after_rdma.py with pyverbs), plus synthetic stacks.
#include <dirent.h>

#include <string>
#include <vector>

#include "cli/event_log.h"
#include "cli/job_report.h"
#include "cli/report_json.h"
#include "cli/report_markdown.h"
#include "cli/report_phrases.h"
#include "cli/report_text.h"
#include "cli/stack_view.h"
#include "cli/symbolizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The files one by one, in the order the directory lists them.
JobReport Load(const std::string& dir) {
  std::vector<std::string> files;
  std::string path = forkguard::test_support::Runfile("cli/testdata/real_rxe_python/" + dir);
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') files.push_back(path + "/" + e->d_name);
    closedir(d);
  }
  EXPECT_FALSE(files.empty()) << path;
  LogSet logs;
  ReadLogs(files, &logs);
  EXPECT_TRUE(logs.notes.empty()) << logs.notes[0].where << ": " << logs.notes[0].text;
  return BuildJobReport(logs, nullptr);
}

Frame Py(const std::string& file, int line, const std::string& func) {
  Frame f;
  f.python = true;
  f.py_file = file;
  f.py_line = line;
  f.py_func = func;
  return f;
}

Frame Native(const std::string& obj, uint64_t off, const std::string& sym = "") {
  Frame f;
  f.obj = obj;
  f.off = off;
  f.sym = sym;
  return f;
}

TEST(PythonReport, Mpi4pyRankNamesTheUsersFunctionFirst) {
  JobReport r = Load("mpi4py_2ranks");
  ASSERT_EQ(r.hazard_groups.size(), 1u);
  EXPECT_EQ(r.ranks.size(), 2u);
  std::string text = RenderText(r);
  // The site is the user's function, not the interpreter.
  EXPECT_THAT(text, HasSubstr("\nmpi_rank_fork.py:11 in rank_fork_site: hazard: fork() after RDMA "
                              "initialization ×2 in 2 processes"));
  size_t fork_at = text.find("  fork called at:\n");
  ASSERT_NE(fork_at, std::string::npos) << text;
  EXPECT_EQ(text.find("      #0 rank_fork_site at mpi_rank_fork.py:11\n", fork_at), fork_at + 18)
      << text;
  // RDMA init: the user's line (the import that initialized MPI), then the library.
  EXPECT_THAT(text,
              HasSubstr("RDMA was first initialized at mpi_rank_fork.py:6 in <module> (mpi4py)"));
  EXPECT_THAT(
      text,
      HasSubstr("inside: mpi4py → libmpi → mca_pml_cm → mca_mtl_ofi → libfabric (7 frames)\n"));
  // The interpreter's frames are folded, and shown with --native.
  EXPECT_THAT(text, Not(HasSubstr("Py_BytesMain")));
  EXPECT_THAT(text, Not(HasSubstr("python3+0x")));
  EXPECT_THAT(text, HasSubstr("native frames folded: --native shows them"));
  std::string native = RenderText(r, 100, /*show_native=*/true);
  EXPECT_THAT(native, HasSubstr("Py_BytesMain"));
  EXPECT_LT(native.find("#0 rank_fork_site at mpi_rank_fork.py:11"), native.find("Py_BytesMain"));
  // The fix speaks Python.
  EXPECT_THAT(text, HasSubstr("multiprocessing_context='spawn'"));

  std::string md = RenderMarkdown(r);
  EXPECT_THAT(md, HasSubstr("`mpi_rank_fork.py:11 in rank_fork_site`"));
  EXPECT_THAT(md, HasSubstr("#0 rank_fork_site at mpi_rank_fork.py:11"));
  EXPECT_THAT(md, Not(HasSubstr("Py_BytesMain")));
  EXPECT_NE(RenderMarkdown(r, true).find("Py_BytesMain"), std::string::npos);
  // JSON keeps every frame; its location is the user's line.
  std::string json = RenderJson(r);
  EXPECT_THAT(json, HasSubstr("\"location\": \"mpi_rank_fork.py:11\""));
  EXPECT_NE(json.find("Py_BytesMain"), std::string::npos);
}

TEST(PythonReport, PyverbsMultiprocessingSkipsTheStandardLibrary) {
  JobReport r = Load("pyverbs_multiprocessing");
  ASSERT_EQ(r.hazard_groups.size(), 1u);
  std::string text = RenderText(r);
  EXPECT_THAT(text, HasSubstr("\nmultiprocessing_after_rdma.py:14 in start_worker: hazard:"));
  EXPECT_THAT(text, Not(HasSubstr("popen_fork.py:66: hazard")));
  EXPECT_THAT(
      text,
      HasSubstr("inside: multiprocessing (5 frames, innermost popen_fork.py:66 in _launch)\n"));
  EXPECT_THAT(text,
              HasSubstr("RDMA was first initialized at rdma_common.py:21 in open_rdma (pyverbs)"));
  EXPECT_THAT(text,
              HasSubstr("  rdma_common.py:21 in open_rdma (pyverbs): ibv_open_device on rxe0"));
  EXPECT_THAT(text, Not(HasSubstr("device.cpython-311")));
  EXPECT_NE(RenderText(r, 100, true).find("device.cpython-311"), std::string::npos);
}

TEST(StackView, TorchDataLoaderHeadIsTheUsersLine) {
  Stack s = {
      Native("/usr/bin/python3.11", 0x273f59),
      Py("/usr/lib/python3.11/multiprocessing/popen_fork.py", 66, "_launch"),
      Py("/usr/lib/python3.11/multiprocessing/process.py", 121, "start"),
      Py("/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", 1042, "__init__"),
      Py("/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", 441, "__iter__"),
      Py("/home/u/train.py", 88, "build_loader"),
      Py("/home/u/train.py", 120, "main"),
  };
  EXPECT_EQ(SiteHeading(s), "train.py:88 in build_loader");
  EXPECT_EQ(SiteLabel(s), "train.py:88");
  StackView v = ViewStack(s);
  ASSERT_EQ(v.libraries.size(), 2u);
  EXPECT_EQ(v.libraries[0], "torch.utils");
  EXPECT_EQ(v.libraries[1], "multiprocessing");
  auto lines = StackLines(s, false);
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[0], "#0 build_loader at train.py:88");
  EXPECT_EQ(lines[1], "#1 main at train.py:120");
  EXPECT_EQ(
      lines[2].rfind(
          "inside: torch.utils → multiprocessing (4 frames, innermost popen_fork.py:66 in _launch)",
          0),
      0u)
      << lines[2];
  EXPECT_EQ(lines[3], "(1 native frame folded: --native shows them)");
}

TEST(StackView, TorchDistributedIsTheLibraryOfAnInit) {
  Stack s = {
      Native("/usr/lib/x86_64-linux-gnu/libforkguard.so", 0x10, "ibv_open_device"),
      Native("/usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so", 0x99),
      Py("/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", 900,
         "init_process_group"),
      Py("train.py", 12, "setup"),
  };
  EXPECT_EQ(SiteHeading(s), "train.py:12 in setup");
  StackView v = ViewStack(s);
  ASSERT_FALSE(v.libraries.empty());
  EXPECT_EQ(v.libraries[0], "torch.distributed");
  EXPECT_EQ(LibraryOf(s[1]), "torch");
  EXPECT_EQ(LibraryOf(s[0]), "");  // plumbing
}

TEST(StackView, OnlyLibraryFramesUseTheOutermost) {
  Stack s = {Py("/usr/lib/python3.11/os.py", 1, "fork_exec"),
             Py("<frozen runpy>", 88, "_run_code")};
  EXPECT_EQ(SiteHeading(s), "<frozen runpy>:88 in _run_code");
}

TEST(StackView, NativeStacksAreUnchanged) {
  Stack s = {Native("/lib/x86_64-linux-gnu/libc.so.6", 0x1, "fork"),
             Native("/opt/app/trainer", 0x42, "StartWorkers")};
  EXPECT_EQ(SiteHeading(s), "StartWorkers");
  auto lines = StackLines(s, false);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "#0 fork (libc.so.6+0x1)");
}

}  // namespace
}  // namespace forkguard::cli
