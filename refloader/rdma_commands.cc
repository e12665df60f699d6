// refloader serve / consume / demo: the loader -> RDMA -> consumer pipeline.
//
// serve (right order): Loader::Start() forks the workers FIRST; only then is
// RDMA opened (rdma_listen, PD) and the loader's shared-memory slot region
// registered; each delivered batch is sent straight from its slot and released
// back to the loader when the receiver's HCA acknowledged it.
// serve --init-rdma-first (wrong order, on purpose): fork support on
// (ibv_fork_init()), device opened and the slot region registered, THEN the
// workers are forked: the region is MADV_DONTFORK, so it is missing in the
// workers and they die of SIGSEGV when they build their first batch.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "flags/flags.h"
#include "loader/loader.h"
#include "loader/tfrecord.h"
#include "rdma/transport.h"
#include "refloader/commands.h"

extern char** environ;

namespace forkguard::refloader {
namespace {

namespace fl = forkguard::loader;
using flags::Options;
using flags::UsageError;
using rdma::Receiver;
using rdma::Sender;
using rdma::TransportError;
using rdma::TransportOptions;

flags::FlagTable ServeFlags() {
  const LoaderFlags& l = TheLoaderFlags();
  return {
      {"listen", "IP:PORT", "", "the address to listen on (required)"},
      {"data", "PATH", "",
       "TFRecord file or directory (default: generate --records\n"
       "records of --record-size in a temp dir)"},
      {"records", "N", "2048", "records to generate without --data"},
      {"record-size", "N", "4K", "bytes per generated record"},
      {"epochs", "N", "2", "epochs to stream"},
      l.workers,
      l.batch_size,
      l.sample_bytes,
      l.timeout_ms,
      {"no-checksum", "", "", "do not CRC32C the batches"},
      {"init-rdma-first", "", "",
       "WRONG ORDER on purpose: ibv_fork_init(), open the device and\n"
       "register the slot region, THEN fork the workers (they lose the\n"
       "region and die of SIGSEGV; forkguard reports the hazard)"},
      l.fork_check,
      {"ready-fd", "FD", "-1", "write one byte to FD once listening (used by demo), -1: none"},
      flags::HelpFlag(),
  };
}

// demo's table is serve's, but its address and ready fd (demo sets those), plus --ip, --port:
// whatever serve takes, demo takes and passes on.
const flags::FlagTable& DemoFlags() {
  static const flags::FlagTable kFlags = [] {
    flags::FlagTable t;
    for (const flags::Flag& f : ServeFlags())
      if (f.name != "listen" && f.name != "ready-fd") t.push_back(f);
    t.push_back({"ip", "IP", "",
                 "the RDMA device's address (default $RXE_IP, else the first\n"
                 "RDMA-capable address)"});
    t.push_back({"port", "P", "7471", "the port serve listens on"});
    return t;
  }();
  return kFlags;
}

flags::FlagTable ConsumeFlags() {
  const LoaderFlags& l = TheLoaderFlags();
  return {
      {"connect", "IP:PORT", "", "serve's address (required)"},
      {"bind", "IP", "", "source address (the device to use)"},
      {"check-sequential", "", "",
       "check that sample k of batch b holds record b*batch+k, as\nmake-dataset writes it"},
      l.batch_size,
      l.sample_bytes,
      {"timeout-ms", "N", std::to_string(TransportOptions().idle_timeout_ms),
       "give up after this long without a batch"},
      flags::HelpFlag(),
  };
}

constexpr uint64_t TagOf(uint64_t epoch, uint64_t index) { return epoch << 40 | index; }

const char kWrongOrderExplanation[] =
    "refloader serve: --init-rdma-first broke the rule on purpose: RDMA was initialized with "
    "fork support on (ibv_fork_init) and the loader's batch slots were registered BEFORE the "
    "workers were forked. Registered memory is MADV_DONTFORK, so the workers do not have it "
    "and die of SIGSEGV when they touch it (or, with forkguard in error mode, the fork itself "
    "is refused). Fix: Loader::Start() (fork the workers) before opening the RDMA device.\n";

// A temp dir with a generated dataset, removed on destruction.
struct GeneratedData {
  std::string dir;
  ~GeneratedData() {
    if (!dir.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  }
};

// The data serve reads: --data, or (when not given) a dataset of --records fixed-size records
// made in a temporary directory that `generated` removes at the end.
std::string ServeData(const Options& a, GeneratedData* generated) {
  std::string data = a.Str("data");
  if (!data.empty()) return data;
  const char* tmp = getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/refloader-serve.XXXXXX";
  if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp: " + std::string(strerror(errno)));
  generated->dir = data = templ;
  fl::DatasetSpec spec;
  spec.dir = data;
  spec.records = a.Size("records");
  spec.size_dist = "fixed:" + a.Str("record-size");
  fl::MakeDataset(spec);
  return data;
}

// What serve streamed so far, for its last line (or its error).
struct Streamed {
  uint64_t batches = 0;
  uint64_t bytes = 0;
  uint64_t epochs = 0;
  double start = 0;  // when the consumer had connected (Now())
};

// Streams `epochs` epochs of the loader's batches to the consumer that connects to `sender`,
// each slot released when the consumer has verified its batch (never every slot in flight).
// `done` counts as it goes: a loader or transport error leaves what was sent.
void StreamEpochs(fl::Loader* loader, Sender* sender, const TransportOptions& to, uint64_t epochs,
                  Streamed* done) {
  sender->Accept(30000);
  printf("serve: consumer connected; streaming %llu epoch(s) of %llu batches\n",
         static_cast<unsigned long long>(epochs),
         static_cast<unsigned long long>(loader->batches_per_epoch()));
  fflush(stdout);
  done->start = Now();
  uint64_t in_flight = 0;
  while (done->epochs < epochs) {
    if (in_flight >= to.slots) sender->Flush();  // never hold every loader slot
    fl::LoaderItem item = loader->Next();
    if (item.kind == fl::LoaderItem::kEpochEnd) {
      ++done->epochs;
      continue;
    }
    fl::Batch b = item.batch;
    ++in_flight;
    sender->Send(b.data, b.bytes, TagOf(b.epoch, b.index), [loader, &in_flight, b] {
      loader->Release(b);
      --in_flight;
    });
    ++done->batches;
    done->bytes += b.bytes;
  }
  sender->Finish();
}

int Serve(const Options& a) {
  std::string listen = a.Str("listen");
  if (listen.empty()) throw UsageError("serve needs --listen IP:PORT");
  bool wrong_order = a.Has("init-rdma-first");
  int ready_fd = static_cast<int>(a.Int("ready-fd"));

  GeneratedData generated;
  fl::LoaderOptions lo;
  lo.files = fl::ListShards(ServeData(a, &generated));
  ApplyLoaderFlags(a, &lo);
  TransportOptions to;
  to.checksum = !a.Has("no-checksum");
  // Slots: what the workers prefetch, plus what the transport holds in flight.
  lo.num_slots = std::max(1u, lo.num_workers) * lo.prefetch_per_worker + to.slots + 2;
  uint64_t epochs = a.Size("epochs");

  fl::Loader loader(lo);  // indexes the data, creates the slot region; forks nothing
  const fl::SlotRegion& region = loader.slot_region();
  std::unique_ptr<Sender> sender;
  auto open_rdma = [&] {
    sender = std::make_unique<Sender>(listen, to);
    sender->RegisterMemory(region.base, region.size);
    printf(
        "serve: RDMA up on %s, listening on %s; registered the loader's %u batch slots "
        "(%.1f MiB shared memory)\n",
        sender->device_name().c_str(), listen.c_str(), region.num_slots,
        static_cast<double>(region.size) / (1 << 20));
  };
  if (wrong_order) {
    int rc = ibv_fork_init();
    printf(
        "serve: --init-rdma-first: ibv_fork_init() = %d; opening RDMA BEFORE forking the "
        "loader's workers (wrong order, on purpose)\n",
        rc);
    open_rdma();
  }
  try {
    loader.Start();
  } catch (const std::exception& e) {
    fprintf(stderr, "serve: starting the loader's workers failed: %s\n", e.what());
    if (wrong_order) fputs(kWrongOrderExplanation, stderr);
    return 1;
  }
  {
    std::string pids;
    for (pid_t p : loader.worker_pids()) pids += " " + std::to_string(p);
    printf("serve: loader started: %u worker(s) forked (pids%s)%s\n", lo.num_workers, pids.c_str(),
           wrong_order ? " AFTER RDMA init" : " before any RDMA init");
  }
  if (!wrong_order) open_rdma();
  fflush(stdout);
  if (ready_fd >= 0) {
    (void)!write(ready_fd, "L", 1);
    close(ready_fd);
  }

  Streamed done;
  try {
    StreamEpochs(&loader, sender.get(), to, epochs, &done);
  } catch (const fl::LoaderError& e) {
    fprintf(stderr, "serve: loader failed after %llu batches: %s\n",
            static_cast<unsigned long long>(done.batches), e.what());
    if (wrong_order) fputs(kWrongOrderExplanation, stderr);
    return 1;
  } catch (const TransportError& e) {
    fprintf(stderr, "serve: %s\n", e.what());
    return 1;
  }
  double t = Now() - done.start;
  printf(
      "serve: sent %llu batches (%llu epochs), %.1f MB in %.2f s = %.1f MB/s over %s; every "
      "batch released by the consumer after verification\n",
      static_cast<unsigned long long>(done.batches), static_cast<unsigned long long>(done.epochs),
      static_cast<double>(done.bytes) / 1e6, t, static_cast<double>(done.bytes) / 1e6 / t,
      sender->device_name().c_str());
  return 0;
}

int Consume(const Options& a) {
  const LoaderFlags& l = TheLoaderFlags();
  std::string connect = a.Str("connect");
  if (connect.empty()) throw UsageError("consume needs --connect IP:PORT");
  TransportOptions to;
  to.bind_ip = a.Str("bind");
  to.idle_timeout_ms = static_cast<int>(a.Int("timeout-ms"));
  bool check = a.Has("check-sequential");
  uint64_t batch_size = a.Size(l.batch_size.name), sample_bytes = a.Size(l.sample_bytes.name);

  std::unique_ptr<Receiver> r;
  try {
    r = std::make_unique<Receiver>(connect, to);
  } catch (const TransportError& e) {
    fprintf(stderr, "consume: %s\n", e.what());
    return 1;
  }
  printf("consume: connected to %s over %s\n", connect.c_str(), r->device_name().c_str());
  fflush(stdout);
  uint64_t batches = 0, verified = 0, samples_checked = 0, epoch = 0, index = 0, epochs = 0;
  double t0 = Now();
  try {
    while (auto b = r->Next()) {
      uint64_t e = b->tag >> 40, i = b->tag & ((1ull << 40) - 1);
      if (e != epoch) {  // in order: the next epoch starts at batch 0
        if (e != epoch + 1 || i != 0)
          throw TransportError("batch " + std::to_string(b->seq) + " is epoch " +
                               std::to_string(e) + " batch " + std::to_string(i) +
                               ", expected epoch " + std::to_string(epoch) + " batch " +
                               std::to_string(index) + " or the next epoch");
        epoch = e;
        index = 0;
        ++epochs;
      }
      if (i != index)
        throw TransportError("epoch " + std::to_string(e) + ": got batch " + std::to_string(i) +
                             ", expected " + std::to_string(index));
      ++index;
      if (b->checksum_verified) ++verified;
      if (check) {
        if (b->bytes % sample_bytes)
          throw TransportError("batch " + std::to_string(b->seq) + " is not whole samples");
        for (uint64_t k = 0; k < b->bytes / sample_bytes; ++k) {
          uint64_t want = i * batch_size + k, got;
          memcpy(&got, b->data + k * sample_bytes, 8);
          if (got != want)
            throw TransportError("epoch " + std::to_string(e) + " batch " + std::to_string(i) +
                                 " sample " + std::to_string(k) + " holds record " +
                                 std::to_string(got) + ", expected " + std::to_string(want));
          ++samples_checked;
        }
      }
      ++batches;
    }
    r->Close();
  } catch (const TransportError& e) {
    fprintf(stderr, "consume: %s\n", e.what());
    fprintf(stderr, "consume: received %llu complete batch(es) before the error\n",
            static_cast<unsigned long long>(r->batches_complete()));
    return 1;
  }
  double t = Now() - t0;
  printf(
      "consume: received %llu batches (%llu epochs), %.1f MB in %.2f s = %.1f MB/s; "
      "CRC32C verified on %llu/%llu batches%s\n",
      static_cast<unsigned long long>(batches), static_cast<unsigned long long>(epochs + 1),
      static_cast<double>(r->bytes_received()) / 1e6, t,
      static_cast<double>(r->bytes_received()) / 1e6 / t, static_cast<unsigned long long>(verified),
      static_cast<unsigned long long>(batches),
      check ? (", record order checked on " + std::to_string(samples_checked) + " samples").c_str()
            : "");
  return verified == batches ? 0 : 1;
}

// The IPv4 address of the first netdev that carries an RDMA device's GID.
std::string FirstRdmaAddress() {
  std::vector<std::string> netdevs;
  if (DIR* d = opendir("/sys/class/infiniband")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream f(std::string("/sys/class/infiniband/") + e->d_name +
                      "/ports/1/gid_attrs/ndevs/0");
      std::string nd;
      if (std::getline(f, nd) && !nd.empty()) netdevs.push_back(nd);
    }
    closedir(d);
  }
  ifaddrs* ifs = nullptr;
  std::string ip;
  if (getifaddrs(&ifs) == 0) {
    for (const auto& nd : netdevs) {
      for (ifaddrs* i = ifs; i && ip.empty(); i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || nd != i->ifa_name) continue;
        char buf[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
        ip = buf;
      }
      if (!ip.empty()) break;
    }
    freeifaddrs(ifs);
  }
  return ip;
}

pid_t Spawn(const std::vector<std::string>& args, int keep_fd) {
  std::vector<char*> argv;
  for (const auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  (void)keep_fd;  // inherited: created without O_CLOEXEC
  pid_t pid = -1;
  int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc) throw std::runtime_error("posix_spawn(refloader " + args[1] + "): " + strerror(rc));
  return pid;
}

std::string DescribeStatus(int st) {
  if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("killed by ") + strsignal(WTERMSIG(st));
  return "status " + std::to_string(st);
}

int Demo(const Options& a) {
  std::string ip = a.Str("ip");
  if (ip.empty() && getenv("RXE_IP")) ip = getenv("RXE_IP");
  if (ip.empty()) ip = FirstRdmaAddress();
  if (ip.empty()) {
    fprintf(stderr,
            "demo: no RDMA-capable address found (no /sys/class/infiniband device with an IPv4 "
            "netdev); run it in the Soft-RoCE guest (scripts/demo) or pass --ip\n");
    return 1;
  }
  std::string addr = ip + ":" + a.Str("port");
  bool wrong = a.Has("init-rdma-first");
  printf("demo: serve and consume over %s%s\n", addr.c_str(),
         wrong ? " -- serve with --init-rdma-first (wrong order on purpose)" : "");
  fflush(stdout);

  int ready[2];
  if (pipe(ready)) throw std::runtime_error("pipe: " + std::string(strerror(errno)));
  fcntl(ready[0], F_SETFD, FD_CLOEXEC);
  std::vector<std::string> serve = {"refloader", "serve",      "--listen",
                                    addr,        "--ready-fd", std::to_string(ready[1])};
  for (const auto& [k, v] : a.given()) {
    if (k == "ip" || k == "port") continue;
    serve.push_back("--" + k);
    for (const flags::Flag& f : DemoFlags())
      if (k == f.name && !f.value.empty()) serve.push_back(v);
  }
  pid_t serve_pid = Spawn(serve, ready[1]);
  close(ready[1]);
  char c;
  ssize_t got = read(ready[0], &c, 1);  // EOF: serve died before listening
  close(ready[0]);

  int consume_st = -1;
  if (got == 1) {
    const LoaderFlags& l = TheLoaderFlags();
    std::vector<std::string> consume = {"refloader",
                                        "consume",
                                        "--connect",
                                        addr,
                                        "--check-sequential",
                                        "--" + l.batch_size.name,
                                        a.Str(l.batch_size.name),
                                        "--" + l.sample_bytes.name,
                                        a.Str(l.sample_bytes.name)};
    pid_t consume_pid = Spawn(consume, -1);
    waitpid(consume_pid, &consume_st, 0);
  }
  int serve_st = 0;
  waitpid(serve_pid, &serve_st, 0);
  bool ok = WIFEXITED(serve_st) && WEXITSTATUS(serve_st) == 0 && consume_st == 0;
  printf("demo: serve %s, consume %s -> %s\n", DescribeStatus(serve_st).c_str(),
         consume_st == -1 ? "not started" : DescribeStatus(consume_st).c_str(),
         ok      ? "OK: every batch arrived in order and verified"
         : wrong ? "FAILED, the consequence of --init-rdma-first (see above)"
                 : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

const std::vector<Command>& RdmaCommands() {
  static const std::vector<Command> kCommands = {
      {"serve",
       "  refloader serve --listen IP:PORT [options]\n"
       "      Start the loader (workers forked first), THEN open RDMA on the device that owns\n"
       "      IP, register the loader's shared-memory batch slots and stream every batch to one\n"
       "      consumer. Prints throughput. Options:\n",
       ServeFlags(), "", Serve},
      {"consume",
       "  refloader consume --connect IP:PORT [options]\n"
       "      Receive every batch in order, verify every byte (CRC32C, and with\n"
       "      --check-sequential the record order), print throughput and what was received.\n",
       ConsumeFlags(), "", Consume},
      {"demo",
       "  refloader demo [options]\n"
       "      Run serve and consume as two processes (posix_spawn, no fork) over the RDMA\n"
       "      device of IP, check every byte, print both ends' results. Exit 0 only if both\n"
       "      ends succeeded. Takes serve's options but its address and ready fd:\n",
       DemoFlags(), "", Demo},
  };
  return kCommands;
}

}  // namespace forkguard::refloader
