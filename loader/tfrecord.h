// TFRecord files: writing, and reading memory-mapped shards without copying.
//
// Framing of one record (little endian):
//   uint64 length
//   uint32 masked CRC32C of the 8 length bytes
//   byte   data[length]
//   uint32 masked CRC32C of data
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "flags/flags.h"

namespace forkguard::loader {

constexpr size_t kTfRecordHeaderBytes = 12;  // length + its CRC
constexpr size_t kTfRecordFooterBytes = 4;   // data CRC

// A malformed or corrupted record. what() names the file and byte offset.
class RecordError : public std::runtime_error {
 public:
  RecordError(std::string file, uint64_t offset, const std::string& why);
  const std::string& file() const { return file_; }
  uint64_t offset() const { return offset_; }  // of the record's first byte

 private:
  std::string file_;
  uint64_t offset_;
};

// Appends records to a file (created or truncated). Throws std::system_error.
class TfRecordWriter {
 public:
  explicit TfRecordWriter(const std::string& path);
  ~TfRecordWriter();
  TfRecordWriter(const TfRecordWriter&) = delete;
  TfRecordWriter& operator=(const TfRecordWriter&) = delete;

  void Write(std::span<const std::byte> data);
  void Close();  // flushes; also done by the destructor (which cannot report errors)
  uint64_t bytes_written() const { return offset_; }

 private:
  void Flush();
  std::string path_;
  int fd_ = -1;
  uint64_t offset_ = 0;
  std::vector<std::byte> buf_;
};

// One record as seen in the mapped file: no copy is made.
struct RecordView {
  const std::byte* data = nullptr;  // points into the read-only mapping
  size_t size = 0;
  uint64_t index = 0;                 // global index in the Dataset
  const std::string* file = nullptr;  // shard path
  uint64_t offset = 0;                // of the record's first byte in `file`
  uint32_t masked_data_crc = 0;       // as stored in the file
};

// A set of TFRecord shards, each mmap'd read-only, with an index of every
// record (built at open by walking the length headers, whose CRCs are checked:
// a bad header or a truncated file is a RecordError naming file and offset).
// Data CRCs are checked by the transform (VerifyRecordCrc), per sample.
// Record i of the dataset is record i of the concatenation of the shards in
// the order given. Mappings are inherited by forked workers.
class Dataset {
 public:
  explicit Dataset(const std::vector<std::string>& files);
  ~Dataset();
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  uint64_t size() const { return records_.size(); }
  RecordView Get(uint64_t index) const;                  // throws std::out_of_range
  uint64_t total_bytes() const { return total_bytes_; }  // sum of record data sizes
  const std::vector<std::string>& files() const { return files_; }

 private:
  struct Shard {
    const std::byte* base = nullptr;
    size_t size = 0;
  };
  struct RecordLoc {
    uint64_t offset;
    uint64_t size;
    uint32_t shard;
  };
  std::vector<std::string> files_;
  std::vector<Shard> shards_;
  std::vector<RecordLoc> records_;
  uint64_t total_bytes_ = 0;
};

// Throws RecordError(file, offset, "data CRC mismatch ...") if the record's
// data does not match its stored CRC.
void VerifyRecordCrc(const RecordView& r);

// Lists the TFRecord files of a directory (names ending in .tfrecord, sorted),
// or returns {path} if `path` is a file.
std::vector<std::string> ListShards(const std::string& path);

// `refloader make-dataset`: writes `records` records in `shards` files named
// DIR/data-SSSSS-of-NNNNN.tfrecord. Record sizes follow `size_dist`:
//   "fixed:N"           every record N bytes
//   "uniform:MIN:MAX"   uniform in [MIN, MAX]
//   "lognormal:MEDIAN:SIGMA"  (clamped to [8, 64 MiB])
// Sizes accept K/M suffixes (KiB/MiB). Contents are reproducible from `seed`:
// the first 8 bytes of record i are i (uint64 LE), the rest pseudo-random.
struct DatasetSpec {
  std::string dir;
  uint64_t records = 10000;
  std::string size_dist = "fixed:4K";
  uint64_t seed = 1;
  uint32_t shards = 1;
};
// Returns the shard paths written.
std::vector<std::string> MakeDataset(const DatasetSpec& spec);

// Parses "4096", "4K", "1M" (binary units); throws std::invalid_argument. The one size
// parser, shared with every command line (flags/).
using ::forkguard::flags::ParseSize;

}  // namespace forkguard::loader
