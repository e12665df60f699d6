// `forkguard doctor`: is this machine and environment ready, and what to fix.
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/doctor_checks.h"
#include "cli/doctor_watch.h"
#include "cli/format.h"
#include "cli/shim_locator.h"
#include "facts/fork_rule.h"
#include "facts/machine_facts.h"
#include "facts/pin_probe.h"
#include "flags/flags.h"
#include "formats/event_schema.h"

namespace forkguard::cli {

namespace {

const char kDoctorHelpHead[] = R"(NAME
    forkguard doctor - check this machine and environment for RDMA fork safety

SYNOPSIS
    forkguard doctor

DESCRIPTION
    Prints one line per check with a verdict (ok, warn, fail) and, when it is
    not ok, what to do:

      RDMA devices      /sys/class/infiniband: devices and port states
      uverbs access     /dev/infiniband/uverbs* can be opened by this user
      copy-on-fork      what the kernel reports: the RDMA netlink attribute
                        COPY_ON_FORK (Linux >= 5.13). A kernel that does not
                        report it may still copy pinned pages (5.10 does for
                        anonymous memory): the next check measures it
      pinned pages      what the kernel does at fork with long-term pinned
                        pages, per memory kind (anonymous, THP, hugetlb),
                        measured without an RDMA device: io_uring registered
                        buffers, a fork, a write in the parent. Intact: copied
                        for the child; STALE: the parent's data goes stale
                        (silent corruption). Read from this boot's caches
                        (root's /run/forkguard, written by `forkguard probe
                        --system` at boot, and this user's), else run now and
                        cached in $FORKGUARD_CACHE_DIR, else
                        $XDG_CACHE_HOME/forkguard, else ~/.cache/forkguard
                        (the shim reads both; see forkguard probe --help)
      rdma-core         the libibverbs version (from the library's file name)
      fork env          RDMAV_FORK_SAFE / IBV_FORK_SAFE / RDMAV_HUGEPAGES_SAFE
                        as set (what they do here: fork support)
      fork support      the case this machine is in, per memory kind: rdma-core
                        version x kernel x who turns fork support on. With
                        fork support on (RDMAV_FORK_SAFE/IBV_FORK_SAFE set to
                        any value, or ibv_fork_init() called by a library: UCX
                        unless UCX_IB_FORK_INIT=n, NCCL always) rdma-core < 51,
                        or any rdma-core on a kernel that does not report
                        copy-on-fork, marks every registration MADV_DONTFORK
                        and a child that touches it dies; rdma-core >= 51 does
                        nothing on a kernel that reports it. Fork support is
                        advised only for memory the kernel leaves stale.
                        Names the docs/fork-matrix.md cells (measured on
                        rxe0) of this kernel series and rdma-core, or says
                        that the matrix did not run them
      fix mode          whether FORKGUARD_MODE=fix would help here, per memory
                        kind (anonymous, THP, hugetlb), from the same facts.
                        Where the kernel copies the kind, fix keeps the child
                        alive where fork support marked the range
                        MADV_DONTFORK (the child gets a copy); where it does
                        not, or nothing can tell, fix withholds the range
                        from the child (MADV_DONTFORK for the fork): the
                        parent's data stays intact. Names the matrix cells
                        that show it where the matrix has this kernel and
                        rdma-core
      watcher           whether forkguard watch can run here: the kernel's BTF,
                        its bpf_find_vma helper (Linux 5.17 or later), the hook
                        that judges forks (BPF LSM's task_alloc when "bpf" is in
                        /sys/kernel/security/lsm, else fmod_ret on
                        security_task_alloc), root
      memlock limit     RLIMIT_MEMLOCK (registration pins memory)
      vm.max_map_count  against this process's map count (MADV_DONTFORK splits
                        mappings; each registration can add two)
      shim              libforkguard.so / libforkguard_audit.so found and
                        loadable (dlopen'd in a child process)
      active            whether the shim is preloaded in this environment
      FORKGUARD_MODE    a valid value when set

OPTIONS
)";
const char kDoctorHelpTail[] = R"(
EXIT STATUS
    0    no check failed (warnings allowed)
    1    at least one check failed
    2    bad command line
)";

}  // namespace

namespace {

using doctor::BasisOf;
using doctor::Check;
using doctor::DoctorFacts;
using doctor::KindList;
using doctor::Verdict;

std::string ReadFirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

Check CheckDevices(bool* have_active) {
  *have_active = false;
  const std::string base = "/sys/class/infiniband";
  std::vector<std::string> devs = ListDir(base);
  if (devs.empty())
    return {"RDMA devices", Verdict::kWarn, "none (no " + base + " entries)",
            "no RDMA device: nothing to guard here. If this machine should have one, load its "
            "driver (mlx5_ib, or Soft-RoCE: modprobe rdma_rxe; rdma link add rxe0 type rxe "
            "netdev eth0)"};
  std::string detail;
  int active = 0, ports = 0;
  for (const auto& d : devs) {
    for (const auto& p : ListDir(base + "/" + d + "/ports")) {
      ++ports;
      std::string pb = base + "/" + d + "/ports/" + p;
      std::string state = Trim(ReadFirstLine(pb + "/state"));    // "4: ACTIVE"
      std::string ll = Trim(ReadFirstLine(pb + "/link_layer"));  // "Ethernet"
      size_t colon = state.find(": ");
      if (colon != std::string::npos) state = state.substr(colon + 2);
      if (state == "ACTIVE") ++active;
      if (!detail.empty()) detail += ", ";
      detail += d + " port " + p + " " + (state.empty() ? "?" : state);
      if (!ll.empty()) detail += " (" + ll + ")";
    }
  }
  *have_active = active > 0;
  if (active == 0)
    return {"RDMA devices", Verdict::kWarn, detail.empty() ? "devices without ports" : detail,
            "no port is ACTIVE: check the cable/link (ibstat, rdma link show)"};
  return {"RDMA devices", Verdict::kOk, detail, ""};
}

Check CheckUverbs(bool have_device) {
  std::vector<std::string> nodes;
  for (const auto& n : ListDir("/dev/infiniband"))
    if (n.rfind("uverbs", 0) == 0) nodes.push_back(n);
  if (nodes.empty())
    return {"uverbs access", have_device ? Verdict::kFail : Verdict::kWarn,
            "no /dev/infiniband/uverbs*",
            have_device ? "load ib_uverbs (modprobe ib_uverbs)" : "no RDMA device (see above)"};
  std::string ok, bad;
  for (const auto& n : nodes) {
    std::string p = "/dev/infiniband/" + n;
    (access(p.c_str(), R_OK | W_OK) == 0 ? ok : bad) += (n + " ");
  }
  if (!bad.empty())
    return {"uverbs access", ok.empty() ? Verdict::kFail : Verdict::kWarn,
            "cannot open " + Trim(bad),
            "add the user to the group owning /dev/infiniband/uverbs* (often 'rdma') or fix "
            "the udev rule"};
  return {"uverbs access", Verdict::kOk, Trim(ok) + " read/write", ""};
}

DoctorFacts GatherFacts() {
  DoctorFacts f;
  utsname u{};
  uname(&u);
  f.release = u.release;
  const char* why = "";
  f.m.reported_cof = facts::ReportedCopyOnFork(&why);
  f.cof_why = why;
  char path[PATH_MAX];
  f.m.rdma_core = facts::RdmaCoreInstalled(path, sizeof(path));
  f.rdma_core_path = path;
  char env[256];
  if (facts::ForkSafeFromEnvironment(env, sizeof(env))) {
    f.fork_env = env;
    f.m.fork_support = facts::ForkSupportBy::kEnvironment;
  }
  f.m.hugepages_safe = facts::HugepagesSafeFromEnvironment();
  if (const char* mode = getenv("FORKGUARD_MODE")) f.mode = mode;
  f.m.probe = facts::PinProbeForThisBoot(&f.probed_now, &f.from);
  char cache[1200];
  if (facts::PinProbeCachePath(cache, sizeof(cache))) f.cache_path = cache;
  if (facts::SystemPinProbeCachePath(facts::kSystemPinProbeDir, cache, sizeof(cache))) {
    f.system_cache_path = cache;
  }
  return f;
}

// The kinds doctor speaks about (a private file mapping answers as anonymous memory).
constexpr facts::MemoryKind kDoctorKinds[] = {facts::MemoryKind::kAnonymous,
                                              facts::MemoryKind::kThp, facts::MemoryKind::kHugetlb,
                                              facts::MemoryKind::kShared};

// "anonymous nothing, thp nothing, hugetlb parent-corruption, shared nothing"
std::string EffectsLine(const facts::MachineFacts& m) {
  std::string s;
  for (facts::MemoryKind k : kDoctorKinds) {
    if (!s.empty()) s += ", ";
    s += std::string(facts::MemoryKindName(k)) + " " +
         facts::ForkEffectName(facts::DecideRange(m, {k, facts::Tri::kUnknown}).effect);
  }
  return s;
}

Check CheckCopyOnFork(const DoctorFacts& f) {
  if (f.m.reported_cof == facts::Tri::kYes)
    return {"copy-on-fork", Verdict::kOk,
            "kernel " + f.release +
                " reports COPY_ON_FORK=1 (RDMA netlink): pinned pages are copied for the "
                "child, the parent keeps its own",
            ""};
  if (f.m.reported_cof == facts::Tri::kNo)
    return {"copy-on-fork", Verdict::kWarn,
            "kernel " + f.release + " reports COPY_ON_FORK=0 (RDMA netlink)",
            "a fork after memory registration can silently corrupt the parent's RDMA buffers "
            "(see fork support); fork workers before RDMA init"};
  // Not reported: what the kernel does is the probe's to say (a release number tells
  // nothing: 5.10 copies pinned anonymous pages but not hugetlb ones).
  return {"copy-on-fork", Verdict::kOk,
          "kernel " + f.release + " does not report it: " + f.cof_why +
              "; what it does with pinned pages at fork is measured below (pinned pages)",
          ""};
}

Check CheckPinnedPages(const DoctorFacts& f) {
  std::string d;
  bool stale = false;
  for (facts::MemoryKind k :
       {facts::MemoryKind::kAnonymous, facts::MemoryKind::kThp, facts::MemoryKind::kHugetlb}) {
    int i = static_cast<int>(k);
    if (!d.empty()) d += "; ";
    d += std::string(facts::MemoryKindName(k)) + " ";
    switch (f.m.probe.fate[i]) {
      case facts::PinFate::kIntact:
        d += "intact (copied for the child at fork)";
        break;
      case facts::PinFate::kStale:
        d += "STALE (left to the child: the parent's next write goes to a new page)";
        stale = true;
        break;
      case facts::PinFate::kUnknown:
        d += std::string("unknown: ") + facts::ProbeWhyText(f.m.probe.why[i]);
        if (f.m.probe.why[i] == facts::ProbeWhy::kFailed)
          d += " (" + std::string(strerror(f.m.probe.err[i])) + ")";
        break;
    }
  }
  d += f.probed_now ? ". Probed now (io_uring registered buffers, fork, parent write)"
                    : ". From this boot's probe";
  if ((f.from & facts::kFromSystemCache) != 0) d += "; the system cache " + f.system_cache_path;
  if (!f.cache_path.empty() && ((f.from & facts::kFromUserCache) != 0 || f.probed_now))
    d += "; cached in " + f.cache_path;
  if (stale)
    return {"pinned pages", Verdict::kWarn, d,
            "registered memory of a STALE kind is silently corrupted by a fork after "
            "registration unless it is MADV_DONTFORK (see fork support)"};
  return {"pinned pages", Verdict::kOk, d, ""};
}

Check CheckRdmaCore(const DoctorFacts& f) {
  if (f.rdma_core_path.empty())
    return {"rdma-core", Verdict::kWarn, "libibverbs.so.1 not found",
            "install rdma-core's libibverbs (Debian: libibverbs1 ibverbs-providers)"};
  if (f.m.rdma_core < 0)
    return {"rdma-core", Verdict::kOk,
            "libibverbs " + f.rdma_core_path + " (version not in its name)", ""};
  std::string d = "rdma-core " + std::to_string(f.m.rdma_core) + " (" + f.rdma_core_path + ")";
  if (f.m.rdma_core < 35)
    return {"rdma-core", Verdict::kWarn, d,
            "rdma-core < 35 cannot tell when the kernel makes fork support unneeded; "
            "upgrade rdma-core"};
  return {"rdma-core", Verdict::kOk, d, ""};
}

// The variables as set; what they do on this machine is the fork support check's to say.
Check CheckForkEnv() {
  std::string set;
  for (const char* v : {"RDMAV_FORK_SAFE", "IBV_FORK_SAFE", "RDMAV_HUGEPAGES_SAFE"}) {
    const char* x = getenv(v);
    if (!x) continue;
    set += std::string(set.empty() ? "" : ", ") + v + "=" + x;
  }
  return {"fork env", Verdict::kOk,
          set.empty() ? "RDMAV_FORK_SAFE, IBV_FORK_SAFE, RDMAV_HUGEPAGES_SAFE unset"
                      : set + " (what this does here: see fork support)",
          ""};
}

// What a fork after registration does to each memory kind without fork support: the kinds
// it leaves intact, those it leaves stale in the parent and those nobody can tell, and that
// as a sentence.
struct WithoutForkSupport {
  std::vector<facts::MemoryKind> intact, stale, unknown;
  std::string sentence;
};

WithoutForkSupport ForkWithoutSupport(const facts::MachineFacts& m) {
  facts::MachineFacts off = m;
  off.fork_support = facts::ForkSupportBy::kOff;
  WithoutForkSupport w;
  std::string unknown_why, stale_why;
  for (facts::MemoryKind k : kDoctorKinds) {
    facts::RangeVerdict v = facts::DecideRange(off, {k, facts::Tri::kNo});
    if (v.effect == facts::ForkEffect::kNothing) w.intact.push_back(k);
    if (v.effect == facts::ForkEffect::kParentCorruption) {
      w.stale.push_back(k);
      if (stale_why.empty()) stale_why = BasisOf(v);
    }
    if (v.effect == facts::ForkEffect::kUnknown) {
      w.unknown.push_back(k);
      if (unknown_why.empty()) unknown_why = BasisOf(v);
    }
  }
  std::string& without = w.sentence;
  without = "Without fork support a fork after registration leaves ";
  if (!w.intact.empty()) without += KindList(w.intact) + " memory intact";
  if (!w.stale.empty())
    without += std::string(w.intact.empty() ? "" : ", ") + KindList(w.stale) +
               " memory STALE in the parent (" + stale_why + ")";
  if (!w.unknown.empty())
    without += std::string(w.intact.empty() && w.stale.empty() ? "" : "; for ") +
               KindList(w.unknown) + " memory it is unknown (" + unknown_why + ")";
  return w;
}

// Fork support turned on by the environment (f.fork_env): what it does here, and whether to
// unset it. `d` begins the detail.
Check ForkSupportFromEnv(const DoctorFacts& f, std::string d, const WithoutForkSupport& w) {
  const facts::MachineFacts& m = f.m;
  const std::vector<facts::MemoryKind>& stale = w.stale;
  const std::vector<facts::MemoryKind>& unknown = w.unknown;
  const std::string& without = w.sentence;
  std::string var = f.fork_env.substr(0, f.fork_env.find('='));
  facts::Tri marks = facts::RegistrationMarksDontfork(m);
  if (marks == facts::Tri::kNo)
    return {"fork support", Verdict::kOk,
            d +
                ": rdma-core >= 51 does nothing here (the kernel reports copy-on-fork), so "
                "registrations are not MADV_DONTFORK. A fork after registration: " +
                EffectsLine(m),
            ""};
  if (marks == facts::Tri::kUnknown)
    return {"fork support", Verdict::kWarn,
            d +
                ": with the rdma-core version unknown, whether registrations are "
                "MADV_DONTFORK here is not known. " +
                without,
            "fork workers before RDMA init; the shim's message shows the ranges' dc flags"};
  std::string reg =
      m.reported_cof != facts::Tri::kYes
          ? ": so rdma-core marks every registration MADV_DONTFORK (>= 51 too: it skips that "
            "only where the kernel reports copy-on-fork)"
      : stale.empty() && unknown.empty()
          ? ": rdma-core < 51 marks every registration MADV_DONTFORK although this kernel "
            "does not need it"
          : ": rdma-core < 51 marks every registration MADV_DONTFORK";
  d += reg +
       ", and a forked child that touches registered memory (or heap sharing its pages) "
       "dies with SIGSEGV. " +
       without;
  if (facts::HugetlbRegistrationMayFail(m) == facts::Tri::kYes)
    d += ". Registering hugetlb memory can fail (rdma-core marks it in 4 KiB steps: ibv_reg_mr "
         "EINVAL on 5.10) unless RDMAV_HUGEPAGES_SAFE=1";
  if (stale.empty() && unknown.empty())
    return {"fork support", Verdict::kWarn, d,
            "unset " + var +
                ": here it only kills children (the kernel keeps the parent's "
                "data without it)"};
  if (stale.empty())
    return {"fork support", Verdict::kWarn, d,
            "unset " + var + " unless the program registers " + KindList(unknown) +
                " memory; better: fork workers before RDMA init"};
  return {"fork support", Verdict::kWarn, d,
          "fork workers before RDMA init and unset " + var + "; keep it only if the program " +
              "must fork after registering " + KindList(stale) +
              " memory, and then its children must not touch registered memory"};
}

// Fork support not turned on by the environment: what a fork after registration does, and
// whether a library may still turn it on (UCX, NCCL). `rc_kernel`: rdma-core and the kernel.
Check ForkSupportNotSet(const facts::MachineFacts& m, const std::string& rc_kernel,
                        const WithoutForkSupport& w) {
  const std::vector<facts::MemoryKind>& stale = w.stale;
  const std::vector<facts::MemoryKind>& unknown = w.unknown;
  facts::Tri marks_if_on = [&] {
    facts::MachineFacts on = m;
    on.fork_support = facts::ForkSupportBy::kForkInit;
    return facts::RegistrationMarksDontfork(on);
  }();
  const char* ucx = getenv("UCX_IB_FORK_INIT");
  std::string ucx_state = ucx != nullptr
                              ? std::string("UCX_IB_FORK_INIT=") + ucx
                              : std::string("UCX_IB_FORK_INIT unset (UCX's default: try)");
  bool ucx_off = ucx != nullptr && (std::string(ucx) == "n" || std::string(ucx) == "no" ||
                                    std::string(ucx) == "0" || std::string(ucx) == "off");
  std::string d =
      "not turned on by the environment; " + rc_kernel + "; " + ucx_state + ". " + w.sentence;
  if (marks_if_on == facts::Tri::kYes && !ucx_off) {
    d += ". A library can still call ibv_fork_init() itself - UCX does, NCCL always - and then "
         "this rdma-core marks its registrations MADV_DONTFORK (a child that touches them dies); "
         "the shim's message names the caller";
    if (stale.empty() && unknown.empty()) d += ". UCX_IB_FORK_INIT=n: not needed on this kernel";
  }
  if (!stale.empty())
    return {"fork support", Verdict::kWarn, d,
            "fork workers before RDMA init (or start them with spawn/posix_spawn). If a fork "
            "after registration cannot be avoided, RDMAV_FORK_SAFE=1 (with "
            "RDMAV_HUGEPAGES_SAFE=1 for hugetlb) keeps the parent's " +
                KindList(stale) +
                " memory intact by making registered memory MADV_DONTFORK: the child then must "
                "not touch it"};
  return {"fork support", Verdict::kOk, d, ""};
}

// The rdma-core x kernel x who case, per memory kind, from the rule.
Check CheckForkSupport(const DoctorFacts& f) {
  const facts::MachineFacts& m = f.m;
  std::string rc = m.rdma_core >= 0 ? "rdma-core " + std::to_string(m.rdma_core) : "rdma-core ?";
  std::string kernel = m.reported_cof == facts::Tri::kYes  ? "copy-on-fork kernel"
                       : m.reported_cof == facts::Tri::kNo ? "kernel reports no copy-on-fork"
                                                           : "kernel does not report copy-on-fork";
  WithoutForkSupport w = ForkWithoutSupport(m);
  if (!f.fork_env.empty())
    return ForkSupportFromEnv(
        f, "on, turned on by the environment (" + f.fork_env + "); " + rc + ", " + kernel, w);
  return ForkSupportNotSet(m, rc + ", " + kernel, w);
}

Check CheckMemlock() {
  rlimit rl{};
  getrlimit(RLIMIT_MEMLOCK, &rl);
  if (rl.rlim_cur == RLIM_INFINITY) return {"memlock limit", Verdict::kOk, "unlimited", ""};
  std::string d = std::to_string(rl.rlim_cur / 1024) + " KiB (hard " +
                  (rl.rlim_max == RLIM_INFINITY ? std::string("unlimited")
                                                : std::to_string(rl.rlim_max / 1024) + " KiB") +
                  ")";
  if (rl.rlim_cur < (rlim_t{64} << 20))
    return {"memlock limit", Verdict::kWarn, d,
            "memory registration pins pages and fails with ENOMEM/EPERM past this: raise it "
            "(ulimit -l unlimited; memlock in /etc/security/limits.conf; LimitMEMLOCK= for "
            "systemd; --ulimit memlock=-1 for docker)"};
  return {"memlock limit", Verdict::kOk, d, ""};
}

Check CheckMapCount() {
  std::string m = Trim(ReadFirstLine("/proc/sys/vm/max_map_count"));
  long max = atol(m.c_str());
  long count = 0;
  std::ifstream maps("/proc/self/maps");
  for (std::string l; std::getline(maps, l);) ++count;
  std::string d =
      "vm.max_map_count " + (m.empty() ? "?" : m) + ", this process maps " + std::to_string(count);
  if (max <= 0) return {"vm.max_map_count", Verdict::kWarn, d, "cannot read it"};
  if (max < 65530)
    return {"vm.max_map_count", Verdict::kWarn, d,
            "below the default 65530: many registrations with fork support on split mappings "
            "and can exhaust it (sysctl -w vm.max_map_count=262144)"};
  return {"vm.max_map_count", Verdict::kOk, d, ""};
}

// dlopen in a child process: a broken library must not take doctor down.
std::string TryDlopen(const std::string& path) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return std::string("pipe: ") + strerror(errno);
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return std::string("fork: ") + strerror(errno);
  }
  if (pid == 0) {
    close(p[0]);
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      if (e && write(p[1], e, strlen(e)) < 0) _exit(3);
      _exit(1);
    }
    _exit(0);
  }
  close(p[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR);)
    if (n > 0) msg.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return "";
  if (!msg.empty()) return msg;
  if (WIFSIGNALED(st))
    return "loading it killed the process with signal " + std::to_string(WTERMSIG(st));
  return "dlopen failed";
}

// Whether `path` (LocateShim's find, "" when it found nothing) loads; `missing` is the check
// when it was not found.
void CheckLoads(const std::string& name, const std::string& path, Check missing,
                std::vector<Check>* out) {
  if (path.empty()) {
    out->push_back(std::move(missing));
  } else if (std::string e = TryDlopen(path); !e.empty()) {
    out->push_back({name, Verdict::kFail, path + " does not load: " + e,
                    "rebuild/reinstall it for this system"});
  } else {
    out->push_back({name, Verdict::kOk, path + " loads", ""});
  }
}

void CheckShim(const char* argv0, std::vector<Check>* out) {
  ShimLocation loc = LocateShim(argv0);
  std::string searched;
  for (const auto& d : loc.searched) searched += (searched.empty() ? "" : ", ") + d;
  CheckLoads("shim", loc.preload,
             {"shim", Verdict::kFail, std::string(kPreloadName) + " not found",
              "searched " + searched +
                  "; install forkguard (scripts/install PREFIX) or set FORKGUARD_SHIM_DIR"},
             out);
  CheckLoads("audit module", loc.audit,
             {"audit module", Verdict::kWarn, std::string(kAuditName) + " not found",
              "without it, libibverbs calls through dlopen handles (NCCL, OneFlow, brpc) are "
              "seen only at fork time by the descriptor backstop"},
             out);
  const char* pre = getenv("LD_PRELOAD");
  std::string preload = pre ? pre : "";
  if (preload.find(kPreloadName) != std::string::npos)
    out->push_back({"active", Verdict::kOk, "libforkguard.so is in LD_PRELOAD here", ""});
  else
    out->push_back({"active", Verdict::kOk,
                    "not preloaded in this environment (normal: `forkguard run -- CMD` "
                    "preloads it per program)",
                    ""});
  if (const char* m = getenv("FORKGUARD_MODE")) {
    std::string mode = m;
    if (!schema::IsModeName(mode.c_str()))
      out->push_back({"FORKGUARD_MODE", Verdict::kWarn, "\"" + mode + "\" is not a mode",
                      "use warn, error, abort, fix or off (the shim falls back to warn)"});
    else
      out->push_back({"FORKGUARD_MODE", Verdict::kOk, mode, ""});
  }
}

// The verdict's column in the report, by Verdict.
const char* Label(Verdict v) {
  static constexpr const char* kLabels[] = {"ok  ", "warn", "FAIL"};
  return kLabels[static_cast<int>(v)];
}

// Word-wrap `text` at `width` with the given continuation indent. The text quotes the
// environment, sysfs and paths: escaped first (EscapeText), so what it holds stays on its line.
std::string WrapAt(const std::string& first, const std::string& indent, const std::string& text,
                   size_t width) {
  std::istringstream in(EscapeText(text));
  std::string out, line = first, w;
  bool fresh = true;
  while (in >> w) {
    if (!fresh && line.size() + 1 + w.size() > width) {
      out += line + "\n";
      line = indent;
      fresh = true;
    }
    line += (fresh ? "" : " ") + w;
    fresh = false;
  }
  return out + line + "\n";
}

}  // namespace

const flags::FlagTable& DoctorFlags() {
  static const flags::FlagTable kTable = {flags::HelpFlag("This text.")};
  return kTable;
}

std::string DoctorHelp() {
  return kDoctorHelpHead + flags::ColumnHelp(DoctorFlags(), 4, 17) + kDoctorHelpTail;
}

int DoctorMain(int argc, char** argv, const char* argv0) {
  if (flags::PrintHelpIfAsked(flags::Options::Parse(argc, argv, DoctorFlags()), DoctorHelp)) {
    return kExitOk;
  }
  std::vector<Check> checks;
  bool have_active = false;
  checks.push_back(CheckDevices(&have_active));
  checks.push_back(CheckUverbs(have_active));
  DoctorFacts facts = GatherFacts();
  checks.push_back(CheckCopyOnFork(facts));
  checks.push_back(CheckPinnedPages(facts));
  checks.push_back(CheckRdmaCore(facts));
  checks.push_back(CheckForkEnv());
  checks.push_back(CheckForkSupport(facts));
  checks.back().detail += ". " + doctor::MatrixCell(facts);
  checks.push_back(doctor::CheckFixMode(facts));
  checks.push_back(doctor::CheckWatcher(doctor::GatherWatcherFacts()));
  checks.push_back(CheckMemlock());
  checks.push_back(CheckMapCount());
  CheckShim(argv0, &checks);

  std::string out = std::string("forkguard doctor (forkguard ") + kVersion + ")\n";
  int n[3] = {0, 0, 0};
  for (const auto& c : checks) {
    ++n[static_cast<int>(c.verdict)];
    char head[64];
    snprintf(head, sizeof head, "%s  %-17s ", Label(c.verdict), c.name.c_str());
    out += WrapAt(head, std::string(24, ' '), c.detail, 100);
    if (!c.advice.empty())
      out += WrapAt(std::string(22, ' ') + "-> ", std::string(25, ' '), c.advice, 100);
  }
  out += "summary: " + std::to_string(n[0]) + " ok, " + std::to_string(n[1]) + " warn, " +
         std::to_string(n[2]) + " fail\n";
  fputs(out.c_str(), stdout);
  return n[2] > 0 ? kExitFail : kExitOk;
}

}  // namespace forkguard::cli
