#include "api/census.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "api/check_result.h"
#include "shim/base/job_identity.h"

namespace forkguard::api {
namespace {

constexpr int kMaxDc = 4096;

std::string ProcPath(pid_t pid, const char* what) {
  return "/proc/" + std::to_string(pid) + "/" + what;
}

// The whole file, or nullopt when it cannot be opened (permission, gone).
std::optional<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

void CountFds(pid_t pid, ProcessFacts* p) {
  std::string dir = ProcPath(pid, "fd");
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  RdmaFds fds;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char target[256];
    ssize_t n = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    ClassifyFdTarget(target, &fds);
  }
  closedir(d);
  p->uverbs_fds = fds.uverbs;
  p->rdma_cm_fds = fds.rdma_cm;
}

// The dc mappings, and the memory kinds of the mappings under the registered ranges (the
// rule's input, as the shim reads them in its own process).
void ReadSmaps(pid_t pid, ProcessFacts* p) {
  std::optional<std::string> text = ReadFile(ProcPath(pid, "smaps"));
  if (!text || text->empty()) return;  // an unreadable smaps reads as empty for others
  // The scanner wants the ranges sorted and disjoint.
  std::vector<Vma> keep = p->mr_ranges;
  std::sort(keep.begin(), keep.end(), [](const Vma& a, const Vma& b) { return a.start < b.start; });
  std::vector<Vma> merged;
  for (const Vma& v : keep) {
    if (!merged.empty() && v.start <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, v.end);
    } else {
      merged.push_back(v);
    }
  }
  p->dc.resize(kMaxDc);
  p->kinds.resize(kMaxDc);
  SmapsOut out;
  out.dc = p->dc.data();
  out.dc_cap = kMaxDc;
  out.kinds = p->kinds.data();
  out.kinds_cap = kMaxDc;
  out.keep = merged.data();
  out.keep_count = static_cast<int>(merged.size());
  SmapsScanner scanner(out);
  scanner.Feed(text->data(), text->size());
  scanner.Finish();
  p->dc.resize(static_cast<size_t>(scanner.stored()));
  p->kinds.resize(static_cast<size_t>(scanner.kinds_stored()));
  p->dc_count = scanner.dontfork_count();
}

struct EnvMap {
  std::map<std::string, std::string> vars;
};
const char* LookupEnv(const char* name, void* ctx) {
  auto* env = static_cast<EnvMap*>(ctx);
  auto it = env->vars.find(name);
  return it == env->vars.end() ? nullptr : it->second.c_str();
}

void ReadIdentity(pid_t pid, ProcessFacts* p) {
  std::optional<std::string> text = ReadFile(ProcPath(pid, "environ"));
  if (!text) return;
  EnvMap env;
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\0', start);
    if (end == std::string::npos) end = text->size();
    std::string kv = text->substr(start, end - start);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env.vars.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    start = end + 1;
  }
  // The launchers' variables, as the shim reads them in its own process.
  JobIdentity id = ReadJobIdentity(LookupEnv, &env);
  p->job = id.job;
  auto mode = env.vars.find("FORKGUARD_MODE");
  p->mode_env = mode == env.vars.end() ? std::string() : mode->second;
  if (id.rank >= 0) p->rank = id.rank;
}

void ReadMaps(pid_t pid, ProcessFacts* p) {
  std::optional<std::string> text = ReadFile(ProcPath(pid, "maps"));
  if (!text) return;
  if (text->empty() && pid != getpid()) return;  // not ours to read
  p->shim_loaded = text->find("/libforkguard.so") != std::string::npos;
}

}  // namespace

std::string VerdictText(unsigned reasons) {
  forkguard_check_result r{};
  SetVerdict(&r, reasons);
  return r.verdict;
}

ForkVerdict DecideForProcess(const ProcessFacts& p, KernelCof cof, bool* mr_dontfork,
                             MrFate* mr_fate) {
  VerdictInput in;
  // Unreadable descriptors: the device contexts the dump shows stand in for them (each
  // holds one).
  in.counts.uverbs_fds = p.uverbs_fds.value_or(p.objects.contexts);
  in.counts.rdma_cm_fds = p.rdma_cm_fds.value_or(0);
  in.dc_vmas = p.dc.data();
  in.dc_count = static_cast<int>(p.dc.size());
  // The same machine facts the shim's rule reads: the kernel's report and this boot's pin
  // probe (from its cache), and the memory kinds under the registered ranges.
  in.kind_vmas = p.kinds.data();
  in.kind_count = static_cast<int>(p.kinds.size());
  facts::MachineFacts machine;
  machine.reported_cof = cof;
  machine.probe = CachedPinProbe();
  in.machine = &machine;
  std::vector<MrRecord> mrs;
  if (p.netlink) {
    in.counts.pds = p.objects.pds;
    in.counts.mrs = p.objects.mrs;
    in.counts.cm_ids = p.objects.cm_ids;
    if (p.objects.mrs == 0 || p.mr_addresses_known) {
      in.counts.contexts = p.objects.contexts;
      for (const Vma& v : p.mr_ranges) {
        MrRecord m;
        m.addr = v.start;
        m.len = v.end - v.start;
        mrs.push_back(m);
      }
      in.mrs = mrs.data();
      in.mr_count = static_cast<int>(mrs.size());
    }
  }
  return DecideVerdict(in, mr_dontfork, mr_fate);
}

ProcessFacts GatherProcess(pid_t pid, const ResourceDump* dump) {
  ProcessFacts p;
  p.pid = pid;
  if (std::optional<std::string> comm = ReadFile(ProcPath(pid, "comm"))) {
    p.comm = *comm;
    while (!p.comm.empty() && p.comm.back() == '\n') p.comm.pop_back();
  }
  if (dump != nullptr && dump->error.empty()) {
    p.netlink = true;
    std::map<pid_t, pid_t> group;  // thread -> process, asked once per thread
    for (const RdmaResource& r : dump->resources) {
      if (r.kernel || r.tid == 0) continue;
      auto it = group.find(r.tid);
      if (it == group.end()) it = group.emplace(r.tid, ThreadGroup(r.tid)).first;
      if (it->second != pid) continue;
      p.objects.Add(r);
      if (r.kind != ResourceKind::kMr) continue;
      if (r.has_iova) {
        p.mr_ranges.push_back(
            Vma{static_cast<uintptr_t>(r.iova), static_cast<uintptr_t>(r.iova + r.mr_len)});
      } else {
        p.mr_addresses_known = false;
      }
    }
  }
  CountFds(pid, &p);
  ReadSmaps(pid, &p);
  if (std::optional<std::string> status = ReadFile(ProcPath(pid, "status"))) {
    p.vm_pin_kb = StatusKb(status->c_str(), "VmPin");
  }
  ReadIdentity(pid, &p);
  ReadMaps(pid, &p);
  return p;
}

Census TakeCensus() {
  Census c;
  ResourceDump dump = DumpRdmaResources();
  c.netlink_error = dump.error;
  c.devices = dump.devices;
  c.cof = KernelCopyOnFork();
  LearnRdmaDeviceNumbers();
  std::set<pid_t> pids;
  if (dump.error.empty()) {
    for (const RdmaResource& r : dump.resources) {
      if (r.kernel) {
        ++c.kernel_objects;
      } else if (r.tid == 0) {
        ++c.orphan_objects;
        c.orphans.Add(r);
      } else if (pid_t pid = ThreadGroup(r.tid); pid > 0) {
        pids.insert(pid);
      } else {
        ++c.orphan_objects;  // the thread exited between the dump and now
        c.orphans.Add(r);
      }
    }
  }
  // Processes whose descriptors show RDMA (readable /proc/PID/fd: ours, or all as root).
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      long pid = strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || pid <= 0 || pids.count(static_cast<pid_t>(pid))) {
        continue;
      }
      ProcessFacts probe;
      CountFds(static_cast<pid_t>(pid), &probe);
      if (probe.uverbs_fds.value_or(0) > 0 || probe.rdma_cm_fds.value_or(0) > 0) {
        pids.insert(static_cast<pid_t>(pid));
      }
    }
    closedir(d);
  }
  for (pid_t pid : pids) {
    ProcessFacts p = GatherProcess(pid, &dump);
    if (p.HoldsRdma()) c.processes.push_back(std::move(p));
  }
  return c;
}

}  // namespace forkguard::api
