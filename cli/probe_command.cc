// forkguard probe: this boot's pin probe (facts/pin_probe.h), printed per memory kind; with
// --system, run afresh by root and written to the system cache every process reads.
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"
#include "cli/json.h"
#include "facts/fork_rule.h"
#include "facts/machine_facts.h"
#include "facts/pin_probe.h"
#include "flags/flags.h"

namespace forkguard::cli {
namespace {

const char kProbeHelpHead[] = R"(NAME
    forkguard probe - measure what this kernel does to pinned pages at fork, once per boot

SYNOPSIS
    forkguard probe [--system] [--json] [--quiet]

DESCRIPTION
    The pin probe, per memory kind (anonymous, thp, hugetlb): whether the kernel
    copies a long-term pinned page for the child at fork (intact), or leaves it
    shared so that the parent's next write goes to a new page while the device
    keeps the old one (stale: what a fork does to an RDMA registration there).
    It pins a buffer with io_uring registered buffers, as ib_umem pins a memory
    registration, forks a child that waits, writes in the parent and has the
    kernel read the pinned page: no RDMA device, a few milliseconds. A kind it
    cannot measure is unknown with the reason (no io_uring, io_uring disabled,
    no free hugetlb page, THP off, the memlock limit).

    The shim never probes (the probe forks): it reads this boot's answer at its
    first RDMA call from two caches, per kind a measured answer from either
    winning, the user's first:
      the user's     $FORKGUARD_CACHE_DIR, else $XDG_CACHE_HOME/forkguard,
                     else ~/.cache/forkguard: pin-probe-BOOT_ID (0600), written
                     by `forkguard probe`, `doctor` and `run`
      the system's   /run/forkguard/pin-probe-BOOT_ID, written by `forkguard
                     probe --system` (root) and trusted only as root's (the
                     directory and the file owned by root and writable by no one
                     else); read under AT_SECURE too

    Without --system: this boot's answer as the shim reads it; a kind the caches
    lack, or have as unknown for a reason that can change within a boot, is
    probed now and written to the user's cache.
    With --system: every kind probed afresh and written to the system cache
    (the directory 0755, the file 0644 renamed into place; no symbolic link
    followed). The forkguard-probe.service unit runs it at boot once the hugetlb
    pages are reserved (after systemd-sysctl.service), and the SPANK plugin when
    slurmd starts; run it again after reserving hugetlb pages later.

    Each kind is one line, "KIND FATE" or "KIND unknown: REASON", then a line
    saying where the answer came from and where it was written.

OPTIONS
)";

const char kProbeHelpTail[] = R"(
EXIT STATUS
    0    the answer was measured or read (a kind left unknown is not a failure)
    1    --system: the system cache could not be written (the reason on stderr)
    2    bad command line; --system by a user other than root
)";

constexpr facts::MemoryKind kProbed[] = {facts::MemoryKind::kAnonymous, facts::MemoryKind::kThp,
                                         facts::MemoryKind::kHugetlb};

std::string FateText(const facts::PinProbe& p, int i) {
  switch (p.fate[i]) {
    case facts::PinFate::kIntact:
      return "intact (copied for the child at fork: the pinned page stays the parent's)";
    case facts::PinFate::kStale:
      return "STALE (left to the child: the parent's next write goes to a new page)";
    case facts::PinFate::kUnknown:
      break;
  }
  std::string s = std::string("unknown: ") + facts::ProbeWhyText(p.why[i]);
  if (p.why[i] == facts::ProbeWhy::kFailed) s += " (" + std::string(strerror(p.err[i])) + ")";
  return s;
}

struct ProbeOutcome {
  facts::PinProbe p;
  bool probed_now = false;
  unsigned from = 0;    // facts::kFromUserCache | kFromSystemCache
  std::string written;  // the cache file written, "" for none
  std::string user_cache, system_cache;
};

std::string Text(const ProbeOutcome& o) {
  std::string out;
  char line[512];
  for (facts::MemoryKind k : kProbed) {
    int i = static_cast<int>(k);
    snprintf(line, sizeof(line), "%-10s %s\n", facts::MemoryKindName(k), FateText(o.p, i).c_str());
    out += line;
  }
  std::string from;
  if ((o.from & facts::kFromUserCache) != 0) from += "the user's cache " + o.user_cache;
  if ((o.from & facts::kFromSystemCache) != 0) {
    from += std::string(from.empty() ? "" : " and ") + "the system cache " + o.system_cache;
  }
  if (o.probed_now) {
    out +=
        from.empty() ? "probed now" : "from " + from + ", what they left unknown probed again now";
  } else {
    out += "from " + from;
  }
  out += o.written.empty() ? "\n" : "; written to " + o.written + "\n";
  return out;
}

std::string JsonText(const ProbeOutcome& o) {
  Json root = Json::object();
  root["schema"] = "forkguard.probe/1";
  utsname u{};
  uname(&u);
  root["kernel"] = u.release;
  char boot[64];
  root["boot_id"] = facts::BootId(boot, sizeof(boot)) ? Json(boot) : Json();
  Json kinds = Json::object();
  for (facts::MemoryKind k : kProbed) {
    int i = static_cast<int>(k);
    Json j = Json::object();
    j["fate"] = facts::PinFateName(o.p.fate[i]);
    j["why"] =
        o.p.fate[i] == facts::PinFate::kUnknown ? Json(facts::ProbeWhyName(o.p.why[i])) : Json();
    j["errno"] = o.p.why[i] == facts::ProbeWhy::kFailed ? Json(o.p.err[i]) : Json();
    kinds[facts::MemoryKindName(k)] = std::move(j);
  }
  root["kinds"] = std::move(kinds);
  root["probed_now"] = o.probed_now;
  Json from = Json::array();
  if ((o.from & facts::kFromUserCache) != 0) from.emplace_back(o.user_cache);
  if ((o.from & facts::kFromSystemCache) != 0) from.emplace_back(o.system_cache);
  root["read_from"] = std::move(from);
  root["written_to"] = o.written.empty() ? Json() : Json(o.written);
  return WriteJson(root) + "\n";
}

}  // namespace

const flags::FlagTable& ProbeFlags() {
  static const flags::FlagTable kTable = {
      {"system", "", "",
       "probe afresh as root and write the system cache,\n/run/forkguard/pin-probe-BOOT_ID"},
      {"json", "", "", "print the answer as JSON (schema forkguard.probe/1)"},
      {"quiet", "", "", "print nothing on standard output (errors still go\nto standard error)",
       'q'},
      flags::HelpFlag("This text."),
  };
  return kTable;
}

std::string ProbeHelp() {
  return kProbeHelpHead + flags::ColumnHelp(ProbeFlags(), 4, 17) + kProbeHelpTail;
}

int ProbeMain(int argc, char** argv) {
  flags::Options a = flags::Options::Parse(argc, argv, ProbeFlags());
  if (flags::PrintHelpIfAsked(a, ProbeHelp)) return kExitOk;
  ProbeOutcome o;
  char path[1200];
  if (facts::PinProbeCachePath(path, sizeof(path))) o.user_cache = path;
  if (facts::SystemPinProbeCachePath(facts::kSystemPinProbeDir, path, sizeof(path))) {
    o.system_cache = path;
  }
  int status = kExitOk;
  if (a.Has("system")) {
    if (geteuid() != 0) {
      throw flags::UsageError(std::string("--system writes ") + facts::kSystemPinProbeDir +
                              " and must run as root (without it: this user's cache)");
    }
    o.p = facts::RunPinProbe();
    o.probed_now = true;
    char err[512];
    if (facts::WriteSystemPinProbeCache(o.p, facts::kSystemPinProbeDir, err, sizeof(err))) {
      o.written = o.system_cache;
    } else {
      fprintf(stderr, "forkguard probe: cannot write the system cache: %s\n", err);
      status = kExitFail;
    }
  } else {
    o.p = facts::PinProbeForThisBoot(&o.probed_now, &o.from);
    // What PinProbeForThisBoot wrote, if it probed: the user's cache, when it can be named.
    facts::PinProbe check;
    if (o.probed_now && facts::ReadUserPinProbeCache(&check, false)) o.written = o.user_cache;
  }
  if (!a.Has("quiet")) fputs((a.Has("json") ? JsonText(o) : Text(o)).c_str(), stdout);
  return status;
}

}  // namespace forkguard::cli
