// Failures: a worker killed, hung, crashing, exiting or throwing, and a
// corrupted record -- each an error naming who and what, never a hang, and no
// zombie, descriptor or shared-memory name left behind.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader/loader.h"
#include "tests/support/runfiles.h"

namespace forkguard::loader {
namespace {

using test_support::DirNames;
using test_support::MakeTempDir;

constexpr uint64_t kStuckSample = 37;  // in batch 4 (of 8): dispatched by Start()

// Descriptors of this process that point at a refloader memfd.
int RefloaderMemfds() {
  int n = 0;
  for (const std::string& fd : DirNames("/proc/self/fd")) {
    char target[256] = {0};
    std::string link = "/proc/self/fd/" + fd;
    if (readlink(link.c_str(), target, sizeof target - 1) > 0 && strstr(target, "memfd:refloader"))
      n++;
  }
  return n;
}

// The pid is neither running nor a zombie child of ours.
::testing::AssertionResult Reaped(pid_t pid) {
  int status;
  errno = 0;
  pid_t r = waitpid(pid, &status, WNOHANG);
  if (!(r == -1 && errno == ECHILD))
    return ::testing::AssertionFailure()
           << "pid " << pid << " is still our child (waitpid " << r << ")";
  if (kill(pid, 0) == 0 || errno != ESRCH)
    return ::testing::AssertionFailure() << "pid " << pid << " still exists";
  return ::testing::AssertionSuccess();
}

class LoaderFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    // A hung test is killed (and fails) instead of hanging CI.
    alarm(120);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);  // the crash test's worker must not dump core
    dir_ = MakeTempDir("failure");
    opts_.files = MakeDataset({dir_, 64, "fixed:256", 5, 2});
    opts_.batch_size = 8;
    opts_.sample_bytes = 256;
    opts_.num_workers = 2;
    opts_.prefetch_per_worker = 2;
    shm_before_ = DirNames("/dev/shm");
    memfds_before_ = RefloaderMemfds();
  }
  void TearDown() override {
    alarm(0);
    EXPECT_EQ(DirNames("/dev/shm"), shm_before_) << "/dev/shm changed";
    EXPECT_EQ(RefloaderMemfds(), memfds_before_) << "a refloader memfd is still open";
  }

  // Pulls batches until Next() throws; fails the test if the epoch completes.
  LoaderError RunUntilError(Loader& l) {
    delivered_before_error_ = 0;
    for (int i = 0; i < 1000; i++) {
      try {
        LoaderItem item = l.Next();
        if (item.kind == LoaderItem::kBatch) {
          delivered_before_error_++;
          l.Release(item.batch);
        }
      } catch (const LoaderError& e) {
        return e;
      }
    }
    ADD_FAILURE() << "no error";
    return LoaderError("none", {});
  }

  // A transform that announces (by creating DIR/stuck.<pid>) that its worker is
  // on kStuckSample, then does `what`.
  Transform StuckTransform(std::function<void()> what) {
    std::string flag = dir_ + "/stuck.";
    Transform decode = VerifyAndDecodeTransform();
    return [flag, what, decode](const RecordView& r, std::span<std::byte> out) {
      if (r.index == kStuckSample) {
        std::string f = flag + std::to_string(getpid());
        close(open(f.c_str(), O_CREAT | O_WRONLY, 0600));
        what();
      }
      decode(r, out);
    };
  }

  pid_t WaitForStuckWorker() {
    for (;;) {  // bounded by alarm()
      for (const std::string& n : DirNames(dir_))
        if (n.rfind("stuck.", 0) == 0) return std::stoi(n.substr(6));
      usleep(1000);
    }
  }

  std::string dir_;
  LoaderOptions opts_;
  std::set<std::string> shm_before_;
  int memfds_before_ = 0;
  uint64_t delivered_before_error_ = 0;
};

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST_F(LoaderFailure, WorkerKilledMidEpochIsAnErrorNamingItNotAHang) {
  opts_.timeout_ms = 60000;  // death must be seen at once, not as a timeout
  opts_.transform = StuckTransform([] { pause(); });
  std::vector<pid_t> pids;
  {
    Loader l(opts_);
    l.Start();
    pids = l.worker_pids();
    ASSERT_EQ(pids.size(), 2u);
    for (int i = 0; i < 2; i++) {  // mid-epoch: some batches delivered
      LoaderItem item = l.Next();
      ASSERT_EQ(item.kind, LoaderItem::kBatch);
      l.Release(item.batch);
    }
    pid_t victim = WaitForStuckWorker();
    int w = victim == pids[0] ? 0 : 1;
    ASSERT_EQ(pids[w], victim);
    ASSERT_EQ(kill(victim, SIGKILL), 0);
    LoaderError e = RunUntilError(l);
    const std::string msg = e.what();
    EXPECT_EQ(e.info().worker, w);
    EXPECT_EQ(e.info().pid, victim);
    EXPECT_EQ(e.info().signal, SIGKILL);
    EXPECT_FALSE(e.info().hung);
    EXPECT_EQ(e.info().sample, static_cast<int64_t>(kStuckSample));
    EXPECT_TRUE(Contains(msg, "worker " + std::to_string(w) + " (pid " + std::to_string(victim)))
        << msg;
    EXPECT_TRUE(Contains(msg, "SIGKILL")) << msg;
    EXPECT_TRUE(Contains(msg, "sample 37")) << msg;
    // Progress still counts exactly what was delivered (2 batches + whatever
    // RunUntilError took before the error), so a resume would lose nothing.
    EXPECT_EQ(l.state().epoch, 0u);
    EXPECT_EQ(l.state().batch, 2u + delivered_before_error_);
    // The loader is dead for good, and says so again.
    EXPECT_THROW(l.Next(), LoaderError);
    for (pid_t p : pids) EXPECT_TRUE(Reaped(p));  // already, before destruction
  }
  for (pid_t p : pids) EXPECT_TRUE(Reaped(p));
}

TEST_F(LoaderFailure, HungWorkerTimesOut) {
  opts_.timeout_ms = 300;
  opts_.transform = StuckTransform([] { pause(); });
  Loader l(opts_);
  l.Start();
  std::vector<pid_t> pids = l.worker_pids();
  LoaderError e = RunUntilError(l);
  pid_t stuck = WaitForStuckWorker();
  EXPECT_TRUE(e.info().hung);
  EXPECT_EQ(e.info().pid, stuck);
  EXPECT_EQ(e.info().sample, static_cast<int64_t>(kStuckSample));
  EXPECT_TRUE(Contains(e.what(), "no progress for 300 ms")) << e.what();
  EXPECT_TRUE(Contains(e.what(), "pid " + std::to_string(stuck))) << e.what();
  EXPECT_TRUE(Contains(e.what(), "sample 37")) << e.what();
  for (pid_t p : pids) EXPECT_TRUE(Reaped(p));
}

TEST_F(LoaderFailure, SlowButProgressingWorkerIsNotHung) {
  // Each batch takes 8 x 150 ms = 1.2 s > timeout, but every sample finishes
  // well within it: progress is per sample, so this is not a hang.
  opts_.timeout_ms = 1000;
  Transform decode = VerifyAndDecodeTransform();
  opts_.transform = [decode](const RecordView& r, std::span<std::byte> out) {
    usleep(150000);
    decode(r, out);
  };
  opts_.sampler.kind = SamplerKind::kDistributed;  // 16 of the 64 records: 2 batches
  opts_.sampler.world = 4;
  Loader l(opts_);
  l.Start();
  uint64_t samples = 0;
  for (;;) {
    LoaderItem item = l.Next();
    if (item.kind == LoaderItem::kEpochEnd) break;
    samples += item.batch.samples.size();
    l.Release(item.batch);
  }
  EXPECT_EQ(samples, 16u);
}

TEST_F(LoaderFailure, TransformExceptionNamesMessageAndSample) {
  opts_.transform = StuckTransform([] { throw std::runtime_error("cannot decode this image"); });
  Loader l(opts_);
  l.Start();
  std::vector<pid_t> pids = l.worker_pids();
  LoaderError e = RunUntilError(l);
  EXPECT_EQ(e.info().message, "cannot decode this image");
  EXPECT_EQ(e.info().sample, static_cast<int64_t>(kStuckSample));
  EXPECT_GE(e.info().worker, 0);
  EXPECT_TRUE(Contains(e.what(), "cannot decode this image")) << e.what();
  EXPECT_TRUE(Contains(e.what(), "sample 37")) << e.what();
  EXPECT_TRUE(Contains(e.what(), "pid " + std::to_string(e.info().pid))) << e.what();
  for (pid_t p : pids) EXPECT_TRUE(Reaped(p));
}

TEST_F(LoaderFailure, WorkerExitNamesStatus) {
  opts_.transform = StuckTransform([] { _exit(7); });
  Loader l(opts_);
  l.Start();
  LoaderError e = RunUntilError(l);
  EXPECT_EQ(e.info().exit_status, 7);
  EXPECT_EQ(e.info().sample, static_cast<int64_t>(kStuckSample));
  EXPECT_TRUE(Contains(e.what(), "exited with status 7")) << e.what();
}

TEST_F(LoaderFailure, WorkerCrashNamesSignal) {
  opts_.transform = StuckTransform([] {
    signal(SIGSEGV, SIG_DFL);  // sanitizers catch SIGSEGV and exit(1) instead
    raise(SIGSEGV);
  });
  Loader l(opts_);
  l.Start();
  LoaderError e = RunUntilError(l);
  EXPECT_EQ(e.info().signal, SIGSEGV);
  EXPECT_TRUE(Contains(e.what(), "SIGSEGV")) << e.what();
  EXPECT_TRUE(Contains(e.what(), "sample 37")) << e.what();
}

TEST_F(LoaderFailure, InProcessTransformErrorNamesSample) {
  opts_.num_workers = 0;
  opts_.transform = StuckTransform([] { throw std::runtime_error("bad"); });
  Loader l(opts_);
  l.Start();
  LoaderError e = RunUntilError(l);
  EXPECT_EQ(e.info().worker, -1);
  EXPECT_EQ(e.info().pid, getpid());
  EXPECT_EQ(e.info().sample, static_cast<int64_t>(kStuckSample));
}

TEST_F(LoaderFailure, CorruptedRecordNamesFileAndOffset) {
  for (uint32_t workers : {0u, 2u}) {
    SCOPED_TRACE(workers);
    std::string file;
    uint64_t offset;
    {
      Dataset ds(opts_.files);
      RecordView r = ds.Get(kStuckSample);  // in the second shard
      file = *r.file;
      offset = r.offset;
    }
    int fd = open(file.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char c;
    ASSERT_EQ(pread(fd, &c, 1, static_cast<off_t>(offset + 12 + 100)), 1);
    c ^= 1;
    ASSERT_EQ(pwrite(fd, &c, 1, static_cast<off_t>(offset + 12 + 100)), 1);
    close(fd);
    opts_.num_workers = workers;
    Loader l(opts_);
    l.Start();
    std::vector<pid_t> pids = l.worker_pids();
    LoaderError e = RunUntilError(l);
    EXPECT_TRUE(Contains(e.what(), file + ": record at offset " + std::to_string(offset)))
        << e.what();
    EXPECT_TRUE(Contains(e.what(), "data CRC mismatch")) << e.what();
    EXPECT_EQ(e.info().sample, static_cast<int64_t>(kStuckSample));
    for (pid_t p : pids) EXPECT_TRUE(Reaped(p));
    // Undo for the next round.
    fd = open(file.c_str(), O_RDWR);
    c ^= 1;
    ASSERT_EQ(pwrite(fd, &c, 1, static_cast<off_t>(offset + 12 + 100)), 1);
    close(fd);
  }
}

TEST_F(LoaderFailure, ConsumerHoldingEverySlotIsAnErrorNotADeadlock) {
  Loader l(opts_);
  l.Start();
  std::vector<Batch> held;
  for (uint32_t i = 0; i < l.slot_region().num_slots; i++) {
    LoaderItem item = l.Next();
    ASSERT_EQ(item.kind, LoaderItem::kBatch);
    held.push_back(item.batch);
  }
  try {
    l.Next();
    FAIL() << "Next() with every slot held returned";
  } catch (const LoaderError& e) {
    EXPECT_TRUE(Contains(e.what(), "held by the consumer")) << e.what();
  }
  l.Release(held[0]);
  EXPECT_THROW(l.Release(held[0]), LoaderError);  // twice
  // The freed slot gets the next batch; the old view of it stays refused.
  LoaderItem again = l.Next();
  ASSERT_EQ(again.kind, LoaderItem::kBatch);
  EXPECT_EQ(again.batch.index, held.size());
  EXPECT_EQ(again.batch.slot, held[0].slot);
  EXPECT_THROW(l.Release(held[0]), LoaderError);
  for (size_t i = 1; i < held.size(); i++) l.Release(held[i]);
  l.Release(again.batch);
  LoaderItem item = l.Next();  // usable again
  EXPECT_EQ(item.kind, LoaderItem::kBatch);
  EXPECT_EQ(item.batch.index, held.size() + 1);
  l.Release(item.batch);
}

TEST_F(LoaderFailure, CleanShutdownMidEpochLeavesNothing) {
  std::vector<pid_t> pids;
  {
    Loader l(opts_);
    l.Start();
    pids = l.worker_pids();
    EXPECT_EQ(RefloaderMemfds(), memfds_before_ + 2);  // slots + control
    LoaderItem item = l.Next();
    ASSERT_EQ(item.kind, LoaderItem::kBatch);
    // Destroyed while holding a batch and with batches in flight.
  }
  for (pid_t p : pids) EXPECT_TRUE(Reaped(p));
}

TEST_F(LoaderFailure, MisuseIsReported) {
  Loader l(opts_);
  EXPECT_THROW(l.Next(), std::logic_error);  // before Start
  l.Start();
  EXPECT_THROW(l.Start(), std::logic_error);
  l.Shutdown();
  l.Shutdown();  // idempotent
  EXPECT_THROW(l.Next(), std::logic_error);
}

}  // namespace
}  // namespace forkguard::loader
