// transport_tool: one end of an RDMA batch stream, for the real-device tests
// (which run the other end in-process) and for bench/transport.sh. The command line
// (the option rows and --help) is in transport_tool.h.
//
// `send` streams batches whose bytes are FillPattern(seed, seq) and sizes
// `--size` or MixedBatchSize(); `recv --verify` checks every byte. `send --count 0`
// streams until killed.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "flags/flags.h"
#include "rdma/batch_pattern.h"
#include "rdma/transport.h"
#include "rdma/transport_tool.h"

namespace {

using forkguard::rdma::MixedBatchSize;
using forkguard::rdma::PageBuffer;
using forkguard::rdma::TransportOptions;

struct Args {
  std::string role, listen, connect, bind;
  uint64_t count = 0;
  size_t size = 0;  // 0 = mixed
  uint64_t seed = 0;
  bool verify = false;
  bool help = false;
  int ready_fd = -1;
  TransportOptions opt;
};

// Parses argv[1] (the role) and its options; throws flags::UsageError.
Args Parse(int argc, char** argv) {
  namespace tt = forkguard::rdma::transport_tool;
  using forkguard::flags::UsageError;
  Args a;
  if (argc < 2) throw UsageError("send or recv?");
  a.role = argv[1];
  if (a.role != "send" && a.role != "recv") throw UsageError("unknown role '" + a.role + "'");
  bool send = a.role == "send";
  auto o = forkguard::flags::Options::Parse(argc - 1, argv + 1,
                                            send ? tt::SendFlags() : tt::RecvFlags());
  a.help = o.Has("help");
  a.listen = send ? o.Str("listen") : "";
  a.connect = send ? "" : o.Str("connect");
  a.size = o.Str("size") == "mixed" ? 0 : o.Size("size");
  a.seed = o.Size("seed");
  a.opt.idle_timeout_ms = static_cast<int>(o.Int("idle-timeout-ms"));
  a.opt.heartbeat_ms = static_cast<int>(o.Int("heartbeat-ms"));
  if (send) {
    a.count = o.Size("count");
    a.opt.checksum = !o.Has("no-checksum");
    a.ready_fd = static_cast<int>(o.Int("ready-fd"));
  } else {
    a.opt.bind_ip = o.Str("bind");
    a.verify = o.Has("verify");
    a.opt.slots = static_cast<uint32_t>(o.Size("slots"));
    a.opt.slot_bytes = o.Size("slot-bytes");
  }
  if (!a.help && a.role == "send" && a.listen.empty()) throw UsageError("send needs --listen");
  if (!a.help && a.role == "recv" && a.connect.empty()) throw UsageError("recv needs --connect");
  return a;
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int RunSend(const Args& a) {
  forkguard::rdma::Sender s(a.listen, a.opt);
  // A pool of page-aligned buffers, registered once; a buffer is refilled only
  // after the batch it held was acknowledged.
  size_t max_bytes = a.size ? a.size : (4u << 20);
  const int kPool = 4;  // mixed sizes: up to 4 batches in flight while the next is filled
  std::vector<std::unique_ptr<PageBuffer>> pool;
  std::vector<int> free_list;
  for (int i = 0; i < kPool; ++i) {
    pool.push_back(std::make_unique<PageBuffer>(max_bytes));
    s.RegisterMemory(pool.back()->data(), pool.back()->size());
    if (a.size) forkguard::rdma::FillPattern(pool.back()->data(), a.size, a.seed, 0);
    free_list.push_back(i);
  }
  if (a.ready_fd >= 0) {
    (void)!write(a.ready_fd, "L", 1);
    close(a.ready_fd);
  }
  printf("send: listening on %s (%s)\n", a.listen.c_str(), s.device_name().c_str());
  fflush(stdout);
  s.Accept();
  auto t0 = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  for (uint64_t seq = 0; a.count == 0 || seq < a.count; ++seq) {
    if (a.size) {
      // Fixed size (benchmark): the buffers never change, so they are sent
      // again while earlier sends of them are in flight, like ib_write_bw;
      // only credits limit the pipeline.
      s.Send(pool[seq % kPool]->data(), a.size, seq);
      bytes += a.size;
      continue;
    }
    // Mixed: per-seq contents; a buffer is refilled only once acknowledged.
    if (free_list.empty()) s.Flush();
    int b = free_list.back();
    free_list.pop_back();
    size_t n = MixedBatchSize(a.seed, seq);
    forkguard::rdma::FillPattern(pool[b]->data(), n, a.seed, seq);
    s.Send(pool[b]->data(), n, seq, [&free_list, b] { free_list.push_back(b); });
    bytes += n;
  }
  s.Finish();
  double t = Seconds(t0);
  printf("send: %llu batches, %llu bytes, %.3f s, %.2f MB/s\n",
         static_cast<unsigned long long>(s.batches_sent() - 1),
         static_cast<unsigned long long>(bytes), t, bytes / t / 1e6);
  return 0;
}

int RunRecv(const Args& a) {
  forkguard::rdma::Receiver r(a.connect, a.opt);
  printf("recv: connected to %s (%s)\n", a.connect.c_str(), r.device_name().c_str());
  fflush(stdout);
  std::chrono::steady_clock::time_point t0;
  uint64_t n = 0;
  while (auto b = r.Next()) {
    if (n == 0) t0 = std::chrono::steady_clock::now();
    if (a.verify) {
      size_t want = a.size ? a.size : MixedBatchSize(a.seed, b->seq);
      if (b->bytes != want) {
        fprintf(stderr, "recv: batch %llu has %zu bytes, expected %zu\n",
                static_cast<unsigned long long>(b->seq), b->bytes, want);
        return 1;
      }
      size_t bad = forkguard::rdma::CheckPattern(b->data, b->bytes, a.seed, a.size ? 0 : b->seq);
      if (bad != b->bytes) {
        fprintf(stderr, "recv: batch %llu differs at byte %zu\n",
                static_cast<unsigned long long>(b->seq), bad);
        return 1;
      }
    }
    ++n;
  }
  double t = Seconds(t0);
  r.Close();
  printf("recv: %llu batches, %llu bytes, %.3f s, %.2f MB/s\n", static_cast<unsigned long long>(n),
         static_cast<unsigned long long>(r.bytes_received()), t, r.bytes_received() / t / 1e6);
  return 0;
}

}  // namespace

void PrintHelp() { fputs(forkguard::rdma::transport_tool::Help().c_str(), stdout); }

int main(int argc, char** argv) {
  if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    PrintHelp();
    return 0;
  }
  Args a;
  try {
    a = Parse(argc, argv);
  } catch (const forkguard::flags::UsageError& e) {
    return forkguard::flags::ReportUsageError("transport_tool", e);
  }
  if (a.help) {
    PrintHelp();
    return 0;
  }
  try {
    return a.role == "send" ? RunSend(a) : RunRecv(a);
  } catch (const std::exception& e) {
    fprintf(stderr, "transport_tool %s: %s\n", a.role.c_str(), e.what());
    return 1;
  }
}
