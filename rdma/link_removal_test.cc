// Real-device test (tag "rdma"): the receiver's RDMA link is removed
// (`rdma link delete rxeb`) in the middle of a stream over the rxea <-> rxeb
// pair. Both ends must fail with a clear error instead of hanging, and the
// receiver must name its last complete batch. The link is re-added afterwards
// so later tests in the same guest still have it. Its own binary: deleting a
// device must not affect other tests' processes.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rdma/transport.h"
#include "tests/support/rdma_device.h"
#include "tests/support/runfiles.h"

extern char** environ;

namespace forkguard::rdma {
namespace {

pid_t Spawn(std::vector<std::string> args, const std::string& out) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (!out.empty()) {
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  }
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0) << "posix_spawn " << args[0];
  return pid;
}

int RunCommand(std::vector<std::string> args) {
  pid_t pid = Spawn(std::move(args), "");
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(LinkRemoval, ReceiverLinkDeletedMidStreamBothEndsFail) {
  forkguard::test_support::RequireRdmaDevice();
  forkguard::test_support::RdmaDevice a, b;
  ASSERT_TRUE(forkguard::test_support::RdmaPair(&a, &b))
      << "the rxea <-> rxeb pair is not set up: run through scripts/lanes/rdma-lane";
  std::string netdev;
  std::getline(std::ifstream("/sys/class/infiniband/" + b.name + "/ports/1/gid_attrs/ndevs/0"),
               netdev);
  ASSERT_FALSE(netdev.empty()) << "no netdev behind " << b.name;

  std::string addr = a.ip + ":7701";
  TransportOptions o;
  o.idle_timeout_ms = 30000;
  Sender s(addr, o);
  PageBuffer buf(256 << 10);
  s.RegisterMemory(buf.data(), buf.size());
  std::string out = forkguard::test_support::MakeTempDir("link") + "/recv.txt";
  pid_t receiver = Spawn({forkguard::test_support::Runfile("rdma/transport_tool"), "recv",
                          "--connect", addr, "--bind", b.ip},
                         out);
  s.Accept();
  std::string error;
  int delete_rc = -1;
  try {
    for (uint64_t i = 0; i < 100000; ++i) {
      s.Send(buf.data(), buf.size(), i);
      if (i == 50) delete_rc = RunCommand({"rdma", "link", "delete", b.name});
    }
    s.Finish();
  } catch (const TransportError& e) {
    error = e.what();
  }
  int st = 0;
  waitpid(receiver, &st, 0);
  std::string recv_out = Read(out);
  // Put the link back for whatever runs next in this guest.
  int add_rc = RunCommand({"rdma", "link", "add", b.name, "type", "rxe", "netdev", netdev});

  EXPECT_EQ(delete_rc, 0);
  ASSERT_FALSE(error.empty()) << "the sender never noticed the receiver's link went away";
  EXPECT_EQ(error.find("no progress"), std::string::npos) << error;
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << recv_out;
  EXPECT_NE(recv_out.find("RDMA_CM_EVENT_DEVICE_REMOVAL"), std::string::npos) << recv_out;
  EXPECT_NE(recv_out.find("the last complete batch is "), std::string::npos) << recv_out;
  EXPECT_EQ(add_rc, 0) << "could not re-add " << b.name;
  printf("sender: %s\nreceiver: %s", error.c_str(), recv_out.c_str());
}

}  // namespace
}  // namespace forkguard::rdma
