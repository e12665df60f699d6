// What `forkguard ps` learns of the watcher from /run/forkguard: the running watcher's state,
// and the programs an earlier --persist left pinned.
#include "cli/watch_state.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace forkguard::cli {
namespace {

class WatchStateFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/watch_state.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    state_dir_ = root_ + "/run";
    pin_dir_ = root_ + "/pins";
  }
  void TearDown() override { std::system(("rm -rf '" + root_ + "'").c_str()); }
  void Pin(const std::string& name) {
    mkdir(pin_dir_.c_str(), 0700);
    std::ofstream(pin_dir_ + "/" + name) << "";
  }
  static WatchState Memory() {
    WatchState s;
    s.pid = getpid();
    s.enforce = "memory";
    s.hook = "lsm/task_alloc";
    s.log = "/var/log/forkguard";
    return s;
  }
  std::string root_, state_dir_, pin_dir_;
};

TEST_F(WatchStateFiles, RunningWatcherReadBack) {
  std::string error;
  ASSERT_TRUE(WriteWatchState(Memory(), state_dir_, &error)) << error;
  std::optional<WatchState> w = ReadWatchState(state_dir_);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->pid, getpid());
  EXPECT_EQ(w->enforce, "memory");
  EXPECT_EQ(w->hook, "lsm/task_alloc");
  RemoveWatchState(state_dir_);
  EXPECT_FALSE(ReadWatchState(state_dir_).has_value());
}

TEST_F(WatchStateFiles, PinnedProgramsAreCountedAndNamed) {
  EXPECT_FALSE(ReadPinnedWatch(state_dir_, pin_dir_).has_value()) << "nothing pinned";
  std::string error;
  ASSERT_TRUE(WritePinnedWatch("memory", "lsm/task_alloc", state_dir_, &error)) << error;
  // The record alone, with a readable pin directory that holds nothing: nothing is pinned
  // (an --unpin by hand, or a reboot, left the record behind).
  EXPECT_FALSE(ReadPinnedWatch(state_dir_, pin_dir_).has_value());
  Pin("judge_fork");
  Pin("on_umem_get");
  std::optional<PinnedWatch> p = ReadPinnedWatch(state_dir_, pin_dir_);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->links, 2);
  EXPECT_EQ(p->enforce, "memory");
  EXPECT_EQ(p->hook, "lsm/task_alloc");
  // Pins without the record: pinned, the mode unknown.
  RemovePinnedWatch(state_dir_);
  p = ReadPinnedWatch(state_dir_, pin_dir_);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->links, 2);
  EXPECT_EQ(p->enforce, "");
}

TEST_F(WatchStateFiles, RecordOthersCanWriteIsIgnored) {
  std::string error;
  ASSERT_TRUE(WritePinnedWatch("memory", "lsm/task_alloc", state_dir_, &error)) << error;
  Pin("judge_fork");
  ASSERT_EQ(chmod((state_dir_ + "/" + kWatchPinnedFile).c_str(), 0666), 0);
  std::optional<PinnedWatch> p = ReadPinnedWatch(state_dir_, pin_dir_);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->enforce, "") << "a file others can write says nothing";
}

}  // namespace
}  // namespace forkguard::cli
