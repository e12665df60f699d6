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
#include "shim/event_schema.h"

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
JsonValue FrameAt(const void* fn, uint64_t delta, const char* sym = nullptr) {
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
  JsonValue f = JsonValue::Object();
  f.Set(schema::kKeyIp, JsonValue::String(Hex(addr)));
  f.Set(schema::kKeyObj, JsonValue::String(obj));
  f.Set(schema::kKeyOff, JsonValue::String(Hex(addr - reinterpret_cast<uint64_t>(info.dli_fbase))));
  if (sym) f.Set(schema::kKeySym, JsonValue::String(sym));
  return f;
}

JsonValue FrameOf(void (*fn)(), uint64_t delta) {
  return FrameAt(reinterpret_cast<const void*>(fn), delta);
}

// A frame in a system library: the real address of `name` when the library
// is here, else a plausible one (a log from another machine).
JsonValue LibFrame(const char* soname, const char* path, uint64_t fallback_off, const char* name) {
  if (void* h = dlopen(soname, RTLD_LAZY | RTLD_LOCAL)) {
    if (void* fn = dlsym(h, name)) return FrameAt(fn, 0x10, name);
  }
  JsonValue f = JsonValue::Object();
  f.Set(schema::kKeyIp, JsonValue::String(Hex(0x7f0000000000 + fallback_off)));
  f.Set(schema::kKeyObj, JsonValue::String(path));
  f.Set(schema::kKeyOff, JsonValue::String(Hex(fallback_off)));
  f.Set(schema::kKeySym, JsonValue::String(name));
  return f;
}

JsonValue PyFrame(const char* file, int line, const char* func) {
  JsonValue py = JsonValue::Object();
  py.Set(schema::kKeyFile, JsonValue::String(file));
  py.Set(schema::kKeyLine, JsonValue::Int(line));
  py.Set(schema::kKeyFunc, JsonValue::String(func));
  JsonValue f = JsonValue::Object();
  f.Set(schema::kKeyPy, std::move(py));
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
    JsonValue h = JsonValue::Object();
    h.Set(schema::kKeySchema, JsonValue::String(schema::kEventV2));
    h.Set(schema::kKeyEvent, JsonValue::String(schema::kHeader));
    h.Set(schema::kKeyHost, JsonValue::String(host));
    h.Set(schema::kKeyPid, JsonValue::Int(pid));
    h.Set(schema::kKeyPpid, JsonValue::Int(ppid));
    h.Set(schema::kKeyProg, JsonValue::String(prog));
    h.Set(schema::kKeyRank, JsonValue::Int(rank));
    h.Set(schema::kKeyLocalRank, JsonValue());
    h.Set(schema::kKeyJob, job.empty() ? JsonValue() : JsonValue::String(job));
    h.Set(schema::kKeyStartNs, JsonValue::Int(start_ns));
    Raw(WriteJson(h, -1) + "\n");
  }
  ~ProcessWriter() {
    Flush();
    close(fd_);
  }

  // An event's common fields: its type, `ts` from the header's start, `seq`.
  JsonValue Base(const char* event, int64_t ts) {
    JsonValue v = JsonValue::Object();
    v.Set(schema::kKeyEvent, JsonValue::String(event));
    v.Set(schema::kKeyTs, JsonValue::Int(ts - start_ns_));
    v.Set(schema::kKeySeq, JsonValue::Int(seq_++));
    return v;
  }
  // The same as text without the closing brace (padding lines: millions at job scale).
  std::string BaseText(const char* event, int64_t ts) {
    return "{" + Key(schema::kKeyEvent).substr(1) + Quoted(event) + Key(schema::kKeyTs) +
           std::to_string(ts - start_ns_) + Key(schema::kKeySeq) + std::to_string(seq_++);
  }
  // The id of the stack of `frames` (/1-style frame objects: {"obj","off"} or {"ip"} or
  // {"py":{..}}), writing its module and stack records the first time.
  JsonValue Stack(const JsonValue& frames) {
    std::string key = WriteJson(frames, -1);
    auto it = stacks_.find(key);
    if (it != stacks_.end()) return JsonValue::Int(it->second);
    JsonValue out = JsonValue::Array();
    for (const JsonValue& f : frames.array()) {
      if (f.Find(schema::kKeyPy)) {
        out.Push(f);
        continue;
      }
      JsonValue pair = JsonValue::Array();
      std::string obj = f.GetString(schema::kKeyObj);
      if (obj.empty()) {
        pair.Push(JsonValue::Int(-1));
        pair.Push(JsonValue::Int(
            static_cast<int64_t>(strtoull(f.GetString(schema::kKeyIp).c_str(), nullptr, 0))));
      } else {
        pair.Push(JsonValue::Int(Module(obj)));
        pair.Push(JsonValue::Int(
            static_cast<int64_t>(strtoull(f.GetString(schema::kKeyOff).c_str(), nullptr, 0))));
      }
      out.Push(std::move(pair));
    }
    int id = static_cast<int>(stacks_.size());
    JsonValue rec = JsonValue::Object();
    rec.Set(schema::kKeyEvent, JsonValue::String(schema::kStackRecord));
    rec.Set(schema::kKeyId, JsonValue::Int(id));
    rec.Set(schema::kKeyFrames, std::move(out));
    Raw(WriteJson(rec, -1) + "\n");
    stacks_.emplace(std::move(key), id);
    return JsonValue::Int(id);
  }
  void Write(const JsonValue& v) { Raw(WriteJson(v, -1) + "\n"); }
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
    JsonValue rec = JsonValue::Object();
    rec.Set(schema::kKeyEvent, JsonValue::String(schema::kModule));
    rec.Set(schema::kKeyId, JsonValue::Int(id));
    rec.Set(schema::kKeyPath, JsonValue::String(path));
    rec.Set(schema::kKeyBase, JsonValue::String(Hex(0x7f0000000000 + 0x1000000 * id)));
    rec.Set(schema::kKeyBuildId, JsonValue());
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

JsonValue MakeForkStack(Site site) {
  JsonValue s = JsonValue::Array();
  s.Push(LibFrame("libc.so.6", kLibc, 0xd8f40, "fork"));
  switch (site) {
    case Site::kWorkerPool:
      s.Push(FrameOf(&StartWorkerPool, 1));
      s.Push(PyFrame("train.py", 42, "make_loader"));
      break;
    case Site::kHelper:
      s.Push(FrameOf(&SpawnHelper, 1));
      s.Push(PyFrame("train.py", 88, "log_gpu_state"));
      break;
    case Site::kEpoch:
      s.Push(FrameOf(&StartWorkerPool, 3));
      s.Push(PyFrame("/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", 1042,
                     "_MultiProcessingDataLoaderIter"));
      s.Push(PyFrame("train.py", 120, "train_epoch"));
      break;
  }
  return s;
}

// Made once per site (dladdr and realpath per frame are slow at a million forks).
const JsonValue& ForkStack(Site site) {
  static const JsonValue kStacks[] = {MakeForkStack(Site::kWorkerPool),
                                      MakeForkStack(Site::kHelper), MakeForkStack(Site::kEpoch)};
  return kStacks[static_cast<int>(site)];
}

const char* SiteHash(Site site) {
  return site == Site::kHelper ? "0x5e1f00d" : site == Site::kEpoch ? "0xe90c4" : "0xa11ce5";
}

JsonValue MakeInitStack() {
  JsonValue s = JsonValue::Array();
  s.Push(LibFrame("libibverbs.so.1", kVerbs, 0x11e20, "ibv_open_device"));
  s.Push(FrameOf(&InitRdmaTransport, 1));
  s.Push(PyFrame("train.py", 17, "setup_transport"));
  return s;
}

const JsonValue& InitStack() {
  static const JsonValue kStack = MakeInitStack();
  return kStack;
}

// The registration stack of padding site `k`: libibverbs, a transport library
// frame, the program's own frame and Python frames, about the size the shim
// writes today.
JsonValue RegStack(int k) {
  JsonValue s = JsonValue::Array();
  s.Push(LibFrame("libibverbs.so.1", kVerbs, 0x12a40, "ibv_reg_mr"));
  JsonValue t = JsonValue::Object();
  uint64_t off = 0x4a10 + 0x40 * static_cast<uint64_t>(k);
  t.Set(schema::kKeyIp, JsonValue::String(Hex(0x7f3300000000 + off)));
  t.Set(schema::kKeyObj, JsonValue::String("/opt/job/lib/libtransport.so"));
  t.Set(schema::kKeyOff, JsonValue::String(Hex(off)));
  t.Set(schema::kKeySym, JsonValue::String("transport_register_buffer_" + std::to_string(k % 4)));
  t.Set(schema::kKeySymoff, JsonValue::String(Hex(0x40 + k)));
  s.Push(std::move(t));
  s.Push(FrameOf(&InitRdmaTransport, 1 + static_cast<uint64_t>(k % 3)));
  JsonValue e = JsonValue::Object();
  e.Set(schema::kKeyIp,
        JsonValue::String(Hex(0x55aa00200000 + 0x1c3 * static_cast<uint64_t>(k % 5))));
  e.Set(schema::kKeyObj, JsonValue::String("/usr/bin/python3.11"));
  e.Set(schema::kKeyOff, JsonValue::String(Hex(0x200000 + 0x1c3 * static_cast<uint64_t>(k % 5))));
  e.Set(schema::kKeySym, JsonValue::String("_PyEval_EvalFrameDefault"));
  e.Set(schema::kKeySymoff, JsonValue::String(Hex(0x1c3 * static_cast<uint64_t>(k % 5))));
  s.Push(std::move(e));
  s.Push(LibFrame("libc.so.6", kLibc, 0x271ca, "__libc_start_main"));
  s.Push(PyFrame("transport.py", 100 + k, "register"));
  s.Push(PyFrame("train.py", 60 + k % 7, "train_step"));
  return s;
}

// Pads `w` to `total` lines (leaving `reserve` for what follows) with what a trainer's shim
// log holds between forks: per registration (over `sites` stacks) two other watched verbs
// calls, after an rdma_init of its own when the process had none.
void Pad(ProcessWriter& w, const JobSpec& spec, const std::vector<JsonValue>& stacks, int64_t ts,
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
  std::vector<JsonValue> stacks;
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

    JsonValue ps = w.Base(schema::kProcessStart, start);
    JsonValue argv = JsonValue::Array();
    argv.Push(JsonValue::String("python3"));
    argv.Push(JsonValue::String("train.py"));
    ps.Set(schema::kKeyArgv, std::move(argv));
    ps.Set(schema::kKeyMode, JsonValue::String("warn"));
    ps.Set(schema::kKeyShimVersion, JsonValue::String("0.1.0"));
    ps.Set(schema::kKeyExe, JsonValue::String("/usr/bin/python3.11"));
    w.Write(ps);

    auto write_init = [&]() {
      JsonValue in = w.Base(schema::kRdmaInit, init_ts);
      in.Set(schema::kKeyCall, JsonValue::String("ibv_open_device"));
      in.Set(schema::kKeyDevice, JsonValue::String("rxe0"));
      in.Set(schema::kKeyStack, w.Stack(InitStack()));
      w.Write(in);
      JsonValue st = w.Stack(InitStack());
      JsonValue mr = w.Base(schema::kMrRegister, init_ts + 1000000);
      JsonValue m = JsonValue::Array();
      m.Push(JsonValue::Int(0x7f1200000000 + r * 0x100000));
      m.Push(JsonValue::Int(4 << 20));
      m.Push(JsonValue::Int(7));
      m.Push(JsonValue::Int(0x5550000 + r));
      mr.Set(schema::kKeyMr, std::move(m));
      mr.Set(schema::kKeyStack, std::move(st));
      mr.Set(schema::kKeyDontfork, JsonValue::Bool(true));
      w.Write(mr);
    };
    if (hazard) write_init();

    auto write_fork = [&](ProcessWriter& w, int64_t ts, Site site, int64_t child_pid) {
      JsonValue f = w.Base(schema::kFork, ts);
      f.Set(schema::kKeyVerdict, JsonValue::String(hazard ? "hazard" : "clean"));
      JsonValue reasons = JsonValue::Array();
      if (hazard) {
        reasons.Push(JsonValue::String("child-segv"));
        reasons.Push(JsonValue::String("inherited-rdma"));
      }
      f.Set(schema::kKeyReasons, std::move(reasons));
      f.Set(schema::kKeyAction, JsonValue::String("proceeded"));
      f.Set(schema::kKeySite, JsonValue::String(SiteHash(site)));
      f.Set(schema::kKeyReported, JsonValue::Bool(hazard));
      f.Set(schema::kKeyStack, w.Stack(ForkStack(site)));
      if (hazard) {
        JsonValue init = JsonValue::Object();
        init.Set(schema::kKeyCall, JsonValue::String("ibv_open_device"));
        init.Set(schema::kKeyDevice, JsonValue::String("rxe0"));
        init.Set(schema::kKeyAgeMs, JsonValue::Int((ts - init_ts) / 1000000));
        init.Set(schema::kKeyStack, w.Stack(InitStack()));
        f.Set(schema::kKeyInit, std::move(init));
        JsonValue ranges = JsonValue::Array();
        JsonValue rg = JsonValue::Object();
        rg.Set(schema::kKeyAddr, JsonValue::Int(0x7f1200000000 + r * 0x100000));
        rg.Set(schema::kKeyLen, JsonValue::Int(4 << 20));
        rg.Set(schema::kKeyCall, JsonValue::String("ibv_reg_mr"));
        rg.Set(schema::kKeyDontfork, JsonValue::Bool(true));
        ranges.Push(std::move(rg));
        f.Set(schema::kKeyRanges, std::move(ranges));
      } else {
        f.Set(schema::kKeyInit, JsonValue());
        f.Set(schema::kKeyRanges, JsonValue::Array());
      }
      f.Set(schema::kKeyThreads, JsonValue::Int(4));
      f.Set(schema::kKeyMaxMapCount, JsonValue::Int(65530));
      f.Set(schema::kKeyMapCount, JsonValue::Int(900));
      f.Set(schema::kKeyKernelCof, JsonValue::Bool(true));
      f.Set(schema::kKeyVia, JsonValue::String("fork"));
      f.Set("future_field", JsonValue::String("readers must ignore this"));
      w.Write(f);
      JsonValue fc = w.Base(schema::kForkChild, ts + 200000);
      fc.Set(schema::kKeyChildPid, JsonValue::Int(child_pid));
      w.Write(fc);
    };
    // `n` DataLoader forks of process `w` from `begin`, 8 workers an epoch, 5 ms apart: each
    // child a distinct pid that leaves no log of its own.
    auto write_epoch_forks = [&](ProcessWriter& w, int64_t begin, int n) {
      for (int e = 0; e < n; ++e) {
        int64_t ts = begin + (e / 8) * 5000000LL + (e % 8) * 100000LL;
        write_fork(w, ts, Site::kEpoch, 100000000 + w.pid() * 10000 + e);
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
      JsonValue cs = c.Base(schema::kProcessStart, ts + 100000);
      JsonValue cargv =
          JsonValue::Array();  // a forked child: its parent's argv, as the shim writes
      cargv.Push(JsonValue::String("python3"));
      cargv.Push(JsonValue::String("train.py"));
      cs.Set(schema::kKeyArgv, std::move(cargv));
      cs.Set(schema::kKeyMode, JsonValue::String("warn"));
      cs.Set(schema::kKeyShimVersion, JsonValue::String("0.1.0"));
      cs.Set(schema::kKeyExe, JsonValue::String("/usr/bin/python3.11"));
      c.Write(cs);
      write_epoch_forks(c, ts + 400000000, spec.forks_per_process);
      Pad(c, spec, stacks, ts + 150000, false, 1);
      if (r == 0 && k <= spec.segv_children && hazard) {
        JsonValue sv = c.Base(schema::kChildSegv, ts + 300000);
        sv.Set(schema::kKeyAddr, JsonValue::String(Hex(0x7f1200000040)));
        JsonValue rg = JsonValue::Object();
        rg.Set(schema::kKeyAddr, JsonValue::String(Hex(0x7f1200000000)));
        rg.Set(schema::kKeyLen, JsonValue::Int(4 << 20));
        sv.Set(schema::kKeyRange, std::move(rg));
        // Frames with their address only, as the shim writes in the child's signal handler.
        JsonValue rs = JsonValue::Array();
        for (std::string ip : {FrameOf(&InitRdmaTransport, 1).GetString(schema::kKeyIp),
                               std::string("0x7f0000011e30")}) {
          JsonValue f = JsonValue::Object();
          f.Set(schema::kKeyIp, JsonValue::String(ip));
          rs.Push(std::move(f));
        }
        sv.Set(schema::kKeyCall, JsonValue::String("ibv_reg_mr"));
        sv.Set(schema::kKeyRegStack, std::move(rs));
        sv.Set(schema::kKeySignal, JsonValue::Int(11));
        c.Write(sv);
        ++t.segv;
        if (spec.junk && k == 1) c.Raw("{\"event\":\"process_exit\",\"ts\":9");
      } else {
        JsonValue ex = c.Base(schema::kProcessExit, ts + 900000000);
        ex.Set(schema::kKeyStatus, JsonValue::Int(0));
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
      JsonValue ce = c.Base(schema::kChildExec, ts + 200000);
      ce.Set(schema::kKeyPath, JsonValue::String("/usr/bin/nvidia-smi"));
      c.Write(ce);
      ++t.exec_children;
    }
    // The rank's own forks number forks_per_process, its workers and helper included.
    int helper = spec.helper_fork && r == 1 && hazard ? 1 : 0;
    write_epoch_forks(w, fork_ts + 600000000,
                      std::max(0, spec.forks_per_process - my_workers - helper));
    if (!hazard) write_init();  // these ranks initialize RDMA after forking: fine
    if (spec.junk && r == 2) {
      JsonValue future = w.Base(schema::kFork, fork_ts + 700000000);
      future.Set(schema::kKeySchema, JsonValue::String("forkguard.event/3"));
      w.Write(future);
    }
    JsonValue ex = w.Base(schema::kProcessExit, start + 2000000000);
    ex.Set(schema::kKeyStatus, JsonValue::Int(0));
    Pad(w, spec, stacks, start + 1000000000, true, 1);
    w.Write(ex);
  }
  t.hosts = static_cast<int>(hosts.size());
  t.hazard_sites = (t.worker_site_hazard > 0 ? 1 : 0) + (t.helper_hazard > 0 ? 1 : 0) +
                   (t.epoch_forks > 0 && spec.hazard_ranks > 0 ? 1 : 0);
  return t;
}

}  // namespace forkguard::cli::testdata
