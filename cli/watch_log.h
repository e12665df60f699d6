// The watcher's event logs: one forkguard.event/2 file per process the BPF object reported
// (bpf/watch_events.h records), in the shim's format with "source":"watcher" in the header,
// so that `forkguard report` reads them beside the shim's logs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "api/census.h"
#include "bpf/watch_events.h"
#include "cli/watch_state.h"
#include "facts/fork_rule.h"

namespace forkguard::cli {

class WatchLogs {
 public:
  // `dir`: the log directory; `m`: the machine facts the verdicts rest on; `enforce`: the
  // --enforce level's name.
  WatchLogs(std::string dir, const facts::MachineFacts& m, std::string enforce);
  ~WatchLogs();
  WatchLogs(const WatchLogs&) = delete;
  WatchLogs& operator=(const WatchLogs&) = delete;

  // Creates DIR (0700) when missing and the watcher's own log; false with *error.
  bool Open(std::string* error);
  // The kernel hook that judges forks ("lsm" or "fmod_ret"), for the watcher's own log.
  void SetHook(std::string hook) { hook_ = std::move(hook); }
  // A process that held RDMA state when the watcher started (the census).
  void Preexisting(const api::ProcessFacts& p);
  void Record(const fgw_event& e);
  // `n` more records the ring buffer had no room for.
  void Lost(uint64_t n);
  void Close();

  // What `forkguard ps` shows (cli/watch_state.h): the live processes judged, and whether
  // that changed since the last call of TakeChanged.
  WatchState& state() { return state_; }
  bool TakeChanged() { return std::exchange(changed_, false); }

  int64_t forks() const { return forks_; }
  int64_t refused() const { return refused_; }
  int64_t processes() const { return static_cast<int64_t>(files_opened_); }

 private:
  struct Proc {
    int fd = -1;
    int64_t seq = 0;
    int64_t start_ns = 0;
    int64_t init_ns = -1;  // the first device file opened (realtime ns), -1 unknown
    bool preexisting = false;
    uint64_t madvise_dontfork = 0, madvise_dofork = 0;
  };
  // `first`: the record that names the process first, when it carries its own view of its
  // pid and host name (a device file's opening).
  Proc& ProcFor(uint32_t tgid, const char* comm, int64_t now_ns, const fgw_event* first = nullptr);
  void Write(Proc& p, uint32_t tid, uint32_t tgid, int64_t ts_ns, std::string body);
  void WriteFork(Proc& p, const fgw_event& e, int64_t ts_ns);
  int64_t RealtimeNs(uint64_t boot_ns) const;

  std::string dir_;
  facts::MachineFacts m_;
  std::string enforce_;
  std::string hook_;
  std::string host_;
  int dir_fd_ = -1;
  int64_t boot_to_real_ns_ = 0;
  std::map<uint32_t, Proc> procs_;
  Proc self_;
  uint32_t self_pid_ = 0;
  size_t files_opened_ = 0;
  int64_t forks_ = 0, refused_ = 0;
  WatchState state_;
  bool changed_ = false;
};

}  // namespace forkguard::cli
