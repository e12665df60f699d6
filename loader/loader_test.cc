// Exactly-once delivery of the loader over many epochs with early breaks,
// double resets, restarts and save/resume (in-process and in a new process),
// for 0, 1 and 4 workers and every sampler.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader/loader.h"
#include "tests/support/runfiles.h"

namespace forkguard::loader {
namespace {

using test_support::MakeTempDir;

constexpr uint64_t kRecords = 203;  // not a multiple of the batch size
constexpr uint32_t kBatch = 7;
constexpr size_t kSampleBytes = 32;  // records are 8..48 bytes: both truncated and padded
constexpr uint64_t kEpochs = 150;

// Order-independent checksum of the delivered indices of an epoch, compared
// with the sampler's; the tests also compare the exact sequence.
uint64_t Checksum(const std::vector<uint64_t>& v) {
  uint64_t sum = 0;
  for (uint64_t x : v) {
    uint64_t z = (x + 1) * 0x9e3779b97f4a7c15ull;
    sum += z ^ (z >> 29);
  }
  return sum;
}

// What a slot must hold for the batch: each sample's record bytes (made by
// MakeDataset: the first 8 are the index), truncated or zero-padded.
::testing::AssertionResult BatchContentOk(const Dataset& ds, const Batch& b) {
  if (b.bytes != b.samples.size() * kSampleBytes)
    return ::testing::AssertionFailure() << "bytes " << b.bytes;
  for (size_t k = 0; k < b.samples.size(); k++) {
    RecordView r = ds.Get(b.samples[k]);
    const std::byte* s = b.data + k * kSampleBytes;
    size_t n = std::min(r.size, kSampleBytes);
    if (memcmp(s, r.data, n) != 0)
      return ::testing::AssertionFailure() << "sample " << b.samples[k] << " content differs";
    for (size_t i = n; i < kSampleBytes; i++)
      if (s[i] != std::byte{0}) return ::testing::AssertionFailure() << "padding not zero";
  }
  return ::testing::AssertionSuccess();
}

struct Config {
  uint32_t workers;
  SamplerKind sampler;
  bool drop_last;
};

void PrintTo(const Config& c, std::ostream* os) {
  *os << SamplerKindName(c.sampler) << " sampler, " << c.workers << " workers"
      << (c.drop_last ? ", drop_last" : "");
}

std::string Name(const ::testing::TestParamInfo<Config>& p) {
  return std::string(SamplerKindName(p.param.sampler)) + "_" + std::to_string(p.param.workers) +
         "workers" + (p.param.drop_last ? "_droplast" : "");
}

class ExactlyOnce : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("exactly_once");
    opts_.files = MakeDataset({dir_, kRecords, "uniform:8:48", 3, 3});
    opts_.batch_size = kBatch;
    opts_.sample_bytes = kSampleBytes;
    opts_.num_workers = GetParam().workers;
    opts_.drop_last = GetParam().drop_last;
    opts_.sampler.kind = GetParam().sampler;
    opts_.sampler.seed = 77;
    if (GetParam().sampler == SamplerKind::kDistributed) {
      opts_.sampler.rank = 1;
      opts_.sampler.world = 3;  // 203 = 3*67 + 2: rank 1 gets one padded index
    }
    opts_.timeout_ms = 60000;
  }

  std::vector<uint64_t> Expected(uint64_t epoch) const {
    auto v = EpochOrder(opts_.sampler, kRecords, epoch);
    if (opts_.drop_last) v.resize(v.size() / kBatch * kBatch);
    return v;
  }

  std::string dir_;
  LoaderOptions opts_;
};

// Consumer side of one epoch: pulls batches, checks each one, keeps up to two
// of them unreleased for a while (zero-copy consumers such as an RDMA send do),
// and re-checks held batches when releasing them (the slot was not reused).
class Consumer {
 public:
  Consumer(Loader* l, std::mt19937_64* rng) : l_(l), rng_(rng) {}
  ~Consumer() { ReleaseAll(); }

  // Takes up to `max_batches` batches of `epoch`; stops early at the marker
  // (returns true) unless `stop_before_marker`.
  bool Take(uint64_t epoch, uint64_t max_batches, std::vector<uint64_t>* got) {
    for (uint64_t i = 0; i < max_batches; i++) {
      LoaderItem item = l_->Next();
      if (item.kind == LoaderItem::kEpochEnd) {
        EXPECT_EQ(item.epoch, epoch);
        return true;
      }
      const Batch& b = item.batch;
      EXPECT_EQ(b.epoch, epoch);
      EXPECT_EQ(b.index * kBatch, got->size()) << "batch number out of order";
      EXPECT_TRUE(BatchContentOk(l_->dataset(), b));
      got->insert(got->end(), b.samples.begin(), b.samples.end());
      held_.push_back(b);
      if (held_.size() > 2 || (*rng_)() % 3 == 0) ReleaseOldest();
    }
    return false;
  }
  void ReleaseOldest() {
    EXPECT_TRUE(BatchContentOk(l_->dataset(), held_.front()));
    l_->Release(held_.front());
    held_.pop_front();
  }
  void ReleaseAll() {
    while (!held_.empty()) ReleaseOldest();
  }

 private:
  Loader* l_;
  std::mt19937_64* rng_;
  std::deque<Batch> held_;
};

// Runs the rest of `epoch` from `st` in a brand-new process with a brand-new
// Loader, and returns what it delivered (or fails).
std::vector<uint64_t> ResumeInNewProcess(const LoaderOptions& opts, const LoaderState& st,
                                         bool resume_before_start) {
  int p[2];
  EXPECT_EQ(pipe(p), 0);
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    int rc = 0;
    try {
      Loader l(opts);
      LoaderState parsed = LoaderState::Parse(st.ToString());  // as if read from a file
      if (resume_before_start) l.Resume(parsed);
      l.Start();
      if (!resume_before_start) l.Resume(parsed);
      for (;;) {
        LoaderItem item = l.Next();
        if (item.kind == LoaderItem::kEpochEnd) {
          if (item.epoch != st.epoch) rc = 3;
          break;
        }
        if (item.batch.epoch != st.epoch || !BatchContentOk(l.dataset(), item.batch)) rc = 4;
        for (uint64_t s : item.batch.samples)
          if (write(p[1], &s, 8) != 8) rc = 5;
        l.Release(item.batch);
      }
    } catch (const std::exception& e) {
      fprintf(stderr, "resumed process: %s\n", e.what());
      rc = 6;
    }
    close(p[1]);
    _exit(rc);
  }
  close(p[1]);
  std::vector<uint64_t> out;
  uint64_t s;
  while (read(p[0], &s, 8) == 8) out.push_back(s);
  close(p[0]);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  return out;
}

TEST_P(ExactlyOnce, ManyEpochsWithBreaksResetsAndResume) {
  std::mt19937_64 rng(1000 + GetParam().workers * 10 + static_cast<int>(GetParam().sampler));
  auto loader = std::make_unique<Loader>(opts_);
  // "Iterator created before the first epoch": Start() primes epoch 0 now,
  // and the BeginEpoch(0) of the loop below must not throw it away.
  loader->Start();
  const uint64_t bpe = loader->batches_per_epoch();
  ASSERT_EQ(bpe, opts_.drop_last ? EpochLength(opts_.sampler, kRecords) / kBatch
                                 : (EpochLength(opts_.sampler, kRecords) + kBatch - 1) / kBatch);
  uint64_t complete = 0, partial = 0, resumed_fork = 0, resumed_inproc = 0, restarts = 0;
  for (uint64_t e = 0; e < kEpochs; e++) {
    const std::vector<uint64_t> want = Expected(e);
    std::vector<uint64_t> got;
    loader->BeginEpoch(e);
    int action = static_cast<int>(rng() % 12);
    if (action == 0) loader->BeginEpoch(e);  // double reset
    Consumer c(loader.get(), &rng);
    bool complete_epoch = true;
    if (action == 1 || action == 2) {
      // Early break: the rest of this epoch is abandoned by the next BeginEpoch.
      uint64_t k = rng() % (bpe + 1);
      c.Take(e, k, &got);
      EXPECT_EQ(got, std::vector<uint64_t>(want.begin(), want.begin() + got.size()));
      EXPECT_EQ(loader->state().epoch, e);
      EXPECT_EQ(loader->state().batch, (got.size() + kBatch - 1) / kBatch);
      complete_epoch = false;
      partial++;
    } else if (action == 3) {
      // Restart the same epoch mid-way: everything from its beginning again.
      c.Take(e, rng() % (bpe + 1), &got);
      c.ReleaseAll();
      loader->BeginEpoch(e);
      got.clear();
      restarts++;
      EXPECT_TRUE(c.Take(e, bpe + 1, &got));
    } else if (action == 4 || action == 5) {
      // Save mid-epoch, lose the process's loader, resume elsewhere.
      c.Take(e, rng() % (bpe + 1), &got);
      LoaderState st = loader->state();
      EXPECT_EQ(st.epoch, e);
      EXPECT_EQ(st.batch, (got.size() + kBatch - 1) / kBatch);  // delivered, not dispatched
      c.ReleaseAll();
      loader.reset();
      bool before_start = rng() % 2;
      if (action == 4) {
        std::vector<uint64_t> rest = ResumeInNewProcess(opts_, st, before_start);
        got.insert(got.end(), rest.begin(), rest.end());
        resumed_fork++;
        loader = std::make_unique<Loader>(opts_);
        loader->Resume({e + 1, 0, st.fingerprint});
        loader->Start();
      } else {
        loader = std::make_unique<Loader>(opts_);
        if (before_start) loader->Resume(st);
        loader->Start();
        if (!before_start) loader->Resume(st);
        Consumer c2(loader.get(), &rng);
        EXPECT_TRUE(c2.Take(e, bpe + 1, &got));
        resumed_inproc++;
      }
    } else if (action == 6) {
      // All batches but not the marker: BeginEpoch(e + 1) stands in for it.
      c.Take(e, bpe, &got);
    } else {
      EXPECT_TRUE(c.Take(e, bpe + 1, &got));
    }
    if (complete_epoch) {
      EXPECT_EQ(got.size(), want.size()) << "epoch " << e;
      EXPECT_EQ(Checksum(got), Checksum(want)) << "epoch " << e;
      EXPECT_EQ(got, want) << "epoch " << e;
      complete++;
    }
    if (HasFailure()) break;
  }
  EXPECT_GE(complete, 100u);
  EXPECT_GT(partial, 0u);
  EXPECT_GT(resumed_fork, 0u);
  EXPECT_GT(resumed_inproc, 0u);
  EXPECT_GT(restarts, 0u);
  printf(
      "%llu complete epochs, %llu early breaks, %llu restarts, %llu resumes in a new process, "
      "%llu in-process\n",
      (unsigned long long)complete, (unsigned long long)partial, (unsigned long long)restarts,
      (unsigned long long)resumed_fork, (unsigned long long)resumed_inproc);
}

INSTANTIATE_TEST_SUITE_P(AllSamplersAndWorkerCounts, ExactlyOnce,
                         ::testing::Values(Config{0, SamplerKind::kSequential, false},
                                           Config{1, SamplerKind::kSequential, false},
                                           Config{4, SamplerKind::kSequential, false},
                                           Config{0, SamplerKind::kShuffle, false},
                                           Config{1, SamplerKind::kShuffle, false},
                                           Config{4, SamplerKind::kShuffle, false},
                                           Config{0, SamplerKind::kDistributed, false},
                                           Config{1, SamplerKind::kDistributed, false},
                                           Config{4, SamplerKind::kDistributed, false},
                                           Config{4, SamplerKind::kShuffle, true}),
                         Name);

// Options reading a new dataset (in a directory named after `name`) of `records` records of
// `record_bytes` each, in one shard.
LoaderOptions OverFixedSizeRecords(const std::string& name, uint64_t records, int record_bytes) {
  LoaderOptions o;
  o.files =
      MakeDataset({MakeTempDir(name), records, "fixed:" + std::to_string(record_bytes), 1, 1});
  return o;
}

// The stream runs across epochs without BeginEpoch: markers separate them.
TEST(LoaderStream, EpochsAreSeparatedInBand) {
  LoaderOptions o = OverFixedSizeRecords("stream", 50, 16);
  o.batch_size = 8;
  o.sample_bytes = 16;
  o.num_workers = 2;
  o.sampler = {SamplerKind::kShuffle, 3};
  Loader l(o);
  l.Start();
  for (uint64_t e = 0; e < 5; e++) {
    std::vector<uint64_t> got;
    for (;;) {
      LoaderItem item = l.Next();
      if (item.kind == LoaderItem::kEpochEnd) {
        EXPECT_EQ(item.epoch, e);
        break;
      }
      got.insert(got.end(), item.batch.samples.begin(), item.batch.samples.end());
      l.Release(item.batch);
    }
    EXPECT_EQ(got, EpochOrder(o.sampler, 50, e));
    EXPECT_EQ(l.state().epoch, e + 1);
    EXPECT_EQ(l.state().batch, 0u);
  }
}

TEST(LoaderState, RoundTripsAndRefusesAnotherConfiguration) {
  LoaderState s{12, 34, 0xabcdef0123456789ull};
  LoaderState p = LoaderState::Parse(s.ToString());
  EXPECT_EQ(p.epoch, 12u);
  EXPECT_EQ(p.batch, 34u);
  EXPECT_EQ(p.fingerprint, s.fingerprint);
  EXPECT_THROW(LoaderState::Parse("epoch=1"), std::invalid_argument);

  LoaderOptions o = OverFixedSizeRecords("state", 50, 16);
  o.num_workers = 0;
  o.sample_bytes = 16;
  Loader a(o);
  o.batch_size = 5;
  Loader b(o);
  EXPECT_THROW(b.Resume(a.state()), std::invalid_argument);
  EXPECT_THROW(b.BeginEpoch(0, b.batches_per_epoch() + 1), std::invalid_argument);
}

// --fork-check's values: each mode's name reads back as that mode; anything else is refused.
TEST(ForkCheckMode, NamesReadBack) {
  for (ForkCheck mode : {ForkCheck::kOff, ForkCheck::kWarn, ForkCheck::kError}) {
    ForkCheck read = mode == ForkCheck::kOff ? ForkCheck::kWarn : ForkCheck::kOff;
    EXPECT_TRUE(ParseForkCheck(ForkCheckName(mode), &read)) << ForkCheckName(mode);
    EXPECT_EQ(read, mode);
  }
  EXPECT_STREQ(ForkCheckName(LoaderOptions().fork_check), "warn");
  ForkCheck unchanged = ForkCheck::kError;
  EXPECT_FALSE(ParseForkCheck("Warn", &unchanged));
  EXPECT_EQ(unchanged, ForkCheck::kError);
}

TEST(SlotRegion, PageAlignedAndHoldsEverySlot) {
  LoaderOptions o = OverFixedSizeRecords("region", 100, 100);
  o.batch_size = 3;
  o.sample_bytes = 1000;
  o.num_workers = 2;
  o.prefetch_per_worker = 3;
  Loader l(o);
  const SlotRegion& r = l.slot_region();
  long page = sysconf(_SC_PAGESIZE);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(r.base) % page, 0u);
  EXPECT_EQ(r.size % page, 0u);
  EXPECT_EQ(r.slot_stride % page, 0u);
  EXPECT_EQ(r.num_slots, 2u * 3 + 2);
  EXPECT_EQ(r.slot_capacity, 3000u);
  EXPECT_GE(r.size, r.num_slots * r.slot_stride);
  EXPECT_GE(r.memfd, 0);
  l.Start();
  const std::byte* base = r.base;  // the region does not move when workers start
  for (int i = 0; i < 20; i++) {
    LoaderItem item = l.Next();
    ASSERT_EQ(item.kind, LoaderItem::kBatch);
    EXPECT_EQ(item.batch.data, r.base + item.batch.offset);
    EXPECT_EQ(item.batch.offset, item.batch.slot * r.slot_stride);
    EXPECT_LE(item.batch.bytes, r.slot_capacity);
    l.Release(item.batch);
  }
  EXPECT_EQ(l.slot_region().base, base);
}

}  // namespace
}  // namespace forkguard::loader
