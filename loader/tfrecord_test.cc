// CRC32C known answers, TFRecord framing round trip and corruption detection,
// and the samplers' contracts.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader/crc32c.h"
#include "loader/sampler.h"
#include "loader/tfrecord.h"
#include "tests/support/runfiles.h"

namespace forkguard::loader {
namespace {

using test_support::MakeTempDir;

std::vector<std::byte> Bytes(const std::string& s) {
  std::vector<std::byte> v(s.size());
  memcpy(v.data(), s.data(), s.size());
  return v;
}

// The definition, one bit at a time: slow and obviously right.
uint32_t Crc32cBitwise(const void* data, size_t n, uint32_t crc = 0) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
  }
  return ~c;
}

// RFC 3720 (iSCSI) appendix B.4 and the classic check value.
TEST(Crc32c, KnownAnswers) {
  for (auto crc : {Crc32c, Crc32cBitwise}) {
    EXPECT_EQ(crc("123456789", 9, 0), 0xe3069283u);
    EXPECT_EQ(crc("", 0, 0), 0u);
    std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), up(32), down(32);
    std::iota(up.begin(), up.end(), 0);
    for (int i = 0; i < 32; i++) down[i] = static_cast<uint8_t>(31 - i);
    EXPECT_EQ(crc(zeros.data(), 32, 0), 0x8a9136aau);
    EXPECT_EQ(crc(ones.data(), 32, 0), 0x62a8ab43u);
    EXPECT_EQ(crc(up.data(), 32, 0), 0x46dd794eu);
    EXPECT_EQ(crc(down.data(), 32, 0), 0x113fdb5cu);
  }
}

TEST(Crc32c, MatchesTheDefinitionAtEveryLengthAndAlignment) {
  std::mt19937_64 rng(5);
  std::vector<uint8_t> buf(100000 + 16);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t align = 0; align < 8; align++) {
    // Short tails, ISA-L's block sizes and their neighbours.
    for (size_t len :
         {0,   1,   3,   7,    8,    9,    15,    16,    17,    63,    64,          65,
          767, 768, 769, 1000, 1543, 4096, 24575, 24576, 24577, 25360, 49152 + 777, 100000}) {
      EXPECT_EQ(Crc32c(buf.data() + align, len), Crc32cBitwise(buf.data() + align, len))
          << "align " << align << " len " << len;
    }
  }
  // Continuation: crc(a ++ b) == crc(b, crc(a)).
  EXPECT_EQ(Crc32c(buf.data(), 100), Crc32c(buf.data() + 37, 63, Crc32c(buf.data(), 37)));
  EXPECT_EQ(Crc32c(buf.data(), 100), Crc32cBitwise(buf.data(), 100));
}

TEST(Crc32c, KnownMask) {
  // TensorFlow's masking of crc32c("123456789"): rotr 15 then + 0xa282ead8.
  EXPECT_EQ(MaskCrc32c(0xe3069283u), ((0xe3069283u >> 15) | (0xe3069283u << 17)) + 0xa282ead8u);
  EXPECT_NE(MaskCrc32c(0xe3069283u), 0xe3069283u);
}

// The 21 bytes of a file holding the single record "hello", field by field:
// pins framing, byte order and masking (computed with the table CRC).
TEST(TfRecord, ExactFramingOfOneRecord) {
  std::string dir = MakeTempDir("framing");
  std::string path = dir + "/one.tfrecord";
  {
    TfRecordWriter w(path);
    w.Write(Bytes("hello"));
  }
  int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  unsigned char buf[64];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  ASSERT_EQ(n, 12 + 5 + 4);
  uint64_t len;
  memcpy(&len, buf, 8);
  EXPECT_EQ(len, 5u);
  uint32_t len_crc, data_crc;
  memcpy(&len_crc, buf + 8, 4);
  memcpy(&data_crc, buf + 17, 4);
  EXPECT_EQ(len_crc, MaskCrc32c(Crc32cBitwise(buf, 8)));
  EXPECT_EQ(memcmp(buf + 12, "hello", 5), 0);
  EXPECT_EQ(data_crc, MaskCrc32c(Crc32cBitwise("hello", 5)));
}

TEST(TfRecord, RoundTripAcrossShards) {
  std::string dir = MakeTempDir("roundtrip");
  std::mt19937_64 rng(11);
  std::vector<std::vector<std::byte>> records;
  std::vector<std::string> files;
  for (int s = 0; s < 3; s++) {
    files.push_back(dir + "/s" + std::to_string(s) + ".tfrecord");
    TfRecordWriter w(files.back());
    int count = s == 1 ? 0 : 50;  // an empty shard in the middle
    for (int i = 0; i < count; i++) {
      size_t len = i == 0 ? 0 : rng() % 5000;
      std::vector<std::byte> r(len);
      for (auto& b : r) b = static_cast<std::byte>(rng());
      w.Write(r);
      records.push_back(r);
    }
  }
  Dataset ds(files);
  ASSERT_EQ(ds.size(), records.size());
  uint64_t total = 0;
  for (uint64_t i = 0; i < ds.size(); i++) {
    RecordView r = ds.Get(i);
    ASSERT_EQ(r.size, records[i].size()) << i;
    EXPECT_TRUE(r.size == 0 || memcmp(r.data, records[i].data(), r.size) == 0) << i;
    EXPECT_NO_THROW(VerifyRecordCrc(r));
    EXPECT_EQ(r.index, i);
    EXPECT_EQ(*r.file, files[i < 50 ? 0 : 2]);
    total += r.size;
  }
  EXPECT_EQ(ds.total_bytes(), total);
  EXPECT_THROW(ds.Get(ds.size()), std::out_of_range);
}

TEST(TfRecord, MakeDatasetIsReproducibleAndSelfDescribing) {
  std::string a = MakeTempDir("mk"), b = MakeTempDir("mk");
  DatasetSpec spec{a, 257, "uniform:1:300", 9, 4};
  auto pa = MakeDataset(spec);
  spec.dir = b;
  auto pb = MakeDataset(spec);
  ASSERT_EQ(pa.size(), 4u);
  EXPECT_EQ(ListShards(a), pa);
  Dataset da(pa), db(pb);
  ASSERT_EQ(da.size(), 257u);
  std::set<size_t> sizes;
  for (uint64_t i = 0; i < da.size(); i++) {
    RecordView x = da.Get(i), y = db.Get(i);
    ASSERT_EQ(x.size, y.size);
    ASSERT_EQ(memcmp(x.data, y.data, x.size), 0);
    EXPECT_NO_THROW(VerifyRecordCrc(x));
    EXPECT_GE(x.size, 1u);
    EXPECT_LE(x.size, 300u);
    sizes.insert(x.size);
    if (x.size >= 8) {
      uint64_t first;
      memcpy(&first, x.data, 8);
      EXPECT_EQ(first, i);
    }
  }
  EXPECT_GT(sizes.size(), 50u);  // really a distribution
  EXPECT_EQ(ParseSize("4K"), 4096u);
  EXPECT_EQ(ParseSize("1M"), 1u << 20);
  EXPECT_THROW(ParseSize("12Q"), std::invalid_argument);
  spec.size_dist = "weird:1";
  EXPECT_THROW(MakeDataset(spec), std::invalid_argument);
}

void FlipByte(const std::string& path, uint64_t offset) {
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char c;
  ASSERT_EQ(pread(fd, &c, 1, static_cast<off_t>(offset)), 1);
  c ^= 0x40;
  ASSERT_EQ(pwrite(fd, &c, 1, static_cast<off_t>(offset)), 1);
  close(fd);
}

TEST(TfRecord, CorruptedLengthNamesFileAndOffset) {
  std::string dir = MakeTempDir("badlen");
  auto files = MakeDataset({dir, 40, "fixed:100", 1, 2});
  uint64_t off = 7 * (12 + 100 + 4);  // record 7 of the second shard
  FlipByte(files[1], off + 2);
  try {
    Dataset ds(files);
    FAIL() << "corrupted length accepted";
  } catch (const RecordError& e) {
    EXPECT_EQ(e.file(), files[1]);
    EXPECT_EQ(e.offset(), off);
    EXPECT_NE(std::string(e.what()).find(files[1]), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("offset " + std::to_string(off)), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("length CRC"), std::string::npos) << e.what();
  }
}

TEST(TfRecord, TruncatedFileNamesLastRecord) {
  std::string dir = MakeTempDir("trunc");
  auto files = MakeDataset({dir, 10, "fixed:100", 1, 1});
  ASSERT_EQ(truncate(files[0].c_str(), 9 * 116 + 50), 0);
  try {
    Dataset ds(files);
    FAIL() << "truncated file accepted";
  } catch (const RecordError& e) {
    EXPECT_EQ(e.file(), files[0]);
    EXPECT_EQ(e.offset(), 9u * 116);
  }
}

TEST(TfRecord, CorruptedDataFailsVerification) {
  std::string dir = MakeTempDir("baddata");
  auto files = MakeDataset({dir, 10, "fixed:100", 1, 1});
  FlipByte(files[0], 3 * 116 + 12 + 50);
  Dataset ds(files);  // headers are fine
  EXPECT_NO_THROW(VerifyRecordCrc(ds.Get(2)));
  try {
    VerifyRecordCrc(ds.Get(3));
    FAIL() << "corrupted data accepted";
  } catch (const RecordError& e) {
    EXPECT_EQ(e.offset(), 3u * 116);
    EXPECT_NE(std::string(e.what()).find("data CRC mismatch"), std::string::npos);
  }
}

// --- samplers ---------------------------------------------------------------

TEST(Sampler, Sequential) {
  SamplerOptions o;
  auto v = EpochOrder(o, 5, 3);
  EXPECT_EQ(v, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(EpochOrder(o, 0, 0).empty());
}

TEST(Sampler, ShuffleIsAReproduciblePermutationNewEachEpoch) {
  SamplerOptions o{SamplerKind::kShuffle, 1234};
  std::set<std::vector<uint64_t>> seen;
  for (uint64_t e = 0; e < 20; e++) {
    auto v = EpochOrder(o, 1000, e);
    EXPECT_EQ(v, EpochOrder(o, 1000, e));  // reproducible
    auto s = v;
    std::sort(s.begin(), s.end());
    std::vector<uint64_t> all(1000);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(s, all);  // a permutation
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 20u);  // a new order every epoch
  SamplerOptions other{SamplerKind::kShuffle, 1235};
  EXPECT_NE(EpochOrder(other, 1000, 0), EpochOrder(o, 1000, 0));  // seed matters
}

TEST(Sampler, DistributedEqualSharesCoverAllWithDocumentedPadding) {
  for (bool shuffle : {false, true}) {
    for (uint64_t n : {0, 1, 3, 10, 12, 101}) {
      for (uint32_t world : {1u, 3u, 4u, 7u}) {
        std::vector<uint64_t> full = EpochOrder({SamplerKind::kShuffle, 5}, n, 2);
        if (!shuffle) std::sort(full.begin(), full.end());
        std::multiset<uint64_t> all;
        for (uint32_t r = 0; r < world; r++) {
          SamplerOptions o{SamplerKind::kDistributed, 5, r, world, shuffle};
          auto v = EpochOrder(o, n, 2);
          ASSERT_EQ(v.size(), (n + world - 1) / world) << n << " " << world;
          ASSERT_EQ(v.size(), EpochLength(o, n));
          for (size_t k = 0; k < v.size(); k++) {
            // Rule: rank r takes positions r + k*world of the order padded by
            // cycling from its front.
            EXPECT_EQ(v[k], full[(r + k * world) % n]);
            all.insert(v[k]);
          }
        }
        for (uint64_t i = 0; i < n; i++) EXPECT_GE(all.count(i), 1u);
        EXPECT_EQ(all.size(), n == 0 ? 0 : (n + world - 1) / world * world);
      }
    }
  }
  EXPECT_THROW(EpochLength({SamplerKind::kDistributed, 0, 3, 3}, 10), std::invalid_argument);
}

}  // namespace
}  // namespace forkguard::loader
