#include "cli/testdata/job_generator.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
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
  f.Set("ip", JsonValue::String(Hex(addr)));
  f.Set("obj", JsonValue::String(obj));
  f.Set("off", JsonValue::String(Hex(addr - reinterpret_cast<uint64_t>(info.dli_fbase))));
  if (sym) f.Set("sym", JsonValue::String(sym));
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
  f.Set("ip", JsonValue::String(Hex(0x7f0000000000 + fallback_off)));
  f.Set("obj", JsonValue::String(path));
  f.Set("off", JsonValue::String(Hex(fallback_off)));
  f.Set("sym", JsonValue::String(name));
  return f;
}

JsonValue PyFrame(const char* file, int line, const char* func) {
  JsonValue py = JsonValue::Object();
  py.Set("file", JsonValue::String(file));
  py.Set("line", JsonValue::Int(line));
  py.Set("func", JsonValue::String(func));
  JsonValue f = JsonValue::Object();
  f.Set("py", std::move(py));
  return f;
}

class ProcessWriter {
 public:
  ProcessWriter(const std::string& dir, std::string host, int64_t pid, int64_t ppid, int64_t rank,
                int64_t start_ns, std::string prog, std::string job)
      : host_(std::move(host)),
        pid_(pid),
        ppid_(ppid),
        rank_(rank),
        prog_(std::move(prog)),
        job_(std::move(job)) {
    path_ = dir + "/forkguard." + host_ + "." + std::to_string(pid) + "." +
            std::to_string(start_ns) + ".jsonl";
    fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd_ < 0) throw std::runtime_error("cannot create " + path_);
  }
  ~ProcessWriter() {
    Flush();
    close(fd_);
  }

  JsonValue Base(const char* event, int64_t ts) {
    JsonValue v = JsonValue::Object();
    v.Set(schema::kKeySchema, JsonValue::String(schema::kEventV1));
    v.Set(schema::kKeyEvent, JsonValue::String(event));
    v.Set("ts_ns", JsonValue::Int(ts));
    v.Set("pid", JsonValue::Int(pid_));
    v.Set("ppid", JsonValue::Int(ppid_));
    v.Set("tid", JsonValue::Int(pid_));
    v.Set("host", JsonValue::String(host_));
    v.Set("prog", JsonValue::String(prog_));
    v.Set("rank", JsonValue::Int(rank_));
    if (!job_.empty()) v.Set("job", JsonValue::String(job_));
    v.Set("seq", JsonValue::Int(seq_++));
    return v;
  }
  // The same common fields as Base, as text without the closing brace (the
  // padding lines are written millions of times at job scale).
  std::string BaseText(const char* event, int64_t ts) {
    std::string s = std::string("{\"schema\":\"") + schema::kEventV1 + "\",\"event\":\"";
    s += event;
    s += "\",\"ts_ns\":" + std::to_string(ts) + ",\"pid\":" + std::to_string(pid_) +
         ",\"ppid\":" + std::to_string(ppid_) + ",\"tid\":" + std::to_string(pid_) +
         ",\"host\":" + JsonQuote(host_) + ",\"prog\":" + JsonQuote(prog_) +
         ",\"rank\":" + std::to_string(rank_) + ",\"seq\":" + std::to_string(seq_++);
    return s;
  }
  void Write(const JsonValue& v) { Raw(WriteJson(v, -1) + "\n"); }
  void Raw(const std::string& s) {
    buf_ += s;
    if (buf_.size() >= (1 << 16)) Flush();
  }
  int64_t lines() const { return seq_; }

 private:
  void Flush() {
    if (!buf_.empty() && write(fd_, buf_.data(), buf_.size()) != static_cast<ssize_t>(buf_.size()))
      throw std::runtime_error("short write to " + path_);
    buf_.clear();
  }
  std::string host_;
  int64_t pid_, ppid_, rank_;
  std::string prog_;
  std::string job_;
  std::string path_;
  int fd_ = -1;
  int64_t seq_ = 0;
  std::string buf_;
};

const char kLibc[] = "/usr/lib/x86_64-linux-gnu/libc.so.6";
const char kVerbs[] = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0";

JsonValue ForkStack(bool helper) {
  JsonValue s = JsonValue::Array();
  s.Push(LibFrame("libc.so.6", kLibc, 0xd8f40, "fork"));
  s.Push(helper ? FrameOf(&SpawnHelper, 1) : FrameOf(&StartWorkerPool, 1));
  s.Push(PyFrame("train.py", helper ? 88 : 42, helper ? "log_gpu_state" : "make_loader"));
  return s;
}

JsonValue InitStack() {
  JsonValue s = JsonValue::Array();
  s.Push(LibFrame("libibverbs.so.1", kVerbs, 0x11e20, "ibv_open_device"));
  s.Push(FrameOf(&InitRdmaTransport, 1));
  s.Push(PyFrame("train.py", 17, "setup_transport"));
  return s;
}

// The registration stack of padding site `k`: libibverbs, a transport library
// frame, the program's own frame and Python frames, about the size the shim
// writes today.
JsonValue RegStack(int k) {
  JsonValue s = JsonValue::Array();
  s.Push(LibFrame("libibverbs.so.1", kVerbs, 0x12a40, "ibv_reg_mr"));
  JsonValue t = JsonValue::Object();
  uint64_t off = 0x4a10 + 0x40 * static_cast<uint64_t>(k);
  t.Set("ip", JsonValue::String(Hex(0x7f3300000000 + off)));
  t.Set("obj", JsonValue::String("/opt/job/lib/libtransport.so"));
  t.Set("off", JsonValue::String(Hex(off)));
  t.Set("sym", JsonValue::String("transport_register_buffer_" + std::to_string(k % 4)));
  t.Set("symoff", JsonValue::String(Hex(0x40 + k)));
  s.Push(std::move(t));
  s.Push(FrameOf(&InitRdmaTransport, 1 + static_cast<uint64_t>(k % 3)));
  JsonValue e = JsonValue::Object();
  e.Set("ip", JsonValue::String(Hex(0x55aa00200000 + 0x1c3 * static_cast<uint64_t>(k % 5))));
  e.Set("obj", JsonValue::String("/usr/bin/python3.11"));
  e.Set("off", JsonValue::String(Hex(0x200000 + 0x1c3 * static_cast<uint64_t>(k % 5))));
  e.Set("sym", JsonValue::String("_PyEval_EvalFrameDefault"));
  e.Set("symoff", JsonValue::String(Hex(0x1c3 * static_cast<uint64_t>(k % 5))));
  s.Push(std::move(e));
  s.Push(LibFrame("libc.so.6", kLibc, 0x271ca, "__libc_start_main"));
  s.Push(PyFrame("transport.py", 100 + k, "register"));
  s.Push(PyFrame("train.py", 60 + k % 7, "train_step"));
  return s;
}

// Pads `w` to `total` lines (leaving `reserve` for what follows) with
// registration/deregistration pairs over `sites` stacks, after an rdma_init
// of its own when the process had none.
void Pad(ProcessWriter& w, const JobSpec& spec, const std::vector<std::string>& stacks, int64_t ts,
         bool had_init, int reserve) {
  if (spec.events_per_process <= 0) return;
  int64_t want = spec.events_per_process - reserve;
  if (w.lines() >= want) return;
  if (!had_init) {
    std::string l = w.BaseText("rdma_init", ts);
    l += ",\"call\":\"ibv_open_device\",\"device\":\"rxe0\",\"stack\":" + stacks[0] + "}\n";
    w.Raw(l);
  }
  uint64_t addr = 0x7f4400000000;
  for (int64_t i = 0; w.lines() < want; ++i) {
    const std::string& st = stacks[static_cast<size_t>(i) % stacks.size()];
    std::string h = Hex(0x9990000 + static_cast<uint64_t>(i));
    std::string a = std::to_string(addr + static_cast<uint64_t>(i) * 4096);
    std::string l = w.BaseText(schema::kMrRegister, ts + i * 2000);
    l += ",\"call\":\"ibv_reg_mr\",\"addr\":" + a +
         ",\"len\":4096,\"access\":7,\"dontfork\":null,\"handle\":\"" + h + "\",\"stack\":" + st +
         "}\n";
    w.Raw(l);
    if (w.lines() >= want) break;
    l = w.BaseText("mr_deregister", ts + i * 2000 + 1000);
    l += ",\"handle\":\"" + h + "\",\"addr\":" + a + ",\"len\":4096}\n";
    w.Raw(l);
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
  std::vector<std::string> stacks;
  for (int k = 0; k < std::max(1, spec.sites); ++k) stacks.push_back(WriteJson(RegStack(k), -1));
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

    JsonValue ps = w.Base("process_start", start);
    JsonValue argv = JsonValue::Array();
    argv.Push(JsonValue::String("python3"));
    argv.Push(JsonValue::String("train.py"));
    ps.Set("argv", std::move(argv));
    ps.Set("mode", JsonValue::String("warn"));
    ps.Set("shim_version", JsonValue::String("0.1.0"));
    ps.Set("exe", JsonValue::String("/usr/bin/python3.11"));
    w.Write(ps);

    auto write_init = [&]() {
      JsonValue in = w.Base("rdma_init", init_ts);
      in.Set("call", JsonValue::String("ibv_open_device"));
      in.Set("device", JsonValue::String("rxe0"));
      in.Set("stack", InitStack());
      w.Write(in);
      JsonValue mr = w.Base(schema::kMrRegister, init_ts + 1000000);
      mr.Set("call", JsonValue::String("ibv_reg_mr"));
      mr.Set("addr", JsonValue::Int(0x7f1200000000 + r * 0x100000));
      mr.Set("len", JsonValue::Int(4 << 20));
      mr.Set("access", JsonValue::Int(7));
      mr.Set("dontfork", JsonValue::Bool(true));
      mr.Set("handle", JsonValue::String(Hex(0x5550000 + r)));
      mr.Set("stack", InitStack());
      w.Write(mr);
    };
    if (hazard) write_init();

    auto write_fork = [&](int64_t ts, bool helper, int64_t child_pid) {
      JsonValue f = w.Base(schema::kFork, ts);
      f.Set("verdict", JsonValue::String(hazard ? "hazard" : "clean"));
      JsonValue reasons = JsonValue::Array();
      if (hazard) {
        reasons.Push(JsonValue::String("child-segv"));
        reasons.Push(JsonValue::String("inherited-rdma"));
      }
      f.Set("reasons", std::move(reasons));
      f.Set("action", JsonValue::String("proceeded"));
      f.Set("site", JsonValue::String(helper ? "0x5e1f00d" : "0xa11ce5"));
      f.Set("reported", JsonValue::Bool(hazard));
      f.Set("stack", ForkStack(helper));
      if (hazard) {
        JsonValue init = JsonValue::Object();
        init.Set("call", JsonValue::String("ibv_open_device"));
        init.Set("device", JsonValue::String("rxe0"));
        init.Set("age_ms", JsonValue::Int((ts - init_ts) / 1000000));
        init.Set("stack", InitStack());
        f.Set("init", std::move(init));
        JsonValue ranges = JsonValue::Array();
        JsonValue rg = JsonValue::Object();
        rg.Set("addr", JsonValue::Int(0x7f1200000000 + r * 0x100000));
        rg.Set("len", JsonValue::Int(4 << 20));
        rg.Set("call", JsonValue::String("ibv_reg_mr"));
        rg.Set("dontfork", JsonValue::Bool(true));
        ranges.Push(std::move(rg));
        f.Set("ranges", std::move(ranges));
      } else {
        f.Set("init", JsonValue());
        f.Set("ranges", JsonValue::Array());
      }
      f.Set("threads", JsonValue::Int(4));
      f.Set("max_map_count", JsonValue::Int(65530));
      f.Set("map_count", JsonValue::Int(900));
      f.Set("kernel_cof", JsonValue::Bool(true));
      f.Set("via", JsonValue::String("fork"));
      f.Set("future_field", JsonValue::String("readers must ignore this"));
      w.Write(f);
      JsonValue fc = w.Base("fork_child", ts + 200000);
      fc.Set("child_pid", JsonValue::Int(child_pid));
      w.Write(fc);
    };

    // Rank 1's helper (below) takes the place of its last worker: 64 processes.
    int my_workers = spec.helper_fork && r == 1 && hazard ? workers - 1 : workers;
    for (int k = 1; k <= my_workers; ++k) {
      int64_t ts = fork_ts + k * 1000000LL;
      int64_t child = pid + k;
      write_fork(ts, false, child);
      if (hazard) {
        ++t.hazard_forks;
        ++t.worker_site_hazard;
      } else {
        ++t.worker_site_clean;
      }
      ProcessWriter c(dir, host, child, pid, r, ts + 100000, "python3", spec.job);
      ++t.processes;
      JsonValue cs = c.Base("process_start", ts + 100000);
      JsonValue cargv =
          JsonValue::Array();  // a forked child: its parent's argv, as the shim writes
      cargv.Push(JsonValue::String("python3"));
      cargv.Push(JsonValue::String("train.py"));
      cs.Set("argv", std::move(cargv));
      cs.Set("mode", JsonValue::String("warn"));
      cs.Set("shim_version", JsonValue::String("0.1.0"));
      cs.Set("exe", JsonValue::String("/usr/bin/python3.11"));
      c.Write(cs);
      Pad(c, spec, stacks, ts + 150000, false, 1);
      if (r == 0 && k <= spec.segv_children && hazard) {
        JsonValue sv = c.Base("child_segv", ts + 300000);
        sv.Set("addr", JsonValue::String(Hex(0x7f1200000040)));
        JsonValue rg = JsonValue::Object();
        rg.Set("addr", JsonValue::String(Hex(0x7f1200000000)));
        rg.Set("len", JsonValue::Int(4 << 20));
        sv.Set("range", std::move(rg));
        JsonValue rs = JsonValue::Array();
        rs.Push(FrameOf(&InitRdmaTransport, 1));
        JsonValue raw = JsonValue::Object();  // ip only, as the shim writes in the child
        raw.Set("ip", JsonValue::String("0x7f0000011e30"));
        rs.Push(std::move(raw));
        sv.Set("call", JsonValue::String("ibv_reg_mr"));
        sv.Set("reg_stack", std::move(rs));
        sv.Set("signal", JsonValue::Int(11));
        c.Write(sv);
        ++t.segv;
        if (spec.junk && k == 1) c.Raw("{\"schema\":\"forkguard.event/1\",\"event\":\"proc");
      } else {
        JsonValue ex = c.Base("process_exit", ts + 900000000);
        ex.Set("status", JsonValue::Int(0));
        c.Write(ex);
      }
    }
    if (hazard) t.worker_site_hazard_processes++;

    if (spec.helper_fork && r == 1 && hazard) {
      int64_t ts = fork_ts + 500000000;
      int64_t child = pid + 50;
      write_fork(ts, true, child);
      ++t.hazard_forks;
      ++t.helper_hazard;
      ProcessWriter c(dir, host, child, pid, r, ts + 100000, "python3", spec.job);
      ++t.processes;
      JsonValue ce = c.Base("child_exec", ts + 200000);
      ce.Set("path", JsonValue::String("/usr/bin/nvidia-smi"));
      c.Write(ce);
      ++t.exec_children;
    }
    if (!hazard) write_init();  // these ranks initialize RDMA after forking: fine
    if (spec.junk && r == 2) {
      JsonValue future = w.Base("fork", fork_ts + 700000000);
      future.Set("schema", JsonValue::String("forkguard.event/3"));
      w.Write(future);
    }
    JsonValue ex = w.Base("process_exit", start + 2000000000);
    ex.Set("status", JsonValue::Int(0));
    Pad(w, spec, stacks, start + 1000000000, true, 1);
    w.Write(ex);
  }
  t.hosts = static_cast<int>(hosts.size());
  t.hazard_sites = (t.worker_site_hazard > 0 ? 1 : 0) + (t.helper_hazard > 0 ? 1 : 0);
  return t;
}

}  // namespace forkguard::cli::testdata
