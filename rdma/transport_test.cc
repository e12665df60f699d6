// Real-device tests of the RDMA transport (tag "rdma": scripts/lanes/rdma-lane runs
// them in the Soft-RoCE guest). Every test runs on two topologies: both ends on
// rxe0 (loopback through one device) and rxea <-> rxeb, two devices whose
// traffic crosses a veth link. One end runs in this process, the other is
// //rdma:transport_tool started with posix_spawn (a fresh exec'd process).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rdma/batch_pattern.h"
#include "rdma/transport.h"
#include "tests/support/forked_child.h"
#include "tests/support/rdma_device.h"
#include "tests/support/runfiles.h"

extern char** environ;

namespace forkguard::rdma {
namespace {

struct Topology {
  std::string name;
  std::string sender_ip;    // where the sender listens
  std::string receiver_ip;  // where the receiver connects from ("" = any)
};

Topology GetTopology(const std::string& which) {
  auto dev = forkguard::test_support::RequireRdmaDevice();
  if (which == "rxe0") return {which, dev.ip, ""};
  forkguard::test_support::RdmaDevice a, b;
  if (!forkguard::test_support::RdmaPair(&a, &b)) {
    ADD_FAILURE() << "the two-device pair (rxea <-> rxeb) is not set up: run through "
                     "scripts/lanes/rdma-lane (RXE_VM_PAIR=1)";
    throw std::runtime_error("no rxea/rxeb pair");
  }
  return {which, a.ip, b.ip};
}

int NextPort() {
  static int port = 7600;
  return port++;
}

// transport_tool in its own process; output in a file.
class Tool {
 public:
  explicit Tool(std::vector<std::string> args, bool wait_listening = false) {
    out_ = forkguard::test_support::MakeTempDir("tool") + "/out.txt";
    int ready[2];
    if (wait_listening) {
      EXPECT_EQ(0, pipe(ready));
      args.push_back("--ready-fd");
      args.push_back(std::to_string(ready[1]));
    }
    std::vector<std::string> full = {forkguard::test_support::Runfile("rdma/transport_tool")};
    full.insert(full.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (wait_listening) posix_spawn_file_actions_addclose(&fa, ready[0]);
    int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(0, rc) << "posix_spawn " << argv[0];
    if (wait_listening) {
      close(ready[1]);
      char c;
      // EOF (0) means it died before listening: its output says why.
      EXPECT_EQ(1, read(ready[0], &c, 1)) << "transport_tool did not start listening:\n"
                                          << Output();
      close(ready[0]);
    }
  }
  ~Tool() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
  }
  int Wait() {
    int st = 0;
    if (pid_ > 0 && waitpid(pid_, &st, 0) == pid_) pid_ = -1;
    status_ = st;
    return st;
  }
  void Kill() { kill(pid_, SIGKILL); }
  void Stop() { kill(pid_, SIGSTOP); }
  std::string Output() const {
    std::ifstream f(out_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  std::string out_;
};

TransportOptions Options(const Topology& t) {
  TransportOptions o;
  o.bind_ip = t.receiver_ip;
  o.idle_timeout_ms = 30000;  // the failures below must be caught well before this
  return o;
}

class TransportTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TransportTest, ThousandMixedBatchesArriveInOrderAndIntact) {
  Topology t = GetTopology(GetParam());
  std::string addr = t.sender_ip + ":" + std::to_string(NextPort());
  Tool sender({"send", "--listen", addr, "--count", "1000", "--size", "mixed", "--seed", "7"},
              true);
  Receiver r(addr, Options(t));
  uint64_t n = 0, bytes = 0, max_bytes = 0, min_bytes = ~0ull;
  while (auto b = r.Next()) {
    ASSERT_EQ(b->seq, n) << "out of order";
    ASSERT_EQ(b->tag, n);
    ASSERT_TRUE(b->checksum_verified) << "batch " << n << " arrived without a CRC32C";
    ASSERT_EQ(b->bytes, MixedBatchSize(7, n)) << "batch " << n;
    ASSERT_EQ(CheckPattern(b->data, b->bytes, 7, n), b->bytes) << "batch " << n << " corrupted";
    bytes += b->bytes;
    max_bytes = std::max<uint64_t>(max_bytes, b->bytes);
    min_bytes = std::min<uint64_t>(min_bytes, b->bytes);
    ++n;
  }
  r.Close();
  EXPECT_EQ(n, 1000u);
  EXPECT_EQ(r.batches_complete(), 1000u);
  EXPECT_EQ(min_bytes, 1024u);
  EXPECT_EQ(max_bytes, 4u << 20);
  int st = sender.Wait();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << sender.Output();
  EXPECT_NE(sender.Output().find("send: 1000 batches"), std::string::npos) << sender.Output();
  printf("[%s] %llu batches, %.1f MB, mixed 1 KiB..4 MiB\n", t.name.c_str(),
         static_cast<unsigned long long>(n), bytes / 1e6);
}

TEST_P(TransportTest, ReceiverKilledMidStreamSenderErrors) {
  Topology t = GetTopology(GetParam());
  std::string addr = t.sender_ip + ":" + std::to_string(NextPort());
  TransportOptions o = Options(t);
  Sender s(addr, o);
  PageBuffer buf(256 << 10);
  s.RegisterMemory(buf.data(), buf.size());
  std::vector<std::string> args = {"recv", "--connect", addr};
  if (!t.receiver_ip.empty()) args.insert(args.end(), {"--bind", t.receiver_ip});
  Tool receiver(args);
  s.Accept();
  std::string error;
  auto t0 = std::chrono::steady_clock::now();
  double killed_at = -1;
  uint64_t acked_at_kill = 0;
  try {
    for (uint64_t i = 0; i < 100000; ++i) {
      s.Send(buf.data(), buf.size(), i);
      if (i == 50) {
        acked_at_kill = s.batches_acknowledged();
        receiver.Kill();
        killed_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    }
    s.Finish();
  } catch (const TransportError& e) {
    error = e.what();
  }
  double failed_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(error.empty()) << "the sender never noticed that the receiver died";
  EXPECT_GE(killed_at, 0);
  // Detected by the connection event or by retry exhaustion -- not by the
  // idle-timeout backstop.
  EXPECT_EQ(error.find("no progress"), std::string::npos) << error;
  EXPECT_NE(error.find("RDMA sender"), std::string::npos) << error;
  // Acknowledged batches are never "un-acknowledged"; more may have been
  // sent after the kill, but not all of them can have been acknowledged.
  EXPECT_GE(s.batches_acknowledged(), acked_at_kill) << error;
  printf("[%s] sender error %.2f s after the kill: %s\n", t.name.c_str(), failed_at - killed_at,
         error.c_str());
}

TEST_P(TransportTest, SenderKilledReceiverNamesLastCompleteBatch) {
  Topology t = GetTopology(GetParam());
  std::string addr = t.sender_ip + ":" + std::to_string(NextPort());
  Tool sender({"send", "--listen", addr, "--count", "0", "--size", "64K", "--seed", "3"}, true);
  Receiver r(addr, Options(t));
  uint64_t n = 0;
  std::string error;
  try {
    while (auto b = r.Next()) {
      ASSERT_EQ(b->seq, n);
      ASSERT_EQ(CheckPattern(b->data, b->bytes, 3, 0), b->bytes) << "batch " << n;
      ++n;
      if (n == 100) sender.Kill();
    }
  } catch (const TransportError& e) {
    error = e.what();
  }
  ASSERT_FALSE(error.empty()) << "stream ended normally although the sender was killed";
  ASSERT_GE(n, 100u);
  // Every batch that arrived completely was handed out before the error, and
  // the error names the last of them.
  EXPECT_EQ(r.batches_complete(), n);
  EXPECT_NE(error.find("the last complete batch is " + std::to_string(n - 1)), std::string::npos)
      << error << " (received " << n << ")";
  printf("[%s] receiver error after %llu batches: %s\n", t.name.c_str(),
         static_cast<unsigned long long>(n), error.c_str());
}

TEST_P(TransportTest, StalledSenderIsAnIdleTimeoutNotAHang) {
  Topology t = GetTopology(GetParam());
  std::string addr = t.sender_ip + ":" + std::to_string(NextPort());
  Tool sender({"send", "--listen", addr, "--count", "0", "--size", "16K", "--seed", "9"}, true);
  TransportOptions o = Options(t);
  o.idle_timeout_ms = 3000;  // the stalled peer's HCA still ACKs heartbeats: only this catches it
  Receiver r(addr, o);
  uint64_t n = 0;
  std::string error;
  try {
    while (auto b = r.Next()) {
      if (++n == 20) sender.Stop();
    }
  } catch (const TransportError& e) {
    error = e.what();
  }
  ASSERT_FALSE(error.empty());
  EXPECT_NE(error.find("no progress for 3000 ms while waiting for the next batch"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("the last complete batch is " + std::to_string(n - 1)), std::string::npos)
      << error << " (received " << n << ")";
}

TEST_P(TransportTest, ForkedChildCannotUseTransport) {
  Topology t = GetTopology(GetParam());
  std::string addr = t.sender_ip + ":" + std::to_string(NextPort());
  Tool sender({"send", "--listen", addr, "--count", "20", "--size", "4K", "--seed", "5"}, true);
  Receiver r(addr, Options(t));
  auto first = r.Next();
  ASSERT_TRUE(first.has_value());
  pid_t parent = getpid();
  test_support::ForkedChild child = test_support::RunInForkedChild([&] {
    std::string msg = "no error";
    try {
      r.Next();
    } catch (const ForkedChildError& e) {
      msg = std::string("ForkedChildError: ") + e.what();
    } catch (const std::exception& e) {
      msg = std::string("other error: ") + e.what();
    }
    return msg;
  });
  ASSERT_GT(child.pid, 0);
  const std::string& msg = child.text;
  EXPECT_TRUE(WIFEXITED(child.wait_status) && WEXITSTATUS(child.wait_status) == 0);
  EXPECT_EQ(msg.rfind("ForkedChildError: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("created by pid " + std::to_string(parent) + ", used from pid " +
                     std::to_string(child.pid)),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("a forked child cannot use its parent's RDMA resources"), std::string::npos)
      << msg;
  // The parent's stream is unaffected.
  uint64_t n = 1;
  while (auto b = r.Next()) {
    EXPECT_EQ(b->seq, n);
    ++n;
  }
  r.Close();
  EXPECT_EQ(n, 20u);
}

TEST_P(TransportTest, ConnectionRefusedIsAClearError) {
  Topology t = GetTopology(GetParam());
  std::string addr = t.sender_ip + ":" + std::to_string(NextPort());
  try {
    Receiver r(addr, Options(t));
    FAIL() << "connected to " << addr << " where nobody listens";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("connection refused"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Topologies, TransportTest, ::testing::Values("rxe0", "pair"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace forkguard::rdma
