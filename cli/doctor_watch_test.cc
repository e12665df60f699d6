// The "watcher" check of `forkguard doctor` over facts of its own: each missing part named,
// the hook that judges forks, and root.
#include "cli/doctor_watch.h"

#include <errno.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forkguard::cli::doctor {
namespace {

using ::testing::HasSubstr;

WatcherFacts Debian12Root() {
  WatcherFacts w;
  w.btf = w.find_vma = w.lsm_known = w.task_alloc_hook = w.fmod_ret_target = w.root = true;
  w.load_tried = w.loads = true;
  w.lsm = "landlock,lockdown,yama,apparmor,bpf";
  return w;
}

// CheckWatcher(w) says `verdict`, with `part` in its detail.
void ExpectWatcherCheck(const WatcherFacts& w, Verdict verdict, const std::string& part) {
  Check c = CheckWatcher(w);
  EXPECT_EQ(c.verdict, verdict);
  EXPECT_THAT(c.detail, HasSubstr(part));
}

TEST(DoctorWatch, Debian12AsRootJudgesInTheLsmHook) {
  Check c = CheckWatcher(Debian12Root());
  EXPECT_EQ(c.verdict, Verdict::kOk);
  EXPECT_EQ(
      c.detail,
      "forkguard watch can run here (BTF; bpf_find_vma: each range's mapping read at the fork); "
      "forks are judged by the BPF LSM "
      "hook task_alloc (active LSMs: landlock,lockdown,yama,apparmor,bpf); its BPF programs load "
      "here");
}

TEST(DoctorWatch, WithoutBpfInTheLsmListTheFallbackJudges) {
  WatcherFacts w = Debian12Root();
  w.lsm = "landlock,lockdown,yama,apparmor";
  w.root = w.load_tried = w.loads = false;
  w.uid = 1000;
  ExpectWatcherCheck(w, Verdict::kOk,
                     "by fmod_ret on security_task_alloc: BPF LSM is not in the active list "
                     "(landlock,lockdown,yama,apparmor); it loads BPF programs: run it as root");
  w.lsm_known = false;
  EXPECT_NE(CheckWatcher(w).detail.find("(/sys/kernel/security/lsm unreadable)"),
            std::string::npos);
}

TEST(DoctorWatch, EachMissingPartIsNamed) {
  WatcherFacts w = Debian12Root();
  w.find_vma = false;
  ExpectWatcherCheck(w, Verdict::kOk,
                     "no bpf_find_vma (before Linux 5.17): each range's mapping read at "
                     "registration and kept by the madvise calls since");
  w.btf = false;
  ExpectWatcherCheck(w, Verdict::kWarn, "the kernel has no BTF");
  w = Debian12Root();
  w.lsm = "yama";
  w.fmod_ret_target = false;
  Check c = CheckWatcher(w);
  EXPECT_EQ(c.verdict, Verdict::kWarn);
  EXPECT_EQ(c.advice, "boot with lsm=...,bpf (the active list is in /sys/kernel/security/lsm)");
}

// Root in a container whose policy refuses bpf(): the kernel has everything, the load fails.
TEST(DoctorWatch, ARefusedLoadIsSaid) {
  WatcherFacts w = Debian12Root();
  w.loads = false;
  w.load_errno = EPERM;
  ExpectWatcherCheck(w, Verdict::kWarn,
                     "refused to load its BPF programs for this root process (Operation not "
                     "permitted): a container or a seccomp policy withholds bpf()");
}

// The facts of this machine are read without privilege and without failing.
TEST(DoctorWatch, GathersThisMachinesFacts) {
  WatcherFacts w = GatherWatcherFacts();
  EXPECT_EQ(w.root, geteuid() == 0);
  Check c = CheckWatcher(w);
  EXPECT_NE(c.verdict, Verdict::kFail);
  EXPECT_FALSE(c.detail.empty());
}

}  // namespace
}  // namespace forkguard::cli::doctor
