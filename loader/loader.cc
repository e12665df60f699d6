// The loader's parent side: slot bookkeeping, dispatch, in-order delivery,
// failure detection and shutdown. The worker side is loader/worker.cc.
//
// Bookkeeping (after PyTorch's _MultiProcessingDataLoaderIter):
//   dispatch cursor  (disp_epoch_, disp_batch_): next batch to hand a worker
//   receive cursor   (recv_epoch_, recv_batch_): next batch Next() returns;
//                    this, never the dispatch cursor, is the saved progress
//   pending_         dispatched items in delivery order (batches and markers)
//   tasks_           seq -> which slot/worker holds the batch, done or not;
//                    abandoned tasks (BeginEpoch elsewhere) stay here until
//                    their worker finishes, then free their slot
//   slots_           free / in flight / held by the consumer
//
// Shutdown protocol: close every parent-side socket (a worker reading EOF
// exits 0), wait up to kShutdownGraceMs, then SIGKILL whatever is left and
// waitpid() every worker pid (never waitpid(-1): other children are not ours).
#include "loader/loader.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <deque>
#include <map>
#include <system_error>

#include "loader/crc32c.h"
#include "loader/worker.h"

namespace forkguard::loader {

using internal::ResultMsg;
using internal::SlotHeader;
using internal::TaskMsg;
using internal::WorkerStatus;

namespace {

constexpr int kShutdownGraceMs = 500;

size_t PageSize() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}
size_t RoundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

std::system_error SysError(const std::string& what) {
  return std::system_error(errno, std::generic_category(), what);
}

// Shared memory with no name anywhere: a memfd, mapped MAP_SHARED so forked
// workers write into the very pages the parent (and later the HCA) sees.
struct SharedMemory {
  int fd = -1;
  std::byte* base = nullptr;
  size_t size = 0;

  void Create(const char* name, size_t bytes) {
    size = RoundUp(bytes == 0 ? 1 : bytes, PageSize());
    fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) throw SysError("memfd_create");
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) throw SysError("ftruncate memfd");
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) throw SysError("mmap memfd");
    base = static_cast<std::byte*>(p);
  }
  ~SharedMemory() {
    if (base) munmap(base, size);
    if (fd >= 0) close(fd);
  }
};

uint64_t Fnv(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  return h;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return std::string("signal ") + std::to_string(sig) + " (SIG" + (abbrev ? abbrev : "?") + ")";
}

}  // namespace

Transform DecodeTransform() {
  return [](const RecordView& r, std::span<std::byte> out) {
    size_t n = std::min(r.size, out.size());
    memcpy(out.data(), r.data, n);
    if (n < out.size()) memset(out.data() + n, 0, out.size() - n);
  };
}

Transform VerifyAndDecodeTransform() {
  return [](const RecordView& r, std::span<std::byte> out) {
    // Copy first, then checksum the copy: it is still in cache, so the record
    // is read from memory once (measured faster than checksumming the source
    // and copying, or interleaving the two in chunks).
    size_t n = std::min(r.size, out.size());
    memcpy(out.data(), r.data, n);
    uint32_t crc = Crc32c(out.data(), n);
    if (n < r.size) crc = Crc32c(r.data + n, r.size - n, crc);     // truncated: the rest
    if (MaskCrc32c(crc) != r.masked_data_crc) VerifyRecordCrc(r);  // throws, naming file/offset
    if (n < out.size()) memset(out.data() + n, 0, out.size() - n);
  };
}

// --- LoaderState ------------------------------------------------------------

std::string LoaderState::ToString() const {
  char buf[128];
  snprintf(buf, sizeof buf, "refloader-state/1 epoch=%" PRIu64 " batch=%" PRIu64 " fp=%016" PRIx64,
           epoch, batch, fingerprint);
  return buf;
}

LoaderState LoaderState::Parse(const std::string& s) {
  LoaderState st;
  char tail;
  if (sscanf(s.c_str(), "refloader-state/1 epoch=%" SCNu64 " batch=%" SCNu64 " fp=%" SCNx64 " %c",
             &st.epoch, &st.batch, &st.fingerprint, &tail) != 3)
    throw std::invalid_argument("not a refloader state: '" + s + "'");
  return st;
}

// --- Impl -------------------------------------------------------------------

class Loader::Impl {
 public:
  explicit Impl(LoaderOptions o);
  ~Impl() { Shutdown(); }

  void Start();
  LoaderItem Next();
  void Release(const Batch& b);
  void BeginEpoch(uint64_t epoch, uint64_t batch);
  void Resume(const LoaderState& st);
  LoaderState State() const { return {recv_epoch_, recv_batch_, fingerprint_}; }
  void Shutdown();

  LoaderOptions opts_;
  Dataset dataset_;
  SlotRegion region_;
  uint64_t samples_per_epoch_ = 0;
  uint64_t batches_per_epoch_ = 0;
  uint64_t fingerprint_ = 0;

  struct Worker {
    pid_t pid = -1;
    int sock = -1;
    uint32_t outstanding = 0;
    std::deque<uint64_t> queue;  // seqs sent, in the order the worker runs them
    int64_t last_progress_ms = 0;
    uint64_t last_progress_count = 0;
    bool reaped = false;
  };
  std::vector<Worker> workers_;

 private:
  enum class SlotUse { kFree, kInFlight, kHeld };
  struct Task {
    uint64_t epoch, batch;
    uint32_t slot;
    int worker;
    bool done = false;
    bool abandoned = false;
  };
  struct Pending {
    bool marker;
    uint64_t epoch;
    uint64_t seq;  // batches only
  };

  SlotHeader* Header(uint32_t slot) {
    return reinterpret_cast<SlotHeader*>(control_.base + slot * header_stride_);
  }
  WorkerStatus* Status(size_t w) {
    return reinterpret_cast<WorkerStatus*>(control_.base + status_offset_) + w;
  }
  const std::vector<uint64_t>& Order(uint64_t epoch);
  void CheckUsable(const char* what) const;
  void Dispatch();
  bool DispatchOne();
  void PrepareSlot(uint32_t slot, uint64_t epoch, uint64_t batch);
  void RunInline(uint64_t seq);
  void WaitForResults();
  [[noreturn]] void OnWorkerGone(size_t w);
  [[noreturn]] void FailFromResult(size_t w, const ResultMsg& r);
  [[noreturn]] void Fail(std::string what, LoaderError::Info info);
  std::string DescribeSample(int64_t sample) const;
  // " (epoch E, batch B)" of the batch `seq`, or "" when it is not known.
  std::string DescribeTask(uint64_t seq) const;
  // The same for the batch a worker runs now (the first of its queue).
  std::string DescribeCurrentTask(const Worker& wk) const;
  // Closes every channel; after a grace period (none when failing) SIGKILLs
  // the workers still there; reaps them all.
  void KillAndReapAll(bool graceful = true);
  void Abandon();

  SharedMemory data_, control_;
  size_t header_stride_ = 0, status_offset_ = 0;
  pid_t owner_ = getpid();
  bool started_ = false;
  bool shut_down_ = false;
  std::exception_ptr failed_;

  uint64_t disp_epoch_ = 0, disp_batch_ = 0;
  uint64_t recv_epoch_ = 0, recv_batch_ = 0;
  uint64_t next_seq_ = 0;
  std::deque<Pending> pending_;
  std::map<uint64_t, Task> tasks_;
  std::vector<SlotUse> slots_;
  std::vector<uint64_t> held_seq_;  // per slot: seq (= Batch::delivery) the consumer holds
  uint32_t rr_ = 0;                 // round-robin cursor over workers
  std::map<uint64_t, std::vector<uint64_t>> orders_;  // a few recent epochs
};

Loader::Impl::Impl(LoaderOptions o) : opts_(std::move(o)), dataset_(opts_.files) {
  if (opts_.batch_size == 0) throw std::invalid_argument("batch_size must be >= 1");
  if (opts_.sample_bytes == 0) throw std::invalid_argument("sample_bytes must be >= 1");
  if (opts_.prefetch_per_worker == 0)
    throw std::invalid_argument("prefetch_per_worker must be >= 1");
  if (!opts_.transform) opts_.transform = VerifyAndDecodeTransform();
  samples_per_epoch_ = EpochLength(opts_.sampler, dataset_.size());
  batches_per_epoch_ = opts_.drop_last
                           ? samples_per_epoch_ / opts_.batch_size
                           : (samples_per_epoch_ + opts_.batch_size - 1) / opts_.batch_size;
  uint64_t fp = 0xcbf29ce484222325ull;
  for (uint64_t v :
       {dataset_.size(), uint64_t(opts_.sampler.kind), opts_.sampler.seed,
        uint64_t(opts_.sampler.rank), uint64_t(opts_.sampler.world),
        uint64_t(opts_.sampler.shuffle), uint64_t(opts_.batch_size), uint64_t(opts_.drop_last)})
    fp = Fnv(fp, v);
  fingerprint_ = fp;

  uint32_t n_slots = opts_.num_slots;
  if (n_slots == 0)
    n_slots = std::max<uint32_t>(1, opts_.num_workers) * opts_.prefetch_per_worker + 2;
  region_.num_slots = n_slots;
  region_.slot_capacity = size_t{opts_.batch_size} * opts_.sample_bytes;
  region_.slot_stride = RoundUp(region_.slot_capacity, PageSize());
  data_.Create("refloader-slots", region_.slot_stride * n_slots);
  region_.base = data_.base;
  region_.size = data_.size;
  region_.memfd = data_.fd;

  header_stride_ = RoundUp(sizeof(SlotHeader) + 8 * size_t{opts_.batch_size}, 64);
  status_offset_ = RoundUp(header_stride_ * n_slots, 64);
  control_.Create("refloader-control",
                  status_offset_ + sizeof(WorkerStatus) * std::max<uint32_t>(1, opts_.num_workers));
  for (uint32_t w = 0; w < std::max<uint32_t>(1, opts_.num_workers); w++) {
    new (Status(w)) WorkerStatus{};
    Status(w)->sample.store(-1);
  }
  slots_.assign(n_slots, SlotUse::kFree);
  held_seq_.assign(n_slots, 0);
}

void Loader::Impl::Start() {
  if (started_) throw std::logic_error("Loader::Start called twice");
  if (shut_down_) throw std::logic_error("Loader::Start after Shutdown");
  internal::CheckBeforeForkingWorkers(opts_.fork_check, opts_.num_workers);
  started_ = true;
  workers_.resize(opts_.num_workers);
  std::vector<int> parent_fds;
  for (uint32_t w = 0; w < opts_.num_workers; w++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      int e = errno;
      KillAndReapAll();
      errno = e;
      throw SysError("socketpair");
    }
    internal::WorkerSetup setup{};
    setup.id = static_cast<int>(w);
    setup.sock = sv[1];
    setup.close_fds = parent_fds.data();
    setup.n_close_fds = parent_fds.size();
    setup.dataset = &dataset_;
    setup.transform = &opts_.transform;
    setup.data_base = data_.base;
    setup.slot_stride = region_.slot_stride;
    setup.control_base = control_.base;
    setup.header_stride = header_stride_;
    setup.status = Status(w);
    setup.sample_bytes = opts_.sample_bytes;
    setup.parent = getpid();
    fflush(nullptr);  // do not let the child inherit (and flush twice) buffered output
    pid_t pid = fork();
    if (pid < 0) {
      int e = errno;
      close(sv[0]);
      close(sv[1]);
      KillAndReapAll();
      errno = e;
      throw SysError("fork of loader worker " + std::to_string(w));
    }
    if (pid == 0) {
      close(sv[0]);
      internal::WorkerMain(setup);
    }
    close(sv[1]);
    workers_[w].pid = pid;
    workers_[w].sock = sv[0];
    workers_[w].last_progress_ms = NowMs();
    parent_fds.push_back(sv[0]);
  }
  Dispatch();
}

const std::vector<uint64_t>& Loader::Impl::Order(uint64_t epoch) {
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
  while (orders_.size() >= 3) orders_.erase(orders_.begin());
  return orders_[epoch] = EpochOrder(opts_.sampler, dataset_.size(), epoch);
}

void Loader::Impl::PrepareSlot(uint32_t slot, uint64_t epoch, uint64_t batch) {
  const std::vector<uint64_t>& order = Order(epoch);
  uint64_t begin = batch * opts_.batch_size;
  uint64_t end = std::min<uint64_t>(begin + opts_.batch_size, order.size());
  SlotHeader* h = Header(slot);
  h->epoch = epoch;
  h->batch = batch;
  h->count = end - begin;
  for (uint64_t i = begin; i < end; i++) h->samples[i - begin] = order[i];
}

// Queues one more item (a marker, or a batch sent to a worker). False when
// nothing can be dispatched now.
bool Loader::Impl::DispatchOne() {
  // Bound the lookahead (matters only for empty epochs, which are all markers).
  if (pending_.size() >= slots_.size() + 2) return false;
  if (disp_batch_ >= batches_per_epoch_) {
    pending_.push_back({true, disp_epoch_, 0});
    disp_epoch_++;
    disp_batch_ = 0;
    return true;
  }
  uint32_t slot = 0;
  while (slot < slots_.size() && slots_[slot] != SlotUse::kFree) slot++;
  if (slot == slots_.size()) return false;
  int worker = -1;
  if (opts_.num_workers > 0) {
    for (uint32_t k = 0; k < opts_.num_workers; k++) {
      uint32_t w = (rr_ + k) % opts_.num_workers;
      if (workers_[w].outstanding < opts_.prefetch_per_worker) {
        worker = static_cast<int>(w);
        break;
      }
    }
    if (worker < 0) return false;
    rr_ = (static_cast<uint32_t>(worker) + 1) % opts_.num_workers;
  } else {
    // In-process: build lazily, one batch when the consumer needs it.
    for (const Pending& p : pending_)
      if (!p.marker) return false;
  }
  uint64_t seq = next_seq_++;
  PrepareSlot(slot, disp_epoch_, disp_batch_);
  slots_[slot] = SlotUse::kInFlight;
  tasks_[seq] = Task{disp_epoch_, disp_batch_, slot, worker};
  pending_.push_back({false, disp_epoch_, seq});
  disp_batch_++;
  if (worker < 0) {
    RunInline(seq);
    return true;
  }
  Worker& wk = workers_[worker];
  TaskMsg msg{seq, slot, 0};
  if (wk.outstanding == 0) {
    wk.last_progress_ms = NowMs();
    wk.last_progress_count = Status(worker)->progress.load();
  }
  wk.outstanding++;
  wk.queue.push_back(seq);
  // If this fails the worker is gone: the next poll sees its channel close and
  // reports it with its exit status. Not throwing here keeps Release() and the
  // bookkeeping of delivered batches simple.
  (void)send(wk.sock, &msg, sizeof msg, MSG_NOSIGNAL);
  return true;
}

void Loader::Impl::Dispatch() {
  while (DispatchOne()) {
  }
}

void Loader::Impl::RunInline(uint64_t seq) {
  Task& t = tasks_[seq];
  try {
    internal::BuildBatch(dataset_, opts_.transform, *Header(t.slot),
                         data_.base + t.slot * region_.slot_stride, opts_.sample_bytes, Status(0));
  } catch (const std::exception& e) {
    LoaderError::Info info;
    info.pid = getpid();
    info.sample = Status(0)->sample.load();
    info.message = e.what();
    Status(0)->sample.store(-1);
    Fail("refloader: transform failed in the main process on " + DescribeSample(info.sample) +
             ": " + info.message,
         info);
  }
  t.done = true;
}

std::string Loader::Impl::DescribeSample(int64_t sample) const {
  if (sample < 0) return "no sample (idle)";
  std::string s = "sample " + std::to_string(sample);
  if (static_cast<uint64_t>(sample) < dataset_.size()) {
    RecordView r = dataset_.Get(static_cast<uint64_t>(sample));
    s += " (" + *r.file + " offset " + std::to_string(r.offset) + ")";
  }
  return s;
}

void Loader::Impl::CheckUsable(const char* what) const {
  if (failed_) std::rethrow_exception(failed_);
  if (shut_down_) throw std::logic_error(std::string("Loader::") + what + " after Shutdown");
  if (!started_) throw std::logic_error(std::string("Loader::") + what + " before Start");
}

LoaderItem Loader::Impl::Next() {
  CheckUsable("Next");
  for (;;) {
    Dispatch();
    if (!pending_.empty()) {
      Pending p = pending_.front();
      if (p.marker) {
        pending_.pop_front();
        recv_epoch_ = p.epoch + 1;
        recv_batch_ = 0;
        LoaderItem item;
        item.kind = LoaderItem::kEpochEnd;
        item.epoch = p.epoch;
        return item;
      }
      auto it = tasks_.find(p.seq);
      if (it->second.done) {
        Task t = it->second;
        tasks_.erase(it);
        pending_.pop_front();
        slots_[t.slot] = SlotUse::kHeld;
        held_seq_[t.slot] = p.seq;
        recv_epoch_ = t.epoch;
        recv_batch_ = t.batch + 1;
        const SlotHeader* h = Header(t.slot);
        LoaderItem item;
        item.kind = LoaderItem::kBatch;
        item.epoch = t.epoch;
        Batch& b = item.batch;
        b.offset = t.slot * region_.slot_stride;
        b.data = data_.base + b.offset;
        b.bytes = h->count * opts_.sample_bytes;
        b.slot = t.slot;
        b.epoch = t.epoch;
        b.index = t.batch;
        b.samples = std::span<const uint64_t>(h->samples, h->count);
        b.sample_bytes = opts_.sample_bytes;
        b.delivery = p.seq;
        // Nothing after this point may throw: the batch now counts as delivered.
        return item;
      }
    }
    bool in_flight = false;
    for (const auto& [seq, t] : tasks_) in_flight |= !t.done;
    if (!in_flight) {
      LoaderError::Info info;
      info.pid = getpid();
      throw LoaderError("refloader: every batch slot (" + std::to_string(slots_.size()) +
                            ") is held by the consumer: Release() batches before asking for more",
                        info);
    }
    WaitForResults();
  }
}

void Loader::Impl::WaitForResults() {
  std::vector<pollfd> fds;
  std::vector<size_t> who;
  int64_t now = NowMs();
  int64_t deadline = INT64_MAX;
  for (size_t w = 0; w < workers_.size(); w++) {
    Worker& wk = workers_[w];
    if (wk.sock < 0) continue;
    fds.push_back({wk.sock, POLLIN, 0});
    who.push_back(w);
    if (wk.outstanding > 0) deadline = std::min(deadline, wk.last_progress_ms + opts_.timeout_ms);
  }
  int timeout = deadline == INT64_MAX ? -1 : static_cast<int>(std::max<int64_t>(0, deadline - now));
  int n = poll(fds.data(), fds.size(), timeout);
  if (n < 0 && errno != EINTR) throw SysError("poll");
  now = NowMs();
  for (size_t i = 0; n > 0 && i < fds.size(); i++) {
    if (fds[i].revents == 0) continue;
    size_t w = who[i];
    Worker& wk = workers_[w];
    ResultMsg r{};
    ssize_t got = recv(wk.sock, &r, sizeof r, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (got != static_cast<ssize_t>(sizeof r)) OnWorkerGone(w);  // EOF: it died
    if (!r.ok) FailFromResult(w, r);
    wk.outstanding--;
    if (!wk.queue.empty()) wk.queue.pop_front();
    wk.last_progress_ms = now;
    wk.last_progress_count = Status(w)->progress.load();
    auto it = tasks_.find(r.seq);
    if (it == tasks_.end()) continue;
    if (it->second.abandoned) {
      slots_[it->second.slot] = SlotUse::kFree;
      tasks_.erase(it);
    } else {
      it->second.done = true;
    }
  }
  // Hang check: busy with no finished sample for timeout_ms.
  for (size_t w = 0; w < workers_.size(); w++) {
    Worker& wk = workers_[w];
    if (wk.sock < 0 || wk.outstanding == 0) continue;
    uint64_t count = Status(w)->progress.load();
    if (count != wk.last_progress_count) {
      wk.last_progress_count = count;
      wk.last_progress_ms = now;
    } else if (now - wk.last_progress_ms >= opts_.timeout_ms) {
      LoaderError::Info info;
      info.worker = static_cast<int>(w);
      info.pid = wk.pid;
      info.hung = true;
      info.sample = Status(w)->sample.load();
      Fail("refloader: worker " + std::to_string(w) + " (pid " + std::to_string(wk.pid) +
               ") made no progress for " + std::to_string(opts_.timeout_ms) + " ms (timeout) on " +
               DescribeSample(info.sample) + DescribeCurrentTask(wk) + "; killed it",
           info);
    }
  }
}

void Loader::Impl::FailFromResult(size_t w, const ResultMsg& r) {
  Worker& wk = workers_[w];
  LoaderError::Info info;
  info.worker = static_cast<int>(w);
  info.pid = wk.pid;
  info.sample = r.sample;
  info.message = r.message;
  Fail("refloader: worker " + std::to_string(w) + " (pid " + std::to_string(wk.pid) +
           ") failed on " + DescribeSample(r.sample) + DescribeTask(r.seq) + ": " + r.message,
       info);
}

void Loader::Impl::OnWorkerGone(size_t w) {
  Worker& wk = workers_[w];
  // A worker whose transform failed sends why before exiting: prefer that.
  ResultMsg last{};
  while (recv(wk.sock, &last, sizeof last, MSG_DONTWAIT) == static_cast<ssize_t>(sizeof last))
    if (!last.ok) FailFromResult(w, last);
  LoaderError::Info info;
  info.worker = static_cast<int>(w);
  info.pid = wk.pid;
  info.sample = Status(w)->sample.load();
  // The socket closed, so the process is exiting: wait for it, bounded.
  int status = 0;
  pid_t r = 0;
  for (int i = 0; i < 2000 && (r = waitpid(wk.pid, &status, WNOHANG)) == 0; i++) usleep(1000);
  std::string how = "closed its channel";
  if (r == wk.pid) {
    wk.reaped = true;
    if (WIFSIGNALED(status)) {
      info.signal = WTERMSIG(status);
      how = "was killed by " + SignalName(info.signal);
    } else if (WIFEXITED(status)) {
      info.exit_status = WEXITSTATUS(status);
      how = "exited with status " + std::to_string(info.exit_status);
    }
  }
  Fail("refloader: worker " + std::to_string(w) + " (pid " + std::to_string(wk.pid) + ") " + how +
           " while processing " + DescribeSample(info.sample) + DescribeCurrentTask(wk),
       info);
}

std::string Loader::Impl::DescribeTask(uint64_t seq) const {
  auto it = tasks_.find(seq);
  if (it == tasks_.end()) return "";
  return " (epoch " + std::to_string(it->second.epoch) + ", batch " +
         std::to_string(it->second.batch) + ")";
}

std::string Loader::Impl::DescribeCurrentTask(const Worker& wk) const {
  return wk.queue.empty() ? "" : DescribeTask(wk.queue.front());
}

void Loader::Impl::Fail(std::string what, LoaderError::Info info) {
  KillAndReapAll(/*graceful=*/false);
  failed_ = std::make_exception_ptr(LoaderError(what, info));
  std::rethrow_exception(failed_);
}

void Loader::Impl::KillAndReapAll(bool graceful) {
  if (getpid() != owner_) return;  // a forked copy of the parent owns no workers
  for (Worker& wk : workers_) {
    if (wk.sock >= 0) {
      close(wk.sock);
      wk.sock = -1;
    }
  }
  int64_t give_up = NowMs() + (graceful ? kShutdownGraceMs : 0);
  for (Worker& wk : workers_) {
    if (wk.pid <= 0 || wk.reaped) continue;
    int status;
    while (waitpid(wk.pid, &status, WNOHANG) == 0) {
      if (NowMs() >= give_up) {
        kill(wk.pid, SIGKILL);
        waitpid(wk.pid, &status, 0);
        break;
      }
      usleep(1000);
    }
    wk.reaped = true;
  }
}

void Loader::Impl::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  KillAndReapAll();
}

void Loader::Impl::Release(const Batch& b) {
  if (b.slot >= slots_.size() || slots_[b.slot] != SlotUse::kHeld ||
      held_seq_[b.slot] != b.delivery) {
    LoaderError::Info info;
    info.pid = getpid();
    throw LoaderError("refloader: Release of a batch that is not held (slot " +
                          std::to_string(b.slot) + ", epoch " + std::to_string(b.epoch) +
                          ", batch " + std::to_string(b.index) + "): released twice?",
                      info);
  }
  slots_[b.slot] = SlotUse::kFree;
  // Hand the slot to a worker now rather than at the next Next(): the consumer
  // may work a while before asking. In-process builds stay lazy (in Next()).
  if (started_ && !shut_down_ && !failed_ && opts_.num_workers > 0) Dispatch();
}

void Loader::Impl::Abandon() {
  for (const Pending& p : pending_) {
    if (p.marker) continue;
    auto it = tasks_.find(p.seq);
    if (it->second.done) {
      slots_[it->second.slot] = SlotUse::kFree;
      tasks_.erase(it);
    } else {
      it->second.abandoned = true;  // its slot frees when the worker answers
    }
  }
  pending_.clear();
}

void Loader::Impl::BeginEpoch(uint64_t epoch, uint64_t batch) {
  if (failed_) std::rethrow_exception(failed_);
  if (batch > batches_per_epoch_)
    throw std::invalid_argument("BeginEpoch: batch " + std::to_string(batch) + " > " +
                                std::to_string(batches_per_epoch_) + " batches per epoch");
  // Already there: keep everything prefetched (resetting twice, or resetting a
  // freshly started loader, must not throw batches away).
  if (epoch == recv_epoch_ && batch == recv_batch_) return;
  // At the end of epoch E (marker not yet taken), (E + 1, 0) is the same place.
  if (recv_batch_ == batches_per_epoch_ && epoch == recv_epoch_ + 1 && batch == 0) {
    if (!pending_.empty() && pending_.front().marker) {
      pending_.pop_front();
    } else {
      disp_epoch_ = epoch;
      disp_batch_ = 0;
    }
    recv_epoch_ = epoch;
    recv_batch_ = 0;
    return;
  }
  Abandon();
  recv_epoch_ = disp_epoch_ = epoch;
  recv_batch_ = disp_batch_ = batch;
  if (started_ && !shut_down_) Dispatch();
}

void Loader::Impl::Resume(const LoaderState& st) {
  if (st.fingerprint != fingerprint_)
    throw std::invalid_argument(
        "Loader::Resume: state was saved with a different dataset size, sampler or batching");
  BeginEpoch(st.epoch, st.batch);
}

// --- Loader -------------------------------------------------------------------

Loader::Loader(LoaderOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Loader::~Loader() = default;
void Loader::Start() { impl_->Start(); }
const SlotRegion& Loader::slot_region() const { return impl_->region_; }
const Dataset& Loader::dataset() const { return impl_->dataset_; }
const LoaderOptions& Loader::options() const { return impl_->opts_; }
uint64_t Loader::batches_per_epoch() const { return impl_->batches_per_epoch_; }
uint64_t Loader::samples_per_epoch() const { return impl_->samples_per_epoch_; }
std::vector<pid_t> Loader::worker_pids() const {
  std::vector<pid_t> p;
  for (const auto& w : impl_->workers_) p.push_back(w.pid);
  return p;
}
LoaderItem Loader::Next() { return impl_->Next(); }
void Loader::Release(const Batch& b) { impl_->Release(b); }
void Loader::BeginEpoch(uint64_t epoch, uint64_t batch) { impl_->BeginEpoch(epoch, batch); }
void Loader::Resume(const LoaderState& s) { impl_->Resume(s); }
LoaderState Loader::state() const { return impl_->State(); }
void Loader::Shutdown() { impl_->Shutdown(); }

}  // namespace forkguard::loader
