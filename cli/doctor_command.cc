// `forkguard doctor`: is this machine and environment ready, and what to fix.
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/shim_locator.h"
#include "flags/flags.h"

namespace forkguard::cli {

const char kDoctorHelp[] = R"(NAME
    forkguard doctor - check this machine and environment for RDMA fork safety

SYNOPSIS
    forkguard doctor

DESCRIPTION
    Prints one line per check with a verdict (ok, warn, fail) and, when it is
    not ok, what to do:

      RDMA devices      /sys/class/infiniband: devices and port states
      uverbs access     /dev/infiniband/uverbs* can be opened by this user
      copy-on-fork      whether the kernel copies pinned (registered) pages on
                        fork: the RDMA netlink attribute COPY_ON_FORK, else the
                        kernel version (>= 5.13)
      rdma-core         the libibverbs version (from the library's file name)
      fork env          RDMAV_FORK_SAFE / IBV_FORK_SAFE / RDMAV_HUGEPAGES_SAFE:
                        with fork support on, registered memory is
                        MADV_DONTFORK and a forked child that touches it dies
      fork support      the case this machine is in: rdma-core version x kernel
                        copy-on-fork x who turns fork support on. On a
                        copy-on-fork kernel rdma-core < 51 still marks every
                        registration MADV_DONTFORK once fork support is on
                        (RDMAV_FORK_SAFE/IBV_FORK_SAFE set to any value, or
                        ibv_fork_init() called by a library: UCX unless
                        UCX_IB_FORK_INIT=n, NCCL always); from 51 on it does
                        nothing there. The shim's message names the caller.
      memlock limit     RLIMIT_MEMLOCK (registration pins memory)
      vm.max_map_count  against this process's map count (MADV_DONTFORK splits
                        mappings; each registration can add two)
      shim              libforkguard.so / libforkguard_audit.so found and
                        loadable (dlopen'd in a child process)
      active            whether the shim is preloaded in this environment
      FORKGUARD_MODE    a valid value when set

OPTIONS
    -h, --help   This text.

EXIT STATUS
    0    no check failed (warnings allowed)
    1    at least one check failed
    2    bad command line
)";

namespace {

enum class Verdict { kOk, kWarn, kFail };

struct Check {
  std::string name;
  Verdict verdict;
  std::string detail;
  std::string advice;  // what to do; empty when ok
};

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

// RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK from the kernel; nullopt when the RDMA
// netlink family is not there (ib_core not loaded) or does not know it.
std::optional<bool> NetlinkCopyOnFork(std::string* why) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
  if (fd < 0) {
    *why = std::string("RDMA netlink unavailable: ") + strerror(errno);
    return std::nullopt;
  }
  struct {
    nlmsghdr h;
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(0);
  req.h.nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_SYS_GET);
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.h.nlmsg_seq = 1;
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (sendto(fd, &req, req.h.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0) {
    *why = std::string("RDMA netlink send: ") + strerror(errno);
    close(fd);
    return std::nullopt;
  }
  alignas(nlmsghdr) char buf[8192];
  ssize_t n = recv(fd, buf, sizeof buf, 0);
  close(fd);
  if (n < static_cast<ssize_t>(NLMSG_HDRLEN)) {
    *why = "RDMA netlink: no answer";
    return std::nullopt;
  }
  auto* h = reinterpret_cast<nlmsghdr*>(buf);
  if (!NLMSG_OK(h, static_cast<unsigned>(n)) || h->nlmsg_type == NLMSG_ERROR) {
    *why = "RDMA netlink: SYS_GET not supported by this kernel";
    return std::nullopt;
  }
  // Attributes follow the header directly (no family header for RDMA nldev).
  char* p = static_cast<char*>(NLMSG_DATA(h));
  char* end = reinterpret_cast<char*>(h) + std::min<size_t>(h->nlmsg_len, static_cast<size_t>(n));
  while (p + sizeof(nlattr) <= end) {
    auto* a = reinterpret_cast<nlattr*>(p);
    if (a->nla_len < sizeof(nlattr) || p + a->nla_len > end) break;
    if ((a->nla_type & NLA_TYPE_MASK) == RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK &&
        a->nla_len >= NLA_HDRLEN + 1)
      return *reinterpret_cast<unsigned char*>(p + NLA_HDRLEN) != 0;
    p += NLA_ALIGN(a->nla_len);
  }
  *why = "RDMA netlink: kernel does not report COPY_ON_FORK";
  return std::nullopt;
}

bool KernelAtLeast(const std::string& release, int major, int minor) {
  int a = 0, b = 0;
  if (sscanf(release.c_str(), "%d.%d", &a, &b) != 2) return false;
  return a > major || (a == major && b >= minor);
}

Check CheckCopyOnFork(std::optional<bool>* cof_out) {
  utsname u{};
  uname(&u);
  std::string rel = u.release;
  std::string why;
  std::optional<bool> nl = NetlinkCopyOnFork(&why);
  bool by_version = KernelAtLeast(rel, 5, 13);
  *cof_out = nl ? nl : std::optional<bool>(by_version);
  if (nl && *nl)
    return {"copy-on-fork", Verdict::kOk,
            "kernel " + rel +
                " reports COPY_ON_FORK=1 (RDMA netlink): pinned pages are copied "
                "for the child, the parent keeps its own",
            ""};
  if (nl && !*nl)
    return {"copy-on-fork", Verdict::kWarn,
            "kernel " + rel + " reports COPY_ON_FORK=0 (RDMA netlink)",
            "a fork after memory registration can silently corrupt the parent's RDMA buffers "
            "unless fork support is on; fork workers before RDMA init"};
  if (by_version)
    return {"copy-on-fork", Verdict::kOk,
            "kernel " + rel + " >= 5.13 copies pinned pages on fork (" + why + ")", ""};
  return {"copy-on-fork", Verdict::kWarn,
          "kernel " + rel + " < 5.13: no copy-on-fork (" + why + ")",
          "a fork after memory registration can silently corrupt the parent's RDMA buffers "
          "unless fork support is on (RDMAV_FORK_SAFE=1); better: fork workers before RDMA "
          "init"};
}

Check CheckRdmaCore(int* version_out) {
  const char* candidates[] = {"/usr/lib/x86_64-linux-gnu/libibverbs.so.1",
                              "/usr/lib64/libibverbs.so.1", "/usr/lib/libibverbs.so.1",
                              "/usr/local/lib/libibverbs.so.1"};
  for (const char* c : candidates) {
    char* real = realpath(c, nullptr);
    if (!real) continue;
    std::string r = real;
    free(real);
    std::string base = Basename(r);  // libibverbs.so.1.14.44.0
    int a = 0, b = 0, v = 0;
    if (sscanf(base.c_str(), "libibverbs.so.%d.%d.%d", &a, &b, &v) == 3) {
      *version_out = v;
      std::string d = "rdma-core " + std::to_string(v) + " (" + r + ")";
      if (v < 35)
        return {"rdma-core", Verdict::kWarn, d,
                "rdma-core < 35 cannot tell when the kernel makes fork support unneeded; "
                "upgrade rdma-core"};
      return {"rdma-core", Verdict::kOk, d, ""};
    }
    return {"rdma-core", Verdict::kOk, "libibverbs " + r + " (version not in its name)", ""};
  }
  return {"rdma-core", Verdict::kWarn, "libibverbs.so.1 not found",
          "install rdma-core's libibverbs (Debian: libibverbs1 ibverbs-providers)"};
}

Check CheckForkEnv(std::optional<bool> cof) {
  std::string set;
  bool fork_safe = false;
  for (const char* v : {"RDMAV_FORK_SAFE", "IBV_FORK_SAFE", "RDMAV_HUGEPAGES_SAFE"}) {
    const char* x = getenv(v);
    if (!x) continue;
    set += std::string(set.empty() ? "" : ", ") + v + "=" + x;
    if (std::string(v) != "RDMAV_HUGEPAGES_SAFE" && *x) fork_safe = true;
  }
  if (fork_safe)
    return {"fork env", Verdict::kWarn, set,
            "fork support is on: every registered range is MADV_DONTFORK and a forked child "
            "that touches it (or heap sharing its pages) dies with SIGSEGV. Keep it only if "
            "you must fork after RDMA init on a kernel without copy-on-fork; otherwise unset it "
            "and fork workers before RDMA init (note NCCL, OneFlow and brpc turn it on "
            "themselves)"};
  if (cof && !*cof)
    return {"fork env", Verdict::kWarn, set.empty() ? "fork support off" : set,
            "no copy-on-fork and fork support off: a fork after registration corrupts the "
            "parent's buffers silently; fork workers before RDMA init"};
  return {"fork env", Verdict::kOk,
          set.empty() ? "RDMAV_FORK_SAFE, IBV_FORK_SAFE, RDMAV_HUGEPAGES_SAFE unset" : set, ""};
}

// The rdma-core x kernel copy-on-fork x who-turned-it-on matrix (issue 13).
Check CheckForkSupport(std::optional<bool> cof, int rdma_core) {
  std::string env;
  for (const char* v : {"RDMAV_FORK_SAFE", "IBV_FORK_SAFE"}) {
    // rdma-core turns fork support on when the variable is set at all, whatever its value.
    if (const char* x = getenv(v); x != nullptr && env.empty()) env = std::string(v) + "=" + x;
  }
  std::string rc = rdma_core >= 0 ? "rdma-core " + std::to_string(rdma_core) : "rdma-core ?";
  std::string kernel = !cof   ? "copy-on-fork unknown"
                       : *cof ? "copy-on-fork kernel"
                              : "kernel without copy-on-fork";
  const char* ucx = getenv("UCX_IB_FORK_INIT");
  std::string ucx_state = ucx != nullptr
                              ? std::string("UCX_IB_FORK_INIT=") + ucx
                              : std::string("UCX_IB_FORK_INIT unset (UCX's default: try)");
  bool ucx_off = ucx != nullptr && (std::string(ucx) == "n" || std::string(ucx) == "no" ||
                                    std::string(ucx) == "0" || std::string(ucx) == "off");
  bool old = rdma_core >= 0 && rdma_core < 51;
  if (!env.empty()) {
    std::string d = "on, turned on by the environment (" + env + "); " + rc + ", " + kernel;
    if (cof && *cof && old) {
      return {"fork support", Verdict::kWarn,
              d + ": rdma-core < 51 marks every registration MADV_DONTFORK although this kernel "
                  "does not need it, so a forked child that touches registered memory (or heap "
                  "sharing its pages) dies with SIGSEGV",
              "unset " + env.substr(0, env.find('=')) +
                  ": this kernel copies pinned pages on fork (rdma-core >= 51 ignores it here)"};
    }
    if (cof && *cof)
      return {"fork support", Verdict::kOk, d + ": rdma-core >= 51 does nothing here", ""};
    return {"fork support", Verdict::kOk,
            d + ": needed for a fork after registration on this kernel; registered ranges are "
                "MADV_DONTFORK and a child must not touch them",
            ""};
  }
  std::string d = "not turned on by the environment; " + rc + ", " + kernel + "; " + ucx_state;
  if (cof && *cof && old && !ucx_off) {
    return {"fork support", Verdict::kOk,
            d + ". A library can still call ibv_fork_init() itself - UCX does (set "
                "UCX_IB_FORK_INIT=n, not needed on this kernel), NCCL always - and then rdma-core "
                "< 51 marks its registrations MADV_DONTFORK; the shim's message names the caller",
            ""};
  }
  return {"fork support", Verdict::kOk, d, ""};
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

void CheckShim(const char* argv0, std::vector<Check>* out) {
  ShimLocation loc = LocateShim(argv0);
  if (loc.preload.empty()) {
    std::string searched;
    for (const auto& d : loc.searched) searched += (searched.empty() ? "" : ", ") + d;
    out->push_back({"shim", Verdict::kFail, std::string(kPreloadName) + " not found",
                    "searched " + searched +
                        "; install forkguard (scripts/install PREFIX) or set "
                        "FORKGUARD_SHIM_DIR"});
  } else if (std::string e = TryDlopen(loc.preload); !e.empty()) {
    out->push_back({"shim", Verdict::kFail, loc.preload + " does not load: " + e,
                    "rebuild/reinstall it for this system"});
  } else {
    out->push_back({"shim", Verdict::kOk, loc.preload + " loads", ""});
  }
  if (loc.audit.empty()) {
    out->push_back({"audit module", Verdict::kWarn, std::string(kAuditName) + " not found",
                    "without it, libibverbs calls through dlopen handles (NCCL, OneFlow, "
                    "brpc) are seen only at fork time by the descriptor backstop"});
  } else if (std::string e = TryDlopen(loc.audit); !e.empty()) {
    out->push_back({"audit module", Verdict::kFail, loc.audit + " does not load: " + e,
                    "rebuild/reinstall it for this system"});
  } else {
    out->push_back({"audit module", Verdict::kOk, loc.audit + " loads", ""});
  }
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
    if (mode != "warn" && mode != "error" && mode != "abort" && mode != "off")
      out->push_back({"FORKGUARD_MODE", Verdict::kWarn, "\"" + mode + "\" is not a mode",
                      "use warn, error, abort or off (the shim falls back to warn)"});
    else
      out->push_back({"FORKGUARD_MODE", Verdict::kOk, mode, ""});
  }
}

const char* Label(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return "ok  ";
    case Verdict::kWarn:
      return "warn";
    case Verdict::kFail:
      return "FAIL";
  }
  return "?";
}

// Word-wrap `text` at `width` with the given continuation indent.
std::string WrapAt(const std::string& first, const std::string& indent, const std::string& text,
                   size_t width) {
  std::istringstream in(text);
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

const std::vector<option> kDoctorOptions = OptionTable({});

int DoctorMain(int argc, char** argv, const char* argv0) {
  if (flags::Options::Parse(argc, argv, kDoctorOptions.data()).Has("help")) {
    fputs(kDoctorHelp, stdout);
    return kExitOk;
  }
  std::vector<Check> checks;
  bool have_active = false;
  checks.push_back(CheckDevices(&have_active));
  checks.push_back(CheckUverbs(have_active));
  std::optional<bool> cof;
  checks.push_back(CheckCopyOnFork(&cof));
  int rdma_core = -1;
  checks.push_back(CheckRdmaCore(&rdma_core));
  checks.push_back(CheckForkEnv(cof));
  checks.push_back(CheckForkSupport(cof, rdma_core));
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
