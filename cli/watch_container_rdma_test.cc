// `forkguard watch` and a podman container in the guest, as root, on the real device: a
// container given the device and started without forkguard is judged as the shim judges the
// same program outside, and as the shim inside the same container judges it; --enforce memory
// refuses its harmful fork. Its root filesystem (Debian's glibc and rdma-core) is the one
// scripts/guests/container-rootfs made; scripts/lanes/rdma-lane names it in
// FORKGUARD_CONTAINER_ROOTFS.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cli/json.h"
#include "cli/testdata/watch_rdma_support.h"
#include "gtest/gtest.h"
#include "tests/support/rdma_device.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using test_support::ProgramResult;
using test_support::Runfile;
using test_support::RunProgram;

// The container root filesystem named by FORKGUARD_CONTAINER_ROOTFS; "" when it is not there.
std::string ContainerRootfs() {
  const char* dir = getenv("FORKGUARD_CONTAINER_ROOTFS");
  if (dir == nullptr || *dir == '\0') return "";
  std::string libibverbs = std::string(dir) + "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
  return access(libibverbs.c_str(), R_OK) == 0 ? dir : "";
}

constexpr char kNoRootfs[] =
    "no container root filesystem: FORKGUARD_CONTAINER_ROOTFS must name the tree "
    "scripts/guests/container-rootfs prints (scripts/lanes/rdma-lane makes it and sets it)";
constexpr char kPodman[] = "/usr/bin/podman";

// `podman run` of the dynamically linked program in a container on `rootfs`, given the RDMA
// devices, its fork support per `fork_safe`, and `flags`. podman's state is in `state` (on
// the guest's tmpfs-backed root; the storage driver vfs, since nothing is stored: --rootfs
// needs no image). No systemd in the guest: the cgroupfs manager, no events journal. The
// node's network (no network set-up: the program uses no RDMA CM address) and an unlimited
// memlock limit (registration pins pages). Killed after 120 s (a guard against a hang).
ProgramResult PodmanRun(const std::string& state, const std::string& rootfs, const std::string& dev,
                        const std::string& fork_safe, const std::vector<std::string>& flags) {
  std::string prog = std::filesystem::canonical(DynamicProg()).string();
  std::vector<std::string> argv = {kPodman,        "--root",   state + "/root", "--runroot",
                                   state + "/run", "--tmpdir", state + "/tmp"};
  for (const char* flag :
       {"--storage-driver=vfs", "--cgroup-manager=cgroupfs", "--events-backend=none", "run", "--rm",
        "--network=host", "--device=/dev/infiniband", "--ulimit=memlock=-1:-1"})
    argv.push_back(flag);
  argv.insert(argv.end(), {"-v", prog + ":/usr/local/bin/hazard_prog:ro", "-e", "RXE_DEV=" + dev,
                           "-e", "RDMAV_FORK_SAFE=" + fork_safe});
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--rootfs", rootfs, "/usr/local/bin/hazard_prog"});
  test_support::RunOptions opt = test_support::WithoutShimEnv({});
  opt.timeout_s = 120;
  return RunProgram(argv, opt);
}

// The header pid of each process whose program is `prog`, in the order of their logs' start.
std::vector<int64_t> Pids(const std::vector<Json>& events, const std::string& prog) {
  std::vector<std::pair<int64_t, int64_t>> found;
  for (const Json& e : events)
    if (GetString(e, "event") == "header" && GetString(e, "prog") == prog)
      found.emplace_back(GetInt(e, "_t", 0), GetInt(e, "_pid", -1));
  std::sort(found.begin(), found.end());
  std::vector<int64_t> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

// A podman container given /dev/infiniband and started without forkguard: the watcher on the
// node judges its fork as the shim judges the same program outside. The shim route of
// docs/launchers.md ("Containers": the library bind-mounted in, LD_PRELOAD and FORKGUARD_LOG
// given to the container) gives the same verdict in the same container, and one report over
// the shim's log and the watcher's keeps the shim's record of the process both logged.
TEST(WatchContainerRdma, JudgesAPodmanContainerAsTheShimInsideIt) {
  auto dev = test_support::RequireRdmaDevice();
  ASSERT_EQ(geteuid(), 0u) << "the watcher loads BPF programs: the guest runs tests as root";
  ASSERT_EQ(access(kPodman, X_OK), 0) << kPodman << " missing: scripts/setup installs podman";
  std::string rootfs = ContainerRootfs();
  ASSERT_FALSE(rootfs.empty()) << kNoRootfs;
  std::vector<std::string> shim = ShimReasons(dev.name, "1");
  ASSERT_EQ(shim, std::vector<std::string>{"proceeded:child-segv,inherited-rdma"});
  std::string state = test_support::MakeTempDir("podman");
  std::string shim_logs = test_support::MakeTempDir("containerlogs");

  Watcher w;
  ASSERT_TRUE(w.ready()) << w.startup_error();
  // podman's own pid and UTS namespaces: the program is pid 1 in the container.
  ProgramResult plain = PodmanRun(state, rootfs, dev.name, "1", {});
  EXPECT_EQ(plain.status, 0) << plain.Describe();
  EXPECT_NE(plain.out.find("child: exit 0"), std::string::npos) << plain.Describe();
  // The shim route, in podman's own pid and UTS namespaces too: the shim logs pid 1 and the
  // container's host name, the watcher the node's with the container's beside them.
  std::string lib = std::filesystem::canonical(Runfile("shim/libforkguard.so")).string();
  ProgramResult shimmed = PodmanRun(
      state, rootfs, dev.name, "1",
      {"-v", lib + ":/opt/forkguard/lib/libforkguard.so:ro", "-v", shim_logs + ":/shared/fg/JOB",
       "-e", "LD_PRELOAD=/opt/forkguard/lib/libforkguard.so", "-e",
       "FORKGUARD_LOG=/shared/fg/JOB"});
  EXPECT_EQ(shimmed.status, 0) << shimmed.Describe();
  EXPECT_NE(shimmed.err.find("forkguard: fork after RDMA init"), std::string::npos)
      << shimmed.Describe();
  ProgramResult stop = w.Stop();
  EXPECT_EQ(stop.status, 0) << stop.Describe();
  EXPECT_NE(stop.err.find("0 records lost"), std::string::npos) << stop.err;

  std::vector<Json> watched = Events(w.dir(), "forkguard-watch.");
  std::vector<Json> inside = Events(shim_logs, "forkguard.");
  std::vector<std::string> watcher_verdicts = ForkReasons(watched, "hazard_prog");
  std::vector<std::string> shim_verdicts = ForkReasons(inside, "hazard_prog");
  ASSERT_EQ(watcher_verdicts, (std::vector<std::string>{shim[0], shim[0]})) << stop.err;
  ASSERT_EQ(shim_verdicts, shim);
  // The shim walked its stacks in the container (with the tree's libunwind, which it dlopens).
  size_t frames = 0;
  for (const Json& e : inside) {
    const Json* f = GetString(e, "event") == "stack" ? FindMember(e, "frames") : nullptr;
    if (f != nullptr && f->is_array()) frames += f->size();
  }
  EXPECT_GT(frames, 0u) << "no stack in the shim's log: is libunwind8 in the root filesystem?";
  // The watcher names the node's pids, and beside them the container's (ns_pid, ns_host):
  // those the shim in the second container logged.
  std::vector<int64_t> watched_pids = Pids(watched, "hazard_prog");
  std::vector<int64_t> shim_pids = Pids(inside, "hazard_prog");
  ASSERT_EQ(watched_pids.size(), 2u);
  ASSERT_EQ(shim_pids.size(), 1u);
  EXPECT_NE(watched_pids[0], 1);
  EXPECT_NE(watched_pids[1], 1);
  EXPECT_EQ(shim_pids[0], 1);
  std::string shim_host;
  for (const Json& e : inside)
    if (GetString(e, "event") == "header") shim_host = GetString(e, "host");
  // The second container's process as the watcher saw it: pid 1 there, and the host name it
  // saw (ns_host: its UTS namespace's, read while it runs; the node's when it shares that).
  // The first container's process may have exited before the watcher read its first record
  // (a zombie has no namespaces to read): only its pid is asserted.
  int seen = 0;
  for (const Json& e : watched) {
    if (GetString(e, "event") != "header" || GetString(e, "prog") != "hazard_prog") continue;
    ++seen;
    EXPECT_EQ(GetInt(e, "ns_pid", -1), 1);
    if (GetInt(e, "_pid", -1) != watched_pids[1]) continue;
    std::string ns_host = GetString(e, "ns_host");
    EXPECT_EQ(ns_host.empty() ? GetString(e, "host") : ns_host, shim_host);
  }
  EXPECT_EQ(seen, 2);
  printf("container without forkguard: watcher %s (pid %lld)\n", watcher_verdicts[0].c_str(),
         static_cast<long long>(watched_pids[0]));
  printf(
      "container with the shim: shim %s, watcher %s (pid %lld in the container, %lld on the "
      "node)\n",
      shim_verdicts[0].c_str(), watcher_verdicts[1].c_str(), static_cast<long long>(shim_pids[0]),
      static_cast<long long>(watched_pids[1]));

  // One report over both: three records, two processes (the shim's record kept, paired by
  // the container's pid and host name).
  ProgramResult report = RunProgram({Forkguard(), "report", "--format", "json", shim_logs, w.dir()},
                                    test_support::RunOptions{});
  EXPECT_EQ(report.status, 0) << report.Describe();
  EXPECT_NE(report.out.find("1 process logged by both the shim and forkguard watch"),
            std::string::npos)
      << report.out;
}

// --enforce memory: the fork in a container over MADV_DONTFORK memory is refused, fork()
// returns -1 with EPERM inside it.
TEST(WatchContainerRdma, EnforceMemoryRefusesTheForkInAPodmanContainer) {
  auto dev = test_support::RequireRdmaDevice();
  ASSERT_EQ(access(kPodman, X_OK), 0) << kPodman << " missing: scripts/setup installs podman";
  std::string rootfs = ContainerRootfs();
  ASSERT_FALSE(rootfs.empty()) << kNoRootfs;
  std::string state = test_support::MakeTempDir("podman");
  Watcher w("memory");
  ASSERT_TRUE(w.ready()) << w.startup_error();
  ProgramResult refused = PodmanRun(state, rootfs, dev.name, "1", {});
  EXPECT_EQ(refused.status, 0) << refused.Describe();
  EXPECT_NE(refused.out.find("fork failed: Operation not permitted"), std::string::npos)
      << refused.Describe();
  ProgramResult stop = w.Stop();
  EXPECT_EQ(stop.status, 0) << stop.Describe();
  EXPECT_EQ(ForkReasons(Events(w.dir(), "forkguard-watch."), "hazard_prog"),
            std::vector<std::string>{"refused:child-segv,inherited-rdma"})
      << stop.err;
}

}  // namespace
}  // namespace forkguard::cli
