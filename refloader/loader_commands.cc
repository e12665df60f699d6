// refloader make-dataset / run / memcpy-bandwidth: the loader on its own (loader/ only).
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "flags/flags.h"
#include "loader/loader.h"
#include "loader/tfrecord.h"
#include "refloader/commands.h"

namespace forkguard::refloader {
namespace {

namespace fl = forkguard::loader;
using flags::Options;
using flags::UsageError;

const fl::DatasetSpec kDataset;

flags::FlagTable MakeDatasetFlags() {
  return {
      {"out", "DIR", "", "the directory to write (required)"},
      {"records", "N", std::to_string(kDataset.records), "number of records"},
      {"size", "DIST", kDataset.size_dist,
       "record sizes: fixed:N | uniform:MIN:MAX |\nlognormal:MEDIAN:SIGMA; sizes take K/M/G"},
      {"seed", "S", std::to_string(kDataset.seed), "content and size seed"},
      {"shards", "K", std::to_string(kDataset.shards),
       "number of files DIR/data-SSSSS-of-KKKKK.tfrecord"},
      flags::HelpFlag(),
  };
}

int MakeDatasetCommand(const Options& a) {
  fl::DatasetSpec spec;
  spec.dir = a.Str("out");
  if (spec.dir.empty()) throw UsageError("make-dataset needs --out DIR");
  spec.records = a.Size("records");
  spec.size_dist = a.Str("size");
  spec.seed = a.Size("seed");
  spec.shards = static_cast<uint32_t>(a.Size("shards"));
  double t0 = Now();
  auto paths = fl::MakeDataset(spec);
  uint64_t bytes = 0;
  for (const auto& p : paths) {
    struct stat st;
    if (stat(p.c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_size);
  }
  printf("wrote %llu records in %zu shard(s) under %s: %.1f MiB in %.2f s\n",
         static_cast<unsigned long long>(spec.records), paths.size(), spec.dir.c_str(),
         static_cast<double>(bytes) / (1 << 20), Now() - t0);
  return 0;
}

struct RunConfig {
  fl::LoaderOptions opts;
  uint64_t epochs = 1;
  bool check = false;
  uint64_t stop_after = 0;  // 0 = never
  std::string resume;
  bool skip_first = false;
  bool quiet = false;
};

// Runs the loader; returns the exit status.
int RunLoader(const RunConfig& cfg) {
  fl::Loader loader(cfg.opts);
  loader.Start();  // fork the workers first: nothing fork-unsafe exists yet
  uint64_t first_epoch = 0;
  if (!cfg.resume.empty()) {
    fl::LoaderState st = fl::LoaderState::Parse(cfg.resume);
    loader.Resume(st);
    first_epoch = st.epoch;
  }
  const fl::Dataset& ds = loader.dataset();
  if (!cfg.quiet)
    printf(
        "refloader: %llu records (%.1f MiB) in %zu shard(s); sampler %s, %u worker(s), "
        "batch %u x %zu B, %llu batches/epoch, CRC32C (ISA-L)\n",
        static_cast<unsigned long long>(ds.size()),
        static_cast<double>(ds.total_bytes()) / (1 << 20), ds.files().size(),
        fl::SamplerKindName(cfg.opts.sampler.kind), cfg.opts.num_workers, cfg.opts.batch_size,
        cfg.opts.sample_bytes, static_cast<unsigned long long>(loader.batches_per_epoch()));
  uint64_t total_samples = 0, total_bytes = 0, batches_seen = 0;
  double total_secs = 0;
  bool check_failed = false;
  for (uint64_t e = first_epoch; e < first_epoch + cfg.epochs; e++) {
    if (e != first_epoch) loader.BeginEpoch(e);  // a no-op at an epoch boundary
    std::vector<uint64_t> delivered;
    uint64_t samples = 0, bytes = 0, start_batch = loader.state().batch;
    double t0 = Now();
    for (;;) {
      fl::LoaderItem item = loader.Next();
      if (item.kind == fl::LoaderItem::kEpochEnd) break;
      const fl::Batch& b = item.batch;
      samples += b.samples.size();
      bytes += b.bytes;
      if (cfg.check) {
        for (size_t k = 0; k < b.samples.size(); k++) {
          delivered.push_back(b.samples[k]);
          uint64_t first;
          if (b.sample_bytes >= 8 && ds.Get(b.samples[k]).size >= 8) {
            memcpy(&first, b.data + k * b.sample_bytes, 8);
            if (first != b.samples[k]) {
              fprintf(stderr, "check: epoch %llu batch %llu: sample %llu holds record %llu\n",
                      static_cast<unsigned long long>(e), static_cast<unsigned long long>(b.index),
                      static_cast<unsigned long long>(b.samples[k]),
                      static_cast<unsigned long long>(first));
              check_failed = true;
            }
          }
        }
      }
      loader.Release(b);
      if (cfg.stop_after && ++batches_seen == cfg.stop_after) {
        printf("stopped after %llu batches; resume with: --resume '%s'\n",
               static_cast<unsigned long long>(batches_seen), loader.state().ToString().c_str());
        return check_failed ? 1 : 0;
      }
    }
    double secs = Now() - t0;
    if (cfg.check) {
      auto want = fl::EpochOrder(cfg.opts.sampler, ds.size(), e);
      want.resize(
          std::min<uint64_t>(want.size(), loader.batches_per_epoch() * cfg.opts.batch_size));
      want.erase(want.begin(), want.begin() + static_cast<long>(std::min<uint64_t>(
                                                  want.size(), start_batch * cfg.opts.batch_size)));
      bool ok = want == delivered;
      check_failed |= !ok;
      printf("check: epoch %llu: %zu samples, %s\n", static_cast<unsigned long long>(e),
             delivered.size(), ok ? "exactly the sampler's order" : "MISMATCH");
    }
    if (!cfg.quiet)
      printf("epoch %llu: %llu samples in %.3f s: %.0f samples/s, %.1f MB/s\n",
             static_cast<unsigned long long>(e), static_cast<unsigned long long>(samples), secs,
             static_cast<double>(samples) / secs, static_cast<double>(bytes) / secs / 1e6);
    if (cfg.skip_first && e == first_epoch && cfg.epochs > 1) continue;
    total_samples += samples;
    total_bytes += bytes;
    total_secs += secs;
  }
  loader.Shutdown();
  printf("summary: samples=%llu bytes=%llu seconds=%.4f samples_per_s=%.1f MB_per_s=%.1f\n",
         static_cast<unsigned long long>(total_samples),
         static_cast<unsigned long long>(total_bytes), total_secs,
         static_cast<double>(total_samples) / total_secs,
         static_cast<double>(total_bytes) / total_secs / 1e6);
  return check_failed ? 1 : 0;
}

flags::FlagTable RunFlags() {
  const LoaderFlags& l = TheLoaderFlags();
  const RunConfig c;
  return {
      {"data", "PATH", "", "a .tfrecord file or a directory of them (required)"},
      l.workers,
      l.batch_size,
      l.sample_bytes,
      l.prefetch,
      l.slots,
      {"epochs", "N", std::to_string(c.epochs), "epochs to run"},
      l.sampler,
      l.seed,
      l.rank,
      l.world,
      l.no_shuffle,
      l.drop_last,
      l.no_verify,
      l.timeout_ms,
      {"check", "", "",
       "verify every epoch delivered the sampler's indices\nexactly once and each sample's "
       "first 8 bytes (for data\nfrom make-dataset)"},
      {"stop-after", "N", std::to_string(c.stop_after),
       "stop after N batches and print the resumable state,\n0 = never"},
      {"resume", "STATE", "", "start from a printed state (\"refloader-state/1 ...\")"},
      {"skip-first-epoch-in-total", "", "", "leave epoch 0 (cold start) out of the summary line"},
      flags::HelpFlag(),
  };
}

int RunCommand(const Options& a) {
  RunConfig c;
  std::string data = a.Str("data");
  if (data.empty()) throw UsageError("run needs --data PATH");
  ApplyLoaderFlags(a, &c.opts);
  c.epochs = a.Size("epochs");
  c.check = a.Has("check");
  c.stop_after = a.Size("stop-after");
  c.resume = a.Str("resume");
  c.skip_first = a.Has("skip-first-epoch-in-total");
  c.opts.files = fl::ListShards(data);  // after the options: a bad one is a usage error first
  return RunLoader(c);
}

int MemcpyCommand(const Options& a) {
  size_t size = a.Size("size");
  double seconds = a.Double("seconds");
  // Many buffers, so the copy streams from memory rather than from the cache,
  // like a loader reading 1 MiB records from the page cache.
  size_t nbuf = std::max<size_t>(2, (256u << 20) / size);
  std::vector<char> src(size * nbuf, 1), dst(size * nbuf, 0);
  uint64_t bytes = 0;
  double t0 = Now(), t;
  size_t i = 0;
  do {
    memcpy(dst.data() + (i % nbuf) * size, src.data() + ((i * 7 + 3) % nbuf) * size, size);
    bytes += size;
    i++;
    t = Now();
  } while (t - t0 < seconds);
  volatile char sink = dst[bytes % dst.size()];
  (void)sink;
  printf("memcpy: size=%zu bytes=%llu seconds=%.4f MB_per_s=%.1f\n", size,
         static_cast<unsigned long long>(bytes), t - t0,
         static_cast<double>(bytes) / (t - t0) / 1e6);
  return 0;
}

void RemoveTree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      unlink((dir + "/" + e->d_name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

}  // namespace

int DemoWithoutArguments() {
  const char* tmp = getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/refloader-demo.XXXXXX";
  if (!mkdtemp(dir.data())) {
    perror("refloader: mkdtemp");
    return 1;
  }
  int rc = 1;
  try {
    fl::DatasetSpec spec;
    spec.dir = dir;
    spec.records = 20000;
    spec.size_dist = "uniform:1K:4K";
    spec.seed = 7;
    spec.shards = 4;
    printf("refloader demo: generating %llu records (%s bytes, %u shards) in %s\n",
           static_cast<unsigned long long>(spec.records), spec.size_dist.c_str(), spec.shards,
           dir.c_str());
    fl::MakeDataset(spec);
    RunConfig c;
    c.opts.files = fl::ListShards(dir);
    c.opts.num_workers = 2;
    c.opts.batch_size = 64;
    c.opts.sample_bytes = 4096;
    c.opts.sampler.kind = fl::SamplerKind::kShuffle;
    c.opts.sampler.seed = 42;
    c.epochs = 2;
    c.check = true;
    printf(
        "refloader demo: 2 workers forked by Start() before anything else, shuffled epochs,\n"
        "every sample's CRC32C verified and decoded into a 4 KiB tensor in shared memory;\n"
        "--check compares each epoch with the sampler's order.\n");
    rc = RunLoader(c);
    printf("refloader demo: see `refloader --help` for make-dataset, run, and the RDMA demo.\n");
  } catch (...) {
    RemoveTree(dir);
    throw;
  }
  RemoveTree(dir);
  return rc;
}

const LoaderFlags& TheLoaderFlags() {
  static const LoaderFlags kFlags = [] {
    const fl::LoaderOptions o;
    return LoaderFlags{
        .workers = {"workers", "N", std::to_string(o.num_workers),
                    "worker processes, 0 = in-process"},
        .batch_size = {"batch-size", "N", std::to_string(o.batch_size), "samples per batch"},
        .sample_bytes = {"sample-bytes", "N", std::to_string(o.sample_bytes),
                         "fixed output bytes per sample; records are copied\n"
                         "and truncated/zero-padded"},
        .prefetch = {"prefetch", "N", std::to_string(o.prefetch_per_worker),
                     "batches in flight per worker"},
        .slots = {"slots", "N", std::to_string(o.num_slots),
                  "batch slots in shared memory, 0 = workers*prefetch+2"},
        .timeout_ms = {"timeout-ms", "N", std::to_string(o.timeout_ms),
                       "a worker with no progress this long is an error"},
        .sampler = {"sampler", "KIND", fl::SamplerKindName(o.sampler.kind),
                    "sequential | shuffle | distributed"},
        .seed = {"seed", "S", std::to_string(o.sampler.seed), "sampler seed"},
        .rank = {"rank", "R", std::to_string(o.sampler.rank), "distributed sampler's rank"},
        .world = {"world", "W", std::to_string(o.sampler.world),
                  "distributed sampler's world size"},
        .no_shuffle = {"no-shuffle", "", "", "distributed sampler without shuffling"},
        .drop_last = {"drop-last", "", "", "drop the last incomplete batch of each epoch"},
        .no_verify = {"no-verify", "", "", "skip the per-record data CRC32C check"},
        .fork_check = {"fork-check", "MODE", fl::ForkCheckName(o.fork_check),
                       "before forking the workers, ask forkguard_fork_check() whether\n"
                       "RDMA is already up: warn (one line naming where RDMA\n"
                       "was first initialized, then fork), error (fail at loader start\n"
                       "with that line, fork nothing), off"},
    };
  }();
  return kFlags;
}

void ApplyLoaderFlags(const Options& a, fl::LoaderOptions* o) {
  const LoaderFlags& l = TheLoaderFlags();
  auto size = [&](const flags::Flag& f, auto* field) {
    if (a.Takes(f.name))
      *field = static_cast<std::remove_reference_t<decltype(*field)>>(a.Size(f.name));
  };
  size(l.workers, &o->num_workers);
  size(l.batch_size, &o->batch_size);
  size(l.sample_bytes, &o->sample_bytes);
  size(l.prefetch, &o->prefetch_per_worker);
  size(l.slots, &o->num_slots);
  size(l.timeout_ms, &o->timeout_ms);
  size(l.seed, &o->sampler.seed);
  size(l.rank, &o->sampler.rank);
  size(l.world, &o->sampler.world);
  if (a.Takes(l.sampler.name)) o->sampler.kind = fl::ParseSamplerKind(a.Str(l.sampler.name));
  if (a.Takes(l.no_shuffle.name)) o->sampler.shuffle = !a.Has(l.no_shuffle.name);
  if (a.Takes(l.drop_last.name)) o->drop_last = a.Has(l.drop_last.name);
  if (a.Takes(l.no_verify.name))
    o->transform = a.Has(l.no_verify.name) ? fl::DecodeTransform() : fl::VerifyAndDecodeTransform();
  if (a.Takes(l.fork_check.name)) {
    std::string mode = a.Str(l.fork_check.name);
    if (!fl::ParseForkCheck(mode, &o->fork_check))
      throw UsageError("--fork-check: expected warn, error or off, not '" + mode + "'");
  }
}

std::string Help(const Command& c) { return c.usage + flags::ColumnHelp(c.flags, 6, 33) + c.notes; }

const std::vector<Command>& LoaderCommands() {
  static const std::vector<Command> kCommands = {
      {"make-dataset", "  refloader make-dataset --out DIR [options]\n", MakeDatasetFlags(), "",
       MakeDatasetCommand},
      {"run", "  refloader run --data PATH [options]\n", RunFlags(),
       "    Output: one line per epoch, then\n"
       "      summary: samples=N bytes=B seconds=T samples_per_s=X MB_per_s=Y\n",
       RunCommand},
      {"memcpy-bandwidth",
       "  refloader memcpy-bandwidth [options]\n"
       "      single-core memcpy bandwidth (the 1 MiB benchmark's yardstick)\n",
       {{"size", "N", "1M", "bytes per copy"},
        {"seconds", "S", "1", "how long to copy"},
        flags::HelpFlag()},
       "",
       MemcpyCommand},
  };
  return kCommands;
}

}  // namespace forkguard::refloader
