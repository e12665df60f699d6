// Real device (RDMA lane): `forkguard report` of Python programs on rxe0 names the
// user's functions and lines first (Python first):
//   - pyverbs + multiprocessing (multiprocessing_after_rdma.py),
//   - an mpi4py job: 2 ranks under mpirun, Open MPI over libfabric verbs on rxe0
//     (mpi_rank_fork.py), whose HTML and trace reports are kept as artifacts,
//   - a PyTorch DataLoader (dataloader_after_rdma.py).
// One source, three targets (FORKGUARD_TEST_MPI, FORKGUARD_TEST_DATALOADER select the
// case) so that each stays under the lane's per-test time limit on a loaded machine.
// Expected lines come from the MARK comments in the scripts, never hard-coded.
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/audit/log_lines.h"
#include "tests/support/rdma_device.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::test_support {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Script(const std::string& name) { return Runfile("tests/python/" + name); }

std::string Line(const std::string& script, const std::string& marker) {
  return std::to_string(LineOf(Script(script), marker));
}

std::vector<std::string> ShimEnv(const RdmaDevice& dev, const std::string& log_dir) {
  return {"LD_PRELOAD=" + Runfile("shim/libforkguard.so"),
          "FORKGUARD_LOG=" + log_dir,
          "FORKGUARD_QUIET=1",
          "RXE_DEV=" + dev.name,
          "PYTHONDONTWRITEBYTECODE=1",
          "RDMAV_FORK_SAFE=",
          "IBV_FORK_SAFE=",
          "LD_AUDIT="};
}

// `forkguard report --format FORMAT LOG_DIR` (stdout).
std::string Report(const std::string& log_dir, const std::string& format = "text",
                   bool native = false) {
  std::vector<std::string> argv = {Runfile("cli/forkguard"), "report", "--format", format};
  if (native) argv.push_back("--native");
  argv.push_back(log_dir);
  ProgramResult r = RunProgram(argv, {}, 120);
  EXPECT_EQ(r.status, 0) << r.err;
  return r.out;
}

// Where the lane keeps a test's files for the host: beside its XML result.
std::string ArtifactDir() {
  const char* xml = getenv("XML_OUTPUT_FILE");
  std::string base = xml ? xml : MakeTempDir("artifacts") + "/x";
  std::string dir = base.substr(0, base.rfind('/')) + "/python_report_rdma_test.artifacts";
  mkdir(dir.c_str(), 0755);
  return dir;
}

void Save(const std::string& path, const std::string& text) {
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  fwrite(text.data(), 1, text.size(), f);
  fclose(f);
}

#if !defined(FORKGUARD_TEST_DATALOADER) && !defined(FORKGUARD_TEST_MPI)
TEST(PythonReportRdma, PyverbsMultiprocessingNamesTheUsersLines) {
  RdmaDevice dev = RequireRdmaDevice();
  std::string logs = MakeTempDir("fglog");
  ProgramResult r = RunProgram({"/usr/bin/python3", Script("multiprocessing_after_rdma.py")},
                               ShimEnv(dev, logs), 200);
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("sum 140"));
  std::string text = Report(logs);
  const std::string fork_line = Line("multiprocessing_after_rdma.py", "MARK:worker-start");
  // The site is the user's function, not multiprocessing/popen_fork.py.
  EXPECT_THAT(text, HasSubstr("\nmultiprocessing_after_rdma.py:" + fork_line +
                              " in start_worker: hazard:"));
  EXPECT_THAT(
      text, HasSubstr("  fork called at:\n      #0 start_worker at multiprocessing_after_rdma.py:" +
                      fork_line + "\n      #1 main at multiprocessing_after_rdma.py:" +
                      Line("multiprocessing_after_rdma.py", "MARK:main-start") + "\n"));
  EXPECT_THAT(text, HasSubstr("inside: multiprocessing ("));
  EXPECT_THAT(text, Not(HasSubstr("popen_fork.py:66: hazard")));
  // RDMA init: the user's line that opened the device, then the library.
  const std::string open_line = Line("rdma_common.py", "MARK:open-device");
  EXPECT_THAT(text, HasSubstr("RDMA was first initialized at rdma_common.py:" + open_line +
                              " in open_rdma (pyverbs), by ibv_open_device"));
  EXPECT_THAT(text, HasSubstr("  rdma_common.py:" + open_line +
                              " in open_rdma (pyverbs): ibv_open_device on " + dev.name));
  // The interpreter's frames are folded; --native shows them.
  EXPECT_THAT(text, Not(HasSubstr("device.cpython")));
  EXPECT_THAT(text, Not(HasSubstr("Py_BytesMain")));
  std::string native = Report(logs, "text", true);
  EXPECT_THAT(native, HasSubstr("device.cpython"));
  std::string md = Report(logs, "markdown");
  EXPECT_THAT(md, HasSubstr("`multiprocessing_after_rdma.py:" + fork_line + " in start_worker`"));
  Save(ArtifactDir() + "/pyverbs_multiprocessing.txt", text);
}

#endif

#ifdef FORKGUARD_TEST_MPI
TEST(PythonReportRdma, Mpi4pyTwoRanksNameTheRankFunction) {
  RdmaDevice dev = RequireRdmaDevice();
  std::string logs = MakeTempDir("fglog-mpi");
  std::vector<std::string> env = ShimEnv(dev, logs);
  // Open MPI over rxe: pml cm + mtl ofi with libfabric's verbs;ofi_rxm (rxm asks rxe
  // for too large a CQ unless the universe is small), on this device only: the lane's
  // rxea/rxeb pair is also there and MPI_Init hangs when a rank picks it. As root: the
  // two ALLOW variables.
  env.push_back("FI_VERBS_DEVICE_NAME=" + dev.name);
  for (const char* e :
       {"FI_PROVIDER=verbs;ofi_rxm", "FI_UNIVERSE_SIZE=4", "OMPI_ALLOW_RUN_AS_ROOT=1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_plm_rsh_agent=false"})
    env.push_back(e);
  std::vector<std::string> argv = {"/usr/bin/mpirun",
                                   "--oversubscribe",
                                   "-np",
                                   "2",
                                   "--mca",
                                   "pml",
                                   "cm",
                                   "--mca",
                                   "mtl",
                                   "ofi"};
  for (const char* var : {"LD_PRELOAD", "FORKGUARD_LOG", "FORKGUARD_QUIET", "FI_PROVIDER",
                          "FI_UNIVERSE_SIZE", "FI_VERBS_DEVICE_NAME", "PYTHONDONTWRITEBYTECODE"}) {
    argv.push_back("-x");
    argv.push_back(var);
  }
  argv.push_back("/usr/bin/python3");
  argv.push_back(Script("mpi_rank_fork.py"));
  ProgramResult r = RunProgram(argv, env, 150);
  ASSERT_FALSE(r.timed_out) << "mpirun hung\n" << r.out << r.err;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("rank 0 of 2 sum 3"));
  EXPECT_THAT(r.out, HasSubstr("rank 1 of 2 sum 3"));
  std::string text = Report(logs);
  const std::string fork_line = Line("mpi_rank_fork.py", "MARK:rank-fork");
  EXPECT_THAT(text,
              HasSubstr("\nmpi_rank_fork.py:" + fork_line +
                        " in rank_fork_site: hazard: fork() after RDMA initialization ×2 in 2 "
                        "processes"));
  EXPECT_THAT(text, HasSubstr("(ranks 0, 1, host "));
  EXPECT_THAT(text, HasSubstr("      #0 rank_fork_site at mpi_rank_fork.py:" + fork_line + "\n"));
  // MPI initialized RDMA at the import: the user's line, then mpi4py and the MPI stack.
  EXPECT_THAT(text,
              HasSubstr("RDMA was first initialized at mpi_rank_fork.py:" +
                        Line("mpi_rank_fork.py", "MARK:mpi-import") + " in <module> (mpi4py)"));
  EXPECT_THAT(text, HasSubstr("inside: mpi4py → libmpi"));
  EXPECT_THAT(text, Not(HasSubstr("Py_BytesMain")));
  EXPECT_THAT(text, Not(HasSubstr("python3+0x")));
  // For the host: the logs and the HTML/trace reports of this two-rank job.
  std::string out = ArtifactDir();
  Save(out + "/mpi4py_2ranks.txt", text);
  Save(out + "/mpi4py_2ranks.html", Report(logs, "html"));
  Save(out + "/mpi4py_2ranks.trace.json", Report(logs, "trace"));
  Save(out + "/mpi4py_2ranks.json", Report(logs, "json"));
  RunProgram({"/bin/cp", "-r", logs, out + "/mpi4py_2ranks_logs"}, {}, 30);
}
#endif  // FORKGUARD_TEST_MPI

#ifdef FORKGUARD_TEST_DATALOADER
TEST(PythonReportRdma, TorchDataLoaderNamesTheUsersLines) {
  RdmaDevice dev = RequireRdmaDevice();
  std::string logs = MakeTempDir("fglog-dl");
  ProgramResult r =
      RunProgram({"/usr/bin/python3", Script("dataloader_after_rdma.py")}, ShimEnv(dev, logs), 250);
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::string text = Report(logs);
  const std::string iter_line = Line("rdma_common.py", "MARK:iterate");
  // iter(loader) runs in total(): the innermost frame outside torch and multiprocessing.
  EXPECT_THAT(text, HasSubstr("\nrdma_common.py:" + iter_line + " in total: hazard:"));
  EXPECT_THAT(text, HasSubstr("      #0 total at rdma_common.py:" + iter_line +
                              "\n      #1 main at dataloader_after_rdma.py:" +
                              Line("dataloader_after_rdma.py", "MARK:main-iterate") + "\n"));
  EXPECT_THAT(text, HasSubstr("inside: torch.utils → multiprocessing ("));
  EXPECT_THAT(text,
              HasSubstr("RDMA was first initialized at rdma_common.py:" +
                        Line("rdma_common.py", "MARK:open-device") + " in open_rdma (pyverbs)"));
  EXPECT_THAT(text, Not(HasSubstr("Py_BytesMain")));
  EXPECT_THAT(text, HasSubstr("persistent_workers=True"));
  Save(ArtifactDir() + "/dataloader.txt", text);
}
#endif  // FORKGUARD_TEST_DATALOADER

}  // namespace
}  // namespace forkguard::test_support
