#include "loader/tfrecord.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "loader/crc32c.h"

namespace forkguard::loader {
namespace {

std::system_error SysError(const std::string& what) {
  return std::system_error(errno, std::generic_category(), what);
}

uint64_t Load64(const std::byte* p) {
  uint64_t v;
  memcpy(&v, p, 8);  // TFRecord is little endian, as is every host we build for
  return v;
}
uint32_t Load32(const std::byte* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

// splitmix64: tiny, fast, good enough for generated test data.
uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

RecordError::RecordError(std::string file, uint64_t offset, const std::string& why)
    : std::runtime_error(file + ": record at offset " + std::to_string(offset) + ": " + why),
      file_(std::move(file)),
      offset_(offset) {}

// --- writer ---------------------------------------------------------------

TfRecordWriter::TfRecordWriter(const std::string& path) : path_(path) {
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw SysError("open " + path);
}

TfRecordWriter::~TfRecordWriter() {
  try {
    Close();
  } catch (...) {
  }
}

void TfRecordWriter::Write(std::span<const std::byte> data) {
  if (fd_ < 0) throw std::logic_error("TfRecordWriter::Write after Close");
  std::byte header[kTfRecordHeaderBytes];
  uint64_t len = data.size();
  memcpy(header, &len, 8);
  uint32_t len_crc = MaskCrc32c(Crc32c(header, 8));
  memcpy(header + 8, &len_crc, 4);
  uint32_t data_crc = MaskCrc32c(Crc32c(data.data(), data.size()));
  buf_.insert(buf_.end(), header, header + sizeof header);
  buf_.insert(buf_.end(), data.begin(), data.end());
  const std::byte* c = reinterpret_cast<const std::byte*>(&data_crc);
  buf_.insert(buf_.end(), c, c + 4);
  offset_ += kTfRecordHeaderBytes + data.size() + kTfRecordFooterBytes;
  if (buf_.size() >= (1u << 20)) Flush();
}

void TfRecordWriter::Flush() {
  size_t done = 0;
  while (done < buf_.size()) {
    ssize_t n = write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SysError("write " + path_);
    done += static_cast<size_t>(n);
  }
  buf_.clear();
}

void TfRecordWriter::Close() {
  if (fd_ < 0) return;
  Flush();
  int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) throw SysError("close " + path_);
}

// --- reader ---------------------------------------------------------------

Dataset::Dataset(const std::vector<std::string>& files) : files_(files) {
  auto unmap_all = [this] {
    for (auto& s : shards_)
      if (s.base) munmap(const_cast<std::byte*>(s.base), s.size);
  };
  try {
    for (uint32_t si = 0; si < files_.size(); si++) {
      const std::string& f = files_[si];
      int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw SysError("open " + f);
      struct stat st;
      if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        throw SysError("fstat " + f);
      }
      Shard sh;
      sh.size = static_cast<size_t>(st.st_size);
      if (sh.size > 0) {
        void* p = mmap(nullptr, sh.size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
          int e = errno;
          close(fd);
          errno = e;
          throw SysError("mmap " + f);
        }
        sh.base = static_cast<const std::byte*>(p);
      }
      close(fd);
      shards_.push_back(sh);
      // Index: walk the headers. Touches one page per record, never the data.
      uint64_t off = 0;
      while (off < sh.size) {
        if (sh.size - off < kTfRecordHeaderBytes + kTfRecordFooterBytes)
          throw RecordError(f, off,
                            "truncated record header (" + std::to_string(sh.size - off) +
                                " bytes left in the file)");
        uint64_t len = Load64(sh.base + off);
        uint32_t want = Load32(sh.base + off + 8);
        uint32_t got = MaskCrc32c(Crc32c(sh.base + off, 8));
        if (want != got) {
          char msg[128];
          snprintf(msg, sizeof msg, "length CRC mismatch (stored 0x%08x, computed 0x%08x)", want,
                   got);
          throw RecordError(f, off, msg);
        }
        uint64_t room = sh.size - off - kTfRecordHeaderBytes - kTfRecordFooterBytes;
        if (len > room)
          throw RecordError(f, off,
                            "record length " + std::to_string(len) + " runs past the end " +
                                "of the file (" + std::to_string(room) + " bytes left)");
        records_.push_back(RecordLoc{off, len, si});
        total_bytes_ += len;
        off += kTfRecordHeaderBytes + len + kTfRecordFooterBytes;
      }
    }
  } catch (...) {
    unmap_all();
    throw;
  }
}

Dataset::~Dataset() {
  for (auto& s : shards_)
    if (s.base) munmap(const_cast<std::byte*>(s.base), s.size);
}

RecordView Dataset::Get(uint64_t index) const {
  if (index >= records_.size())
    throw std::out_of_range("record index " + std::to_string(index) + " >= dataset size " +
                            std::to_string(records_.size()));
  const RecordLoc& loc = records_[index];
  const Shard& sh = shards_[loc.shard];
  RecordView r;
  r.data = sh.base + loc.offset + kTfRecordHeaderBytes;
  r.size = loc.size;
  r.index = index;
  r.file = &files_[loc.shard];
  r.offset = loc.offset;
  r.masked_data_crc = Load32(r.data + loc.size);
  return r;
}

void VerifyRecordCrc(const RecordView& r) {
  uint32_t got = MaskCrc32c(Crc32c(r.data, r.size));
  if (got != r.masked_data_crc) {
    char msg[128];
    snprintf(msg, sizeof msg, "data CRC mismatch (stored 0x%08x, computed 0x%08x, %zu bytes)",
             r.masked_data_crc, got, r.size);
    throw RecordError(r.file ? *r.file : std::string("?"), r.offset, msg);
  }
}

std::vector<std::string> ListShards(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) throw SysError("stat " + path);
  if (!S_ISDIR(st.st_mode)) return {path};
  DIR* d = opendir(path.c_str());
  if (!d) throw SysError("opendir " + path);
  std::vector<std::string> out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    const std::string ext = ".tfrecord";
    if (n.size() > ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0)
      out.push_back(path + "/" + n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  if (out.empty()) throw std::invalid_argument("no *.tfrecord files in " + path);
  return out;
}

namespace {

struct SizeDist {
  enum { kFixed, kUniform, kLogNormal } kind = kFixed;
  uint64_t a = 0, b = 0;
  double sigma = 0;

  static SizeDist Parse(const std::string& s) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
      size_t c = s.find(':', start);
      parts.push_back(s.substr(start, c == std::string::npos ? std::string::npos : c - start));
      if (c == std::string::npos) break;
      start = c + 1;
    }
    SizeDist d;
    if (parts[0] == "fixed" && parts.size() == 2) {
      d.a = ParseSize(parts[1]);
    } else if (parts[0] == "uniform" && parts.size() == 3) {
      d.kind = kUniform;
      d.a = ParseSize(parts[1]);
      d.b = ParseSize(parts[2]);
      if (d.b < d.a) throw std::invalid_argument("uniform size: MAX < MIN in '" + s + "'");
    } else if (parts[0] == "lognormal" && parts.size() == 3) {
      d.kind = kLogNormal;
      d.a = ParseSize(parts[1]);
      d.sigma = std::stod(parts[2]);
    } else if (parts.size() == 1) {
      d.a = ParseSize(parts[0]);  // a bare size means fixed
    } else {
      throw std::invalid_argument("bad size distribution '" + s +
                                  "' (fixed:N, uniform:MIN:MAX, lognormal:MEDIAN:SIGMA)");
    }
    return d;
  }

  uint64_t Draw(uint64_t& rng) const {
    switch (kind) {
      case kFixed:
        return a;
      case kUniform:
        return a + SplitMix(rng) % (b - a + 1);
      case kLogNormal: {
        double u1 = (static_cast<double>(SplitMix(rng) >> 11) + 0.5) / 9007199254740992.0;
        double u2 = static_cast<double>(SplitMix(rng) >> 11) / 9007199254740992.0;
        double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
        double v = static_cast<double>(a) * std::exp(sigma * z);
        return static_cast<uint64_t>(std::clamp(v, 8.0, 64.0 * 1024 * 1024));
      }
    }
    return a;
  }
};

}  // namespace

std::vector<std::string> MakeDataset(const DatasetSpec& spec) {
  if (spec.shards == 0) throw std::invalid_argument("shards must be >= 1");
  SizeDist dist = SizeDist::Parse(spec.size_dist);
  if (mkdir(spec.dir.c_str(), 0755) != 0 && errno != EEXIST) throw SysError("mkdir " + spec.dir);
  std::vector<std::string> paths;
  uint64_t size_rng = spec.seed * 0x2545f4914f6cdd1dull + 1;
  std::vector<std::byte> rec;
  for (uint32_t s = 0; s < spec.shards; s++) {
    char name[64];
    snprintf(name, sizeof name, "/data-%05u-of-%05u.tfrecord", s, spec.shards);
    paths.push_back(spec.dir + name);
    TfRecordWriter w(paths.back());
    uint64_t begin = spec.records * s / spec.shards, end = spec.records * (s + 1) / spec.shards;
    for (uint64_t i = begin; i < end; i++) {
      uint64_t n = dist.Draw(size_rng);
      rec.resize(n);
      uint64_t content_rng = spec.seed ^ (i * 0x9e3779b97f4a7c15ull);
      for (uint64_t o = 0; o < n; o += 8) {
        uint64_t v = o == 0 ? i : SplitMix(content_rng);
        memcpy(rec.data() + o, &v, std::min<uint64_t>(8, n - o));
      }
      w.Write(rec);
    }
    w.Close();
  }
  return paths;
}

}  // namespace forkguard::loader
