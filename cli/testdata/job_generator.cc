#include "cli/testdata/job_generator.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/format.h"
#include "cli/json.h"
#include "formats/event_schema.h"

namespace forkguard::cli::testdata {

// Real functions of this binary, named by the generated stacks. noinline and
// distinct bodies so each has its own address and line.
__attribute__((noinline)) void StartWorkerPool() { asm volatile("" ::: "memory"); }
__attribute__((noinline)) void InitRdmaTransport() { asm volatile("nop" ::: "memory"); }
__attribute__((noinline)) void SpawnHelper() { asm volatile("nop; nop" ::: "memory"); }

namespace {

// `,"key":` and `"text"` for the padding lines written as text (names need no escaping).
std::string Key(const char* key) { return std::string(",\"") + key + "\":"; }
std::string Quoted(const std::string& text) { return "\"" + text + "\""; }

constexpr int64_t kBaseNs = 1764500000000000000;  // 2025-11-30

// {"obj","off","ip"} of code address `fn` as the shim records it (off =
// address - load base of the object that holds it), plus `delta` bytes so the
// address points inside the function like a return address.
Json FrameAt(const void* fn, uint64_t delta, const char* sym = nullptr) {
  Dl_info info{};
  if (!dladdr(fn, &info) || !info.dli_fbase) throw std::runtime_error("dladdr failed");
  std::string obj = info.dli_fname ? info.dli_fname : "";
  char real[PATH_MAX];
  if (obj.empty() || obj[0] != '/') {
    ssize_t n = readlink("/proc/self/exe", real, sizeof real - 1);
    if (n <= 0) throw std::runtime_error("readlink /proc/self/exe failed");
    real[n] = 0;
    obj = real;
  } else if (realpath(obj.c_str(), real)) {
    obj = real;
  }
  uint64_t addr = reinterpret_cast<uint64_t>(fn) + delta;
  Json f = Json::object();
  f[schema::kKeyIp] = Hex(addr);
  f[schema::kKeyObj] = obj;
  f[schema::kKeyOff] = Hex(addr - reinterpret_cast<uint64_t>(info.dli_fbase));
  if (sym) f[schema::kKeySym] = sym;
  return f;
}

Json FrameOf(void (*fn)(), uint64_t delta) {
  return FrameAt(reinterpret_cast<const void*>(fn), delta);
}

// A frame in a system library: the real address of `name` when the library
// is here, else a plausible one (a log from another machine).
Json LibFrame(const char* soname, const char* path, uint64_t fallback_off, const char* name) {
  if (void* h = dlopen(soname, RTLD_LAZY | RTLD_LOCAL)) {
    if (void* fn = dlsym(h, name)) return FrameAt(fn, 0x10, name);
  }
  Json f = Json::object();
  f[schema::kKeyIp] = Hex(0x7f0000000000 + fallback_off);
  f[schema::kKeyObj] = path;
  f[schema::kKeyOff] = Hex(fallback_off);
  f[schema::kKeySym] = name;
  return f;
}

Json PyFrame(const char* file, int line, const char* func) {
  Json py = Json::object();
  py[schema::kKeyFile] = file;
  py[schema::kKeyLine] = line;
  py[schema::kKeyFunc] = func;
  Json f = Json::object();
  f[schema::kKeyPy] = std::move(py);
  return f;
}

// One process's log as the shim writes it (forkguard.event/2): the header, then module and
// stack records before the first line that uses them, then events with `ts` relative to the
// header's start_ns.
class ProcessWriter {
 public:
  ProcessWriter(const std::string& dir, std::string host, int64_t pid, int64_t ppid, int64_t rank,
                int64_t start_ns, std::string prog, std::string job)
      : pid_(pid), start_ns_(start_ns) {
    path_ = dir + "/forkguard." + host + "." + std::to_string(pid) + "." +
            std::to_string(start_ns) + ".jsonl";
    fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd_ < 0) throw std::runtime_error("cannot create " + path_);
    Json h = Json::object();
    h[schema::kKeySchema] = schema::kEventV2;
    h[schema::kKeyEvent] = schema::kHeader;
    h[schema::kKeyHost] = host;
    h[schema::kKeyPid] = pid;
    h[schema::kKeyPpid] = ppid;
    h[schema::kKeyProg] = prog;
    h[schema::kKeyRank] = rank;
    h[schema::kKeyLocalRank] = Json();
    h[schema::kKeyJob] = job.empty() ? Json() : Json(job);
    h[schema::kKeyStartNs] = start_ns;
    Raw(WriteJson(h, -1) + "\n");
  }
  ~ProcessWriter() {
    Flush();
    close(fd_);
  }

  // An event's common fields: its type, `ts` from the header's start, `seq`.
  Json Base(const char* event, int64_t ts) {
    Json v = Json::object();
    v[schema::kKeyEvent] = event;
    v[schema::kKeyTs] = ts - start_ns_;
    v[schema::kKeySeq] = seq_++;
    return v;
  }
  // The same as text without the closing brace (padding lines: millions at job scale).
  std::string BaseText(const char* event, int64_t ts) {
    return "{" + Key(schema::kKeyEvent).substr(1) + Quoted(event) + Key(schema::kKeyTs) +
           std::to_string(ts - start_ns_) + Key(schema::kKeySeq) + std::to_string(seq_++);
  }
  // The id of the stack of `frames` (/1-style frame objects: {"obj","off"} or {"ip"} or
  // {"py":{..}}), writing its module and stack records the first time.
  Json Stack(const Json& frames) {
    std::string key = WriteJson(frames, -1);
    auto it = stacks_.find(key);
    if (it != stacks_.end()) return Json(it->second);
    Json out = Json::array();
    for (const Json& f : frames) {
      if (FindMember(f, schema::kKeyPy)) {
        out.push_back(f);
        continue;
      }
      Json pair = Json::array();
      std::string obj = GetString(f, schema::kKeyObj);
      if (obj.empty()) {
        pair.emplace_back(-1);
        pair.emplace_back(
            static_cast<int64_t>(strtoull(GetString(f, schema::kKeyIp).c_str(), nullptr, 0)));
      } else {
        pair.emplace_back(Module(obj));
        pair.emplace_back(
            static_cast<int64_t>(strtoull(GetString(f, schema::kKeyOff).c_str(), nullptr, 0)));
      }
      out.push_back(std::move(pair));
    }
    int id = static_cast<int>(stacks_.size());
    Json rec = Json::object();
    rec[schema::kKeyEvent] = schema::kStackRecord;
    rec[schema::kKeyId] = id;
    rec[schema::kKeyFrames] = std::move(out);
    Raw(WriteJson(rec, -1) + "\n");
    stacks_.emplace(std::move(key), id);
    return Json(id);
  }
  void Write(const Json& v) { Raw(WriteJson(v, -1) + "\n"); }
  void Raw(const std::string& s) {
    buf_ += s;
    lines_ += std::count(s.begin(), s.end(), '\n');
    if (buf_.size() >= (1 << 16)) Flush();
  }
  int64_t lines() const { return lines_; }  // every line: header, records, events
  int64_t pid() const { return pid_; }

 private:
  int Module(const std::string& path) {
    auto it = modules_.find(path);
    if (it != modules_.end()) return it->second;
    int id = static_cast<int>(modules_.size());
    Json rec = Json::object();
    rec[schema::kKeyEvent] = schema::kModule;
    rec[schema::kKeyId] = id;
    rec[schema::kKeyPath] = path;
    rec[schema::kKeyBase] = Hex(0x7f0000000000 + 0x1000000 * id);
    rec[schema::kKeyBuildId] = Json();
    Raw(WriteJson(rec, -1) + "\n");
    modules_.emplace(path, id);
    return id;
  }
  void Flush() {
    if (!buf_.empty() && write(fd_, buf_.data(), buf_.size()) != static_cast<ssize_t>(buf_.size()))
      throw std::runtime_error("short write to " + path_);
    buf_.clear();
  }
  int64_t pid_;
  int64_t start_ns_;
  std::string path_;
  int fd_ = -1;
  int64_t seq_ = 0;
  int64_t lines_ = 0;
  std::string buf_;
  std::map<std::string, int> modules_;
  std::map<std::string, int> stacks_;
};

const char kLibc[] = "/usr/lib/x86_64-linux-gnu/libc.so.6";
const char kVerbs[] = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0";

// The fork call sites: the worker pool (children with logs of their own), the helper that
// execs, and a DataLoader without persistent workers forking its workers every epoch.
enum class Site { kWorkerPool, kHelper, kEpoch };

Json MakeForkStack(Site site) {
  Json s = Json::array();
  s.push_back(LibFrame("libc.so.6", kLibc, 0xd8f40, "fork"));
  switch (site) {
    case Site::kWorkerPool:
      s.push_back(FrameOf(&StartWorkerPool, 1));
      s.push_back(PyFrame("train.py", 42, "make_loader"));
      break;
    case Site::kHelper:
      s.push_back(FrameOf(&SpawnHelper, 1));
      s.push_back(PyFrame("train.py", 88, "log_gpu_state"));
      break;
    case Site::kEpoch:
      s.push_back(FrameOf(&StartWorkerPool, 3));
      s.push_back(PyFrame("/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", 1042,
                          "_MultiProcessingDataLoaderIter"));
      s.push_back(PyFrame("train.py", 120, "train_epoch"));
      break;
  }
  return s;
}

// Made once per site (dladdr and realpath per frame are slow at a million forks).
const Json& ForkStack(Site site) {
  static const Json kStacks[] = {MakeForkStack(Site::kWorkerPool), MakeForkStack(Site::kHelper),
                                 MakeForkStack(Site::kEpoch)};
  return kStacks[static_cast<int>(site)];
}

const char* SiteHash(Site site) {
  return site == Site::kHelper ? "0x5e1f00d" : site == Site::kEpoch ? "0xe90c4" : "0xa11ce5";
}

Json MakeInitStack() {
  Json s = Json::array();
  s.push_back(LibFrame("libibverbs.so.1", kVerbs, 0x11e20, "ibv_open_device"));
  s.push_back(FrameOf(&InitRdmaTransport, 1));
  s.push_back(PyFrame("train.py", 17, "setup_transport"));
  return s;
}

const Json& InitStack() {
  static const Json kStack = MakeInitStack();
  return kStack;
}

// The registration stack of padding site `k`: libibverbs, a transport library
// frame, the program's own frame and Python frames, about the size the shim
// writes today.
Json RegStack(int k) {
  Json s = Json::array();
  s.push_back(LibFrame("libibverbs.so.1", kVerbs, 0x12a40, "ibv_reg_mr"));
  Json t = Json::object();
  uint64_t off = 0x4a10 + 0x40 * static_cast<uint64_t>(k);
  t[schema::kKeyIp] = Hex(0x7f3300000000 + off);
  t[schema::kKeyObj] = "/opt/job/lib/libtransport.so";
  t[schema::kKeyOff] = Hex(off);
  t[schema::kKeySym] = "transport_register_buffer_" + std::to_string(k % 4);
  t[schema::kKeySymoff] = Hex(0x40 + k);
  s.push_back(std::move(t));
  s.push_back(FrameOf(&InitRdmaTransport, 1 + static_cast<uint64_t>(k % 3)));
  Json e = Json::object();
  e[schema::kKeyIp] = Hex(0x55aa00200000 + 0x1c3 * static_cast<uint64_t>(k % 5));
  e[schema::kKeyObj] = "/usr/bin/python3.11";
  e[schema::kKeyOff] = Hex(0x200000 + 0x1c3 * static_cast<uint64_t>(k % 5));
  e[schema::kKeySym] = "_PyEval_EvalFrameDefault";
  e[schema::kKeySymoff] = Hex(0x1c3 * static_cast<uint64_t>(k % 5));
  s.push_back(std::move(e));
  s.push_back(LibFrame("libc.so.6", kLibc, 0x271ca, "__libc_start_main"));
  s.push_back(PyFrame("transport.py", 100 + k, "register"));
  s.push_back(PyFrame("train.py", 60 + k % 7, "train_step"));
  return s;
}

// Pads `w` to `total` lines (leaving `reserve` for what follows) with what a trainer's shim
// log holds between forks: per registration (over `sites` stacks) two other watched verbs
// calls, after an rdma_init of its own when the process had none.
void Pad(ProcessWriter& w, const JobSpec& spec, const std::vector<Json>& stacks, int64_t ts,
         bool had_init, int reserve) {
  if (spec.events_per_process <= 0) return;
  int64_t want = spec.events_per_process - reserve;
  if (w.lines() >= want) return;
  std::vector<std::string> ids(stacks.size());  // stack ids in this file, as text
  auto stack_id = [&](size_t k) -> const std::string& {
    if (ids[k].empty()) ids[k] = WriteJson(w.Stack(stacks[k]), -1);
    return ids[k];
  };
  if (!had_init) {
    const std::string& st = stack_id(0);
    std::string l = w.BaseText(schema::kRdmaInit, ts);
    l += Key(schema::kKeyCall) + Quoted("ibv_open_device") + Key(schema::kKeyDevice) +
         Quoted("rxe0") + Key(schema::kKeyStack) + st + "}\n";
    w.Raw(l);
  }
  uint64_t addr = 0x7f4400000000;
  static const char* const kCalls[] = {"ibv_create_cq", "ibv_create_qp", "ibv_modify_qp",
                                       "ibv_alloc_pd"};
  for (int64_t i = 0; w.lines() < want; ++i) {
    const std::string& st = stack_id(static_cast<size_t>(i) % stacks.size());
    std::string h = std::to_string(0x559990000 + i);
    std::string a = std::to_string(addr + static_cast<uint64_t>(i) * 4096);
    std::string l = w.BaseText(schema::kMrRegister, ts + i * 3000);
    l += Key(schema::kKeyMr) + "[" + a + ",4096,7," + h + "]" + Key(schema::kKeyStack) + st + "}\n";
    w.Raw(l);
    for (int c = 0; c < 2 && w.lines() < want; ++c) {
      l = w.BaseText(schema::kRdmaCall, ts + i * 3000 + 1000 * (c + 1));
      l += Key(schema::kKeyCall) + Quoted(kCalls[(i * 2 + c) % 4]) + Key(schema::kKeyDevice) +
           Quoted("rxe0") + Key(schema::kKeyHandle) +
           Quoted(Hex(0x7f5500000000 + static_cast<uint64_t>(i))) + Key(schema::kKeyOk) + "true" +
           Key(schema::kKeyErrno) + "0}\n";
      w.Raw(l);
    }
  }
}

// The process_start of `python3 train.py` under the shim (a rank, and each forked child).
Json TrainerStart(ProcessWriter& w, int64_t ts) {
  Json ps = w.Base(schema::kProcessStart, ts);
  Json argv = Json::array();
  argv.emplace_back("python3");
  argv.emplace_back("train.py");
  ps[schema::kKeyArgv] = std::move(argv);
  ps[schema::kKeyMode] = "warn";
  ps[schema::kKeyShimVersion] = "0.1.0";
  ps[schema::kKeyExe] = "/usr/bin/python3.11";
  return ps;
}

std::string HostName(const JobSpec& spec, int r) {
  int hosts = std::max(1, spec.hosts);
  int h = static_cast<int>(static_cast<int64_t>(r) * hosts / std::max(1, spec.ranks));
  if (hosts <= 2) return h == 0 ? "node-a" : "node-b";
  char b[32];
  snprintf(b, sizeof b, "node-%03d", h);
  return b;
}

}  // namespace

JobTruth WriteJob(const std::string& dir, const JobSpec& spec) {
  JobTruth t;
  std::vector<Json> stacks;
  for (int k = 0; k < std::max(1, spec.sites); ++k) stacks.push_back(RegStack(k));
  std::set<std::string> hosts;
  const int workers = spec.procs_per_rank - 1;
  for (int r = 0; r < spec.ranks; ++r) {
    std::string host = HostName(spec, r);
    hosts.insert(host);
    int64_t pid = 1000 + 100 * r;
    int64_t start = kBaseNs + spec.start_offset_ns + r * 1000000LL;
    bool hazard = r < spec.hazard_ranks;
    int64_t init_ts = start + 50000000;  // 50 ms in
    int64_t fork_ts = hazard ? start + 150000000 : start + 20000000;
    ProcessWriter w(dir, host, pid, 1, r, start, "python3", spec.job);
    ++t.processes;

    w.Write(TrainerStart(w, start));

    auto write_init = [&]() {
      Json in = w.Base(schema::kRdmaInit, init_ts);
      in[schema::kKeyCall] = "ibv_open_device";
      in[schema::kKeyDevice] = "rxe0";
      in[schema::kKeyStack] = w.Stack(InitStack());
      w.Write(in);
      Json st = w.Stack(InitStack());
      Json mr = w.Base(schema::kMrRegister, init_ts + 1000000);
      Json m = Json::array();
      m.emplace_back(0x7f1200000000 + r * 0x100000);
      m.emplace_back(4 << 20);
      m.emplace_back(7);
      m.emplace_back(0x5550000 + r);
      mr[schema::kKeyMr] = std::move(m);
      mr[schema::kKeyStack] = std::move(st);
      mr[schema::kKeyDontfork] = true;
      w.Write(mr);
    };
    if (hazard) write_init();

    auto write_fork = [&](ProcessWriter& w, int64_t ts, Site site, int64_t child_pid) {
      Json f = w.Base(schema::kFork, ts);
      f[schema::kKeyVerdict] = hazard ? "hazard" : "clean";
      Json reasons = Json::array();
      if (hazard) {
        reasons.emplace_back("child-segv");
        reasons.emplace_back("inherited-rdma");
      }
      f[schema::kKeyReasons] = std::move(reasons);
      f[schema::kKeyAction] = "proceeded";
      f[schema::kKeySite] = SiteHash(site);
      f[schema::kKeyReported] = hazard;
      f[schema::kKeyStack] = w.Stack(ForkStack(site));
      if (hazard) {
        Json init = Json::object();
        init[schema::kKeyCall] = "ibv_open_device";
        init[schema::kKeyDevice] = "rxe0";
        init[schema::kKeyAgeMs] = (ts - init_ts) / 1000000;
        init[schema::kKeyStack] = w.Stack(InitStack());
        f[schema::kKeyInit] = std::move(init);
        Json ranges = Json::array();
        Json rg = Json::object();
        rg[schema::kKeyAddr] = 0x7f1200000000 + r * 0x100000;
        rg[schema::kKeyLen] = 4 << 20;
        rg[schema::kKeyCall] = "ibv_reg_mr";
        rg[schema::kKeyDontfork] = true;
        ranges.push_back(std::move(rg));
        f[schema::kKeyRanges] = std::move(ranges);
      } else {
        f[schema::kKeyInit] = Json();
        f[schema::kKeyRanges] = Json::array();
      }
      f[schema::kKeyThreads] = 4;
      f[schema::kKeyMaxMapCount] = 65530;
      f[schema::kKeyMapCount] = 900;
      f[schema::kKeyKernelCof] = true;
      f[schema::kKeyVia] = "fork";
      f["future_field"] = "readers must ignore this";
      w.Write(f);
      Json fc = w.Base(schema::kForkChild, ts + 200000);
      fc[schema::kKeyChildPid] = child_pid;
      w.Write(fc);
    };
    // `n` DataLoader forks of process `w` from `begin`, 8 workers an epoch, 5 ms apart: each
    // child a pid that leaves no log of its own, distinct within the process (up to 1000
    // forks) and above every logged pid, below the kernel's PID_MAX_LIMIT (4194304).
    auto write_epoch_forks = [&](ProcessWriter& w, int64_t begin, int n) {
      for (int e = 0; e < n; ++e) {
        int64_t ts = begin + (e / 8) * 5000000LL + (e % 8) * 100000LL;
        write_fork(w, ts, Site::kEpoch, 2000000 + (w.pid() * 1000 + e) % 2000000);
        ++t.epoch_forks;
        if (hazard) ++t.hazard_forks;
      }
    };

    // Rank 1's helper (below) takes the place of its last worker: 64 processes.
    int my_workers = spec.helper_fork && r == 1 && hazard ? workers - 1 : workers;
    for (int k = 1; k <= my_workers; ++k) {
      int64_t ts = fork_ts + k * 1000000LL;
      int64_t child = pid + k;
      write_fork(w, ts, Site::kWorkerPool, child);
      if (hazard) {
        ++t.hazard_forks;
        ++t.worker_site_hazard;
      } else {
        ++t.worker_site_clean;
      }
      ProcessWriter c(dir, host, child, pid, r, ts + 100000, "python3", spec.job);
      ++t.processes;
      // A forked child: its parent's argv, as the shim writes.
      c.Write(TrainerStart(c, ts + 100000));
      write_epoch_forks(c, ts + 400000000, spec.forks_per_process);
      Pad(c, spec, stacks, ts + 150000, false, 1);
      if (r == 0 && k <= spec.segv_children && hazard) {
        Json sv = c.Base(schema::kChildSegv, ts + 300000);
        sv[schema::kKeyAddr] = Hex(0x7f1200000040);
        Json rg = Json::object();
        rg[schema::kKeyAddr] = Hex(0x7f1200000000);
        rg[schema::kKeyLen] = 4 << 20;
        sv[schema::kKeyRange] = std::move(rg);
        // Frames with their address only, as the shim writes in the child's signal handler.
        Json rs = Json::array();
        for (std::string ip : {GetString(FrameOf(&InitRdmaTransport, 1), schema::kKeyIp),
                               std::string("0x7f0000011e30")}) {
          Json f = Json::object();
          f[schema::kKeyIp] = ip;
          rs.push_back(std::move(f));
        }
        sv[schema::kKeyCall] = "ibv_reg_mr";
        sv[schema::kKeyRegStack] = std::move(rs);
        sv[schema::kKeySignal] = 11;
        c.Write(sv);
        ++t.segv;
        if (spec.junk && k == 1) c.Raw("{\"event\":\"process_exit\",\"ts\":9");
      } else {
        Json ex = c.Base(schema::kProcessExit, ts + 900000000);
        ex[schema::kKeyStatus] = 0;
        c.Write(ex);
      }
    }
    if (hazard) t.worker_site_hazard_processes++;

    if (spec.helper_fork && r == 1 && hazard) {
      int64_t ts = fork_ts + 500000000;
      int64_t child = pid + 50;
      write_fork(w, ts, Site::kHelper, child);
      ++t.hazard_forks;
      ++t.helper_hazard;
      ProcessWriter c(dir, host, child, pid, r, ts + 100000, "python3", spec.job);
      ++t.processes;
      Json ce = c.Base(schema::kChildExec, ts + 200000);
      ce[schema::kKeyPath] = "/usr/bin/nvidia-smi";
      c.Write(ce);
      ++t.exec_children;
    }
    // The rank's own forks number forks_per_process, its workers and helper included.
    int helper = spec.helper_fork && r == 1 && hazard ? 1 : 0;
    write_epoch_forks(w, fork_ts + 600000000,
                      std::max(0, spec.forks_per_process - my_workers - helper));
    if (!hazard) write_init();  // these ranks initialize RDMA after forking: fine
    if (spec.junk && r == 2) {
      Json future = w.Base(schema::kFork, fork_ts + 700000000);
      future[schema::kKeySchema] = "forkguard.event/3";
      w.Write(future);
    }
    Json ex = w.Base(schema::kProcessExit, start + 2000000000);
    ex[schema::kKeyStatus] = 0;
    Pad(w, spec, stacks, start + 1000000000, true, 1);
    w.Write(ex);
  }
  t.hosts = static_cast<int>(hosts.size());
  t.hazard_sites = (t.worker_site_hazard > 0 ? 1 : 0) + (t.helper_hazard > 0 ? 1 : 0) +
                   (t.epoch_forks > 0 && spec.hazard_ranks > 0 ? 1 : 0);
  return t;
}

}  // namespace forkguard::cli::testdata
