#include "cli/watch_log.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "cli/json.h"
#include "formats/event_schema.h"

namespace forkguard::cli {
namespace {

int64_t ClockNs(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string Comm(const char* comm) { return std::string(comm, strnlen(comm, 16)); }

// A /proc file of a process that may be gone at any moment (a read then fails with ESRCH):
// read with read(2), "" when it cannot be.
std::string ReadProc(uint32_t pid, const char* what) {
  std::string path = "/proc/" + std::to_string(pid) + "/" + what;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || out.size() > (1 << 16)) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

// The parent pid from /proc/PID/stat (after the command's closing parenthesis); -1 when gone.
long ParentPid(uint32_t pid) {
  std::string stat = ReadProc(pid, "stat");
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  long ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

// The process's pid in each pid namespace from that of /proc's mount down to its own (its
// /proc/PID/status's NSpid); empty when gone.
std::vector<int64_t> NamespacePids(uint32_t pid) {
  std::string status = ReadProc(pid, "status");
  std::vector<int64_t> pids;
  size_t at = status.find("\nNSpid:");
  if (at == std::string::npos) return pids;
  std::istringstream line(status.substr(at + 7, status.find('\n', at + 1) - at - 7));
  for (int64_t n; line >> n;) pids.push_back(n);
  return pids;
}

// The process's pid in its own pid namespace, when that is not the node's: a process in a
// container; -1 otherwise or when gone.
int64_t PidInItsNamespace(uint32_t pid) {
  std::vector<int64_t> pids = NamespacePids(pid);
  return pids.size() > 1 ? pids.back() : -1;
}

// The watcher's own pid namespace's level (0: the node's).
uint32_t OwnPidNamespaceLevel() {
  size_t n = NamespacePids(static_cast<uint32_t>(getpid())).size();
  return n > 0 ? static_cast<uint32_t>(n - 1) : 0;
}

// The host name the process sees (its UTS namespace's), when that namespace is not the
// watcher's; "" otherwise or when it cannot be read. Read by a thread of its own that joins
// the namespace (setns changes only the calling thread's): the watcher keeps its own.
std::string HostInItsNamespace(uint32_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/ns/uts";
  struct stat theirs {
  }, ours{};
  if (stat(path.c_str(), &theirs) != 0 || stat("/proc/self/ns/uts", &ours) != 0) return "";
  if (theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev) return "";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string host;
  std::thread([&] {
    utsname u{};
    if (setns(fd, CLONE_NEWUTS) == 0 && uname(&u) == 0) host = u.nodename;
  }).join();
  close(fd);
  return host;
}

Json Argv(uint32_t pid) {
  std::string text = ReadProc(pid, "cmdline");
  Json argv = Json::array();
  size_t start = 0;
  while (start < text.size() && argv.size() < 32) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    argv.emplace_back(text.substr(start, std::min<size_t>(end - start, 256)));
    start = end + 1;
  }
  return argv;
}

// Descriptors of /dev/infiniband/uverbs* and rdma_cm in /proc/PID/fd; -1 when unreadable.
void DeviceFds(uint32_t pid, int* uverbs, int* rdma_cm) {
  *uverbs = *rdma_cm = -1;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  *uverbs = *rdma_cm = 0;
  while (dirent* e = readdir(d)) {
    char target[256];
    ssize_t n = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (strncmp(target, "/dev/infiniband/uverbs", 22) == 0) ++*uverbs;
    if (strcmp(target, "/dev/infiniband/rdma_cm") == 0) ++*rdma_cm;
  }
  closedir(d);
}

Json CountOrNull(int n) { return n < 0 ? Json() : Json(n); }

const char* KindName(uint8_t kind) {
  return kind < facts::kMemoryKinds ? facts::MemoryKindName(static_cast<facts::MemoryKind>(kind))
                                    : "unknown";
}

}  // namespace

WatchLogs::WatchLogs(std::string dir, const facts::MachineFacts& m, std::string enforce)
    : dir_(std::move(dir)), m_(m), enforce_(std::move(enforce)) {
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  host_ = host;
  boot_to_real_ns_ = ClockNs(CLOCK_REALTIME) - ClockNs(CLOCK_BOOTTIME);
}

WatchLogs::~WatchLogs() { Close(); }

bool WatchLogs::Open(std::string* error) {
  if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    *error = "cannot create " + dir_ + ": " + strerror(errno);
    return false;
  }
  dir_fd_ = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) {
    *error = "cannot open " + dir_ + ": " + strerror(errno);
    return false;
  }
  self_pid_ = static_cast<uint32_t>(getpid());
  self_ = ProcFor(self_pid_, "forkguard", ClockNs(CLOCK_REALTIME));
  procs_.erase(self_pid_);
  if (self_.fd < 0) {
    *error = "cannot create a log file in " + dir_ + ": " + strerror(errno);
    return false;
  }
  return true;
}

int64_t WatchLogs::RealtimeNs(uint64_t boot_ns) const {
  return static_cast<int64_t>(boot_ns) + boot_to_real_ns_;
}

WatchLogs::Proc& WatchLogs::ProcFor(uint32_t tgid, const char* comm, int64_t now_ns,
                                    const fgw_event* first) {
  auto [it, fresh] = procs_.try_emplace(tgid);
  Proc& p = it->second;
  if (!fresh) return p;
  p.start_ns = now_ns;
  std::string name = "forkguard-watch." + host_ + "." + std::to_string(tgid) + "." +
                     std::to_string(now_ns) + ".jsonl";
  p.fd = openat(dir_fd_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (p.fd < 0) return p;
  if (tgid != self_pid_) ++files_opened_;
  api::ProcessFacts facts = api::GatherProcess(static_cast<pid_t>(tgid), nullptr);
  Json h = Json::object();
  h[schema::kKeySchema] = schema::kEventV2;
  h["event"] = "header";
  h["host"] = host_;
  h["pid"] = tgid;
  long ppid = ParentPid(tgid);
  h["ppid"] = ppid < 0 ? Json() : Json(ppid);
  h["prog"] = facts.comm.empty() ? Comm(comm) : facts.comm;
  h["rank"] = facts.rank ? Json(*facts.rank) : Json();
  h["local_rank"] = Json();
  h["job"] = facts.job && !facts.job->empty() ? Json(*facts.job) : Json();
  h["start_ns"] = now_ns;
  h[schema::kKeySource] = schema::kSourceWatcher;
  // A process in a container: its pid and host name as it sees them (the shim inside it
  // logs those), for the report to pair the two records. From the kernel's record of its
  // first device file, read while it ran; else from /proc now (gone when it has exited).
  int64_t ns_pid = -1;
  std::string ns_host;
  if (first != nullptr && first->type == FGW_DEVICE_OPEN) {
    static const uint32_t own_level = OwnPidNamespaceLevel();
    if (first->ns_level > own_level && first->ns_pid > 0) ns_pid = first->ns_pid;
    std::string seen(first->ns_host, strnlen(first->ns_host, sizeof(first->ns_host)));
    if (!seen.empty() && seen != host_) ns_host = seen;
  } else {
    ns_pid = PidInItsNamespace(tgid);
    ns_host = HostInItsNamespace(tgid);
  }
  if (ns_pid > 0) h[schema::kKeyNsPid] = ns_pid;
  if (!ns_host.empty()) h[schema::kKeyNsHost] = ns_host;
  std::string line = WriteJson(h, -1) + "\n";
  if (write(p.fd, line.data(), line.size()) < 0) {
    close(p.fd);
    p.fd = -1;
    return p;
  }
  Json start = Json::object();
  start["argv"] = Argv(tgid);
  start[schema::kKeyMode] = schema::kModeWatch;
  start[schema::kKeyEnforce] = enforce_;
  if (tgid == static_cast<uint32_t>(getpid())) start[schema::kKeyHook] = hook_;
  Write(p, tgid, tgid, now_ns,
        std::string("\"event\":\"process_start\",") +
            WriteJson(start, -1).substr(1, WriteJson(start, -1).size() - 2));
  return p;
}

void WatchLogs::Write(Proc& p, uint32_t tid, uint32_t tgid, int64_t ts_ns, std::string body) {
  if (p.fd < 0) return;
  std::string line = "{" + body.substr(0, body.find(',')) +
                     ",\"ts\":" + std::to_string(ts_ns - p.start_ns) +
                     ",\"seq\":" + std::to_string(p.seq++);
  if (tid != tgid) line += ",\"tid\":" + std::to_string(tid);
  size_t comma = body.find(',');
  if (comma != std::string::npos) line += body.substr(comma);
  line += "}\n";
  if (write(p.fd, line.data(), line.size()) < 0) {
    close(p.fd);
    p.fd = -1;
  }
}

void WatchLogs::Preexisting(const api::ProcessFacts& f) {
  Proc& p = ProcFor(static_cast<uint32_t>(f.pid), f.comm.c_str(), ClockNs(CLOCK_REALTIME));
  p.preexisting = true;
  Json n = Json::object();
  n["text"] = "held RDMA state when the watcher started: " + std::to_string(f.objects.mrs) +
              " MRs (" + std::to_string(f.mr_ranges.size()) +
              " with their addresses from RDMA netlink), " +
              std::to_string(f.uverbs_fds.value_or(0) + f.rdma_cm_fds.value_or(0)) +
              " device files; what it did before then is not in this log";
  std::string j = WriteJson(n, -1);
  Write(p, f.pid, f.pid, p.start_ns, "\"event\":\"note\"," + j.substr(1, j.size() - 2));
}

void WatchLogs::Lost(uint64_t n) {
  state_.lost += static_cast<int64_t>(n);
  changed_ = true;
  Json j = Json::object();
  j["text"] = std::to_string(n) +
              " records were lost (the watcher's ring buffer was full, or the kernel ran only "
              "one of a registration's two probes): forks and registrations in them are "
              "missing from these logs";
  j[schema::kKeyLost] = n;
  std::string s = WriteJson(j, -1);
  Write(self_, self_pid_, self_pid_, ClockNs(CLOCK_REALTIME),
        "\"event\":\"note\"," + s.substr(1, s.size() - 2));
  fprintf(stderr,
          "forkguard watch: %llu records lost (ring buffer full, or a registration probe that did "
          "not run)\n",
          static_cast<unsigned long long>(n));
}

void WatchLogs::WriteFork(Proc& p, const fgw_event& e, int64_t ts_ns) {
  ++forks_;
  if (e.refused) ++refused_;
  WatchState::Proc& seen = state_.processes[e.tgid];
  ++seen.forks;
  if (e.refused) ++seen.refused;
  seen.last = api::VerdictText(e.reasons);
  changed_ = true;
  Json f = Json::object();
  Json reasons = Json::array();
  if (e.reasons & FGW_REASON_CHILD_SEGV) reasons.emplace_back(schema::kReasonChildSegv);
  if (e.reasons & FGW_REASON_PARENT_CORRUPTION)
    reasons.emplace_back(schema::kReasonParentCorruption);
  if (e.reasons & FGW_REASON_INHERITED_RDMA) reasons.emplace_back(schema::kReasonInheritedRdma);
  f[schema::kKeyVerdict] = e.reasons ? schema::kVerdictHazard : schema::kVerdictClean;
  f["reasons"] = std::move(reasons);
  f[schema::kKeyAction] = e.refused ? schema::kActionRefused : schema::kActionProceeded;
  if (e.refused) f["errno"] = EPERM;
  // The shim in the process let it through (its FORKGUARD_ALLOW or suppressions): so did
  // the kernel's hook.
  if (e.shim_mark) f[schema::kKeyShimSuppressed] = true;
  f["site"] = Json();
  f["reported"] = false;
  if (p.init_ns >= 0) {
    Json init = Json::object();
    init["call"] = "open";
    init["device"] = Json();
    init["age_ms"] = (ts_ns - p.init_ns) / 1000000;
    f["init"] = std::move(init);
  } else {
    f["init"] = Json();
  }
  Json ranges = Json::array();
  for (uint32_t i = 0; i < e.nranges && i < FGW_FORK_RANGES; ++i) {
    const fgw_range& r = e.ranges[i];
    Json j = Json::object();
    j["addr"] = r.addr;
    j["len"] = r.len;
    j["call"] = "ib_umem_get";
    j["dontfork"] = r.kind == FGW_NONE ? Json() : Json(r.dc != 0);
    j["kind"] = KindName(r.kind);
    j["effect"] = r.effect <= FGW_UNKNOWN
                      ? facts::ForkEffectName(static_cast<facts::ForkEffect>(r.effect))
                      : "unknown";
    if (r.kind < facts::kMemoryKinds) {
      facts::RangeFacts rf;
      rf.kind = static_cast<facts::MemoryKind>(r.kind);
      rf.dontfork = r.dc ? facts::Tri::kYes : facts::Tri::kNo;
      facts::RangeVerdict v = facts::DecideRange(m_, rf);
      j["basis"] = facts::BasisName(v.basis);
      if (v.basis == facts::Basis::kUnknownKernel) j["probe"] = facts::ProbeWhyName(v.why);
    } else {
      j["basis"] = facts::BasisName(facts::Basis::kUnknownKind);
    }
    ranges.push_back(std::move(j));
  }
  f["ranges"] = std::move(ranges);
  int uverbs = -1, rdma_cm = -1;
  DeviceFds(e.tgid, &uverbs, &rdma_cm);
  Json live = Json::object();
  live["contexts"] = Json();
  live["pds"] = Json();
  live["mrs"] = e.mrs;
  live["cm_channels"] = Json();
  live["cm_ids"] = Json();
  live["uverbs_fds"] = CountOrNull(uverbs);
  live["rdma_cm_fds"] = CountOrNull(rdma_cm);
  f["live"] = std::move(live);
  f["threads"] = Json();
  f["max_map_count"] = Json();
  f["map_count"] = Json();
  f["kernel_cof"] =
      m_.reported_cof == facts::Tri::kUnknown ? Json() : Json(m_.reported_cof == facts::Tri::kYes);
  f["kernel_cof_source"] = m_.reported_cof == facts::Tri::kUnknown ? "unknown" : "netlink";
  f[schema::kKeyVia] = schema::kViaKernel;
  f[schema::kKeyPinnedPages] = e.pinned_pages;
  if (e.mrs > e.nranges) f[schema::kKeyRangesOmitted] = e.mrs - e.nranges;
  if (e.vma_busy) f[schema::kKeyMappingsUnread] = e.vma_busy;
  std::string s = WriteJson(f, -1);
  Write(p, e.tid, e.tgid, ts_ns, "\"event\":\"fork\"," + s.substr(1, s.size() - 2));
}

void WatchLogs::Record(const fgw_event& e) {
  int64_t ts = RealtimeNs(e.ts_ns);
  auto known = procs_.find(e.tgid);
  switch (e.type) {
    case FGW_DEVICE_OPEN: {
      Proc& p = ProcFor(e.tgid, e.comm, ts, &e);
      if (p.init_ns < 0) {
        p.init_ns = ts;
        Json j = Json::object();
        j["call"] =
            e.advice == 0 ? "open(/dev/infiniband/uverbs*)" : "open(/dev/infiniband/rdma_cm)";
        j["device"] = Json();
        std::string s = WriteJson(j, -1);
        Write(p, e.tid, e.tgid, ts, "\"event\":\"rdma_init\"," + s.substr(1, s.size() - 2));
      }
      break;
    }
    case FGW_MR_REG: {
      Proc& p = ProcFor(e.tgid, e.comm, ts);
      Json j = Json::object();
      j["mr"] = Json::array({e.addr, e.len, 0, 0});
      j["call"] = "ib_umem_get";
      std::string s = WriteJson(j, -1);
      Write(p, e.tid, e.tgid, ts, "\"event\":\"mr_register\"," + s.substr(1, s.size() - 2));
      break;
    }
    case FGW_MR_DEREG:
      if (known != procs_.end()) {
        Json j = Json::object();
        j["handle"] = Json();
        j["addr"] = e.len ? Json(e.addr) : Json();
        j["len"] = e.len ? Json(e.len) : Json();
        std::string s = WriteJson(j, -1);
        Write(known->second, e.tid, e.tgid, ts,
              "\"event\":\"mr_deregister\"," + s.substr(1, s.size() - 2));
      }
      break;
    case FGW_MADVISE:
      if (known != procs_.end()) {
        if (e.advice == 10) ++known->second.madvise_dontfork;
        if (e.advice == 11) ++known->second.madvise_dofork;
      }
      break;
    case FGW_FORK:
      WriteFork(ProcFor(e.tgid, e.comm, ts), e, ts);
      break;
    case FGW_FORK_CHILD:
      if (known != procs_.end()) {
        Write(known->second, e.tid, e.tgid, ts,
              "\"event\":\"fork_child\",\"child_pid\":" + std::to_string(e.child));
      }
      break;
    case FGW_EXIT:
      if (known != procs_.end()) {
        Write(known->second, e.tgid, e.tgid, ts, "\"event\":\"process_exit\",\"status\":null");
        if (known->second.fd >= 0) close(known->second.fd);
        procs_.erase(known);
        if (state_.processes.erase(e.tgid) > 0) changed_ = true;
      }
      break;
    default:
      break;
  }
}

void WatchLogs::Close() {
  for (auto& [tgid, p] : procs_)
    if (p.fd >= 0) close(p.fd);
  procs_.clear();
  if (self_.fd >= 0) {
    Write(self_, self_pid_, self_pid_, ClockNs(CLOCK_REALTIME),
          "\"event\":\"process_exit\",\"status\":0");
    close(self_.fd);
    self_.fd = -1;
  }
  if (dir_fd_ >= 0) close(dir_fd_);
  dir_fd_ = -1;
}

}  // namespace forkguard::cli
