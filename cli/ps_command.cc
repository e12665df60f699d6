// forkguard ps: the RDMA processes of this node, what they hold and what a fork would do to
// each now. Needs neither the shim nor root (api/census.h).
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "api/census.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json.h"
#include "cli/watch_state.h"
#include "flags/flags.h"
#include "formats/event_schema.h"

namespace forkguard::cli {

namespace {

const char kPsHelpHead[] = R"(NAME
    forkguard ps - the processes on this node that hold RDMA state, and what a fork would do

SYNOPSIS
    forkguard ps [--format text|json]

DESCRIPTION
    Needs neither the shim nor root. For each process that holds RDMA objects or
    descriptors:
      objects   device contexts, PDs, MRs (and their bytes), CQs, QPs and rdma_cm
                ids, from the kernel's RDMA netlink resource dumps (what `rdma
                resource show` prints). The kernel names the thread that created
                each object; it is mapped to its process. An object whose thread
                has exited has no pid: such objects are counted apart.
      VmPin     from /proc/PID/status
      fds, dc   descriptors on /dev/infiniband (uverbs*, rdma_cm) and mappings the
                kernel marks MADV_DONTFORK ("dc" in /proc/PID/smaps): only where
                /proc lets this user read them ("-" otherwise, and a line says
                so; JSON: null, and "unreadable" names the files)
      job, rank from the process's environment (the launchers' variables, as the
                shim reads them), where readable
      shim      whether libforkguard.so is mapped in it (/proc/PID/maps), and then its
                mode as the process's environment sets it (FORKGUARD_MODE: warn, error,
                abort, fix, off; warn when unset or not a mode, as the shim reads it;
                "yes" when the environment is not readable)
      fork now  what a fork of it would be now, by the shim's own rule: clean, or
                hazard (child-segv, parent-corruption, inherited-rdma). Without the
                registrations' addresses (the kernel does not report them), every
                MADV_DONTFORK mapping of a process with registered memory counts
                as registered, as the shim counts registrations it did not see.
                When a process with registered memory has an unreadable smaps,
                whether a fork would be child-segv is not known: said after the
                verdict (JSON "verdict_unknown"), not guessed.
    Processes that hold nothing are not listed.

OPTIONS
)";
const char kPsHelpTail[] = R"(
EXIT STATUS
    0    the census was taken (even with no RDMA process)
    1    the RDMA netlink dump failed (the processes found by their descriptors
         are still listed)
    2    bad command line
)";

}  // namespace

const flags::FlagTable& PsFlags() {
  static const flags::FlagTable kTable = {
      {"format", "F", "text", "{default} (default) or json (schema forkguard.ps/1)"},
      flags::HelpFlag("This text."),
  };
  return kTable;
}

std::string PsHelp() { return kPsHelpHead + flags::ColumnHelp(PsFlags(), 4, 17) + kPsHelpTail; }

namespace {

std::string Opt(const std::optional<int>& v) { return v ? std::to_string(*v) : "-"; }

Json OptInt(const std::optional<int>& v) { return v ? Json(*v) : Json(); }

// The /proc files of `p` this user could not read ("environ", "fd", "smaps", "maps").
std::vector<std::string> Unreadable(const api::ProcessFacts& p) {
  std::vector<std::string> out;
  if (!p.job) out.push_back("environ");
  if (!p.uverbs_fds) out.push_back("fd");
  if (!p.dc_count) out.push_back("smaps");
  if (!p.shim_loaded) out.push_back("maps");
  return out;
}

// The shim's mode in a process that loaded it, as the shim reads FORKGUARD_MODE (any case;
// unset or not a mode: warn); nullopt when its environment is not readable.
std::optional<std::string> ShimMode(const api::ProcessFacts& p) {
  if (!p.mode_env) return std::nullopt;
  std::string m;
  for (char ch : *p.mode_env) m += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  return schema::IsModeName(m.c_str()) ? m : std::string(schema::kModeWarn);
}

// What the verdict could not take into account, "" when nothing: without smaps the
// MADV_DONTFORK marks of registered memory (child-segv) are not known.
std::string VerdictUnknown(const api::ProcessFacts& p) {
  if (p.dc_count || p.objects.mrs == 0) return "";
  return "child-segv not known (smaps not readable)";
}

}  // namespace

// Names come from other users' /proc (comm, environ): Fit escapes them (EscapeText).
std::string PsText(const api::Census& c) {
  std::string out;
  char line[512];
  snprintf(line, sizeof(line),
           "%-7s %-15s %-10s %-5s %-5s %4s %4s %4s %9s %4s %4s %4s %8s %4s %4s  %s\n", "PID",
           "COMMAND", "JOB", "RANK", "SHIM", "CTX", "PD", "MR", "MR-BYTES", "CQ", "QP", "CM",
           "VMPIN", "FDS", "DC", "FORK NOW");
  out += line;
  bool unreadable = false;
  for (const api::ProcessFacts& p : c.processes) {
    ForkVerdict v = api::DecideForProcess(p, c.cof.value, nullptr);
    std::string shim = !p.shim_loaded ? "-" : !*p.shim_loaded ? "no" : ShimMode(p).value_or("yes");
    std::string job = p.job ? (p.job->empty() ? "" : *p.job) : "-";
    std::string rank = p.rank ? std::to_string(*p.rank) : (p.job ? "" : "-");
    std::string fds =
        p.uverbs_fds ? std::to_string(*p.uverbs_fds + p.rdma_cm_fds.value_or(0)) : "-";
    std::string pin = p.vm_pin_kb >= 0 ? FormatBytes(p.vm_pin_kb * 1024) : "-";
    snprintf(line, sizeof(line),
             "%-7d %-15s %-10s %-5s %-5s %4d %4d %4d %9s %4d %4d %4d %8s %4s %4s  %s\n", p.pid,
             Fit(p.comm, 15).c_str(), Fit(job, 10).c_str(), rank.c_str(), shim.c_str(),
             p.objects.contexts, p.objects.pds, p.objects.mrs,
             FormatBytes(static_cast<int64_t>(p.objects.mr_bytes)).c_str(), p.objects.cqs,
             p.objects.qps, p.objects.cm_ids, pin.c_str(), fds.c_str(), Opt(p.dc_count).c_str(),
             api::VerdictText(v.reasons).c_str());
    out += line;
    std::string unknown = VerdictUnknown(p);
    if (!unknown.empty()) {
      out.pop_back();
      out += "; " + unknown + "\n";
    }
    unreadable = unreadable || !Unreadable(p).empty();
  }
  if (c.processes.empty()) out += "(no process holds RDMA state)\n";
  if (unreadable) {
    out += "-: not readable as uid " + std::to_string(geteuid()) +
           " (another user's /proc/PID/environ, fd, smaps and maps: run as root or as the "
           "process's owner)\n";
  }
  if (c.orphan_objects > 0) {
    const api::ResourceCounts& o = c.orphans;
    out +=
        "objects whose creating thread has exited (no pid): " + std::to_string(c.orphan_objects) +
        " (" + std::to_string(o.contexts) + " ctx, " + std::to_string(o.pds) + " pd, " +
        std::to_string(o.mrs) + " mr, " + std::to_string(o.cqs) + " cq, " + std::to_string(o.qps) +
        " qp, " + std::to_string(o.cm_ids) + " cm_id)\n";
  }
  if (!c.netlink_error.empty()) out += EscapeText(c.netlink_error) + "\n";
  return out;
}

namespace {

// What a running forkguard watch knows (cli/watch_state.h): a line per process of the
// census it has judged a fork of.
std::string WatcherText(const api::Census& c, const WatchState& w) {
  std::string out = "forkguard watch (pid " + std::to_string(w.pid) + ", enforce " + w.enforce +
                    ", " + EscapeText(w.hook) + ") judges every fork on this node; logs in " +
                    EscapeText(w.log) + "\n";
  for (const api::ProcessFacts& p : c.processes) {
    auto it = w.processes.find(p.pid);
    if (it == w.processes.end()) continue;
    out += "  " + std::to_string(p.pid) + " " + EscapeText(p.comm) + ": " +
           std::to_string(it->second.forks) + " fork" + (it->second.forks == 1 ? "" : "s") +
           " judged (" + std::to_string(it->second.refused) + " refused), the last " +
           EscapeText(it->second.last) + "\n";
  }
  if (w.lost > 0)
    out += "  " + std::to_string(w.lost) + " records lost (its ring buffer was full)\n";
  return out;
}

// What an earlier `forkguard watch --persist` left pinned, when no watcher runs.
std::string PinnedText(const PinnedWatch& p) {
  std::string links = p.links >= 0 ? std::to_string(p.links) + " programs" : "programs";
  std::string what = p.enforce.empty() ? "" : ", enforce " + EscapeText(p.enforce);
  if (!p.hook.empty()) what += ", " + EscapeText(p.hook);
  return "no forkguard watch runs, but " + links + " of an earlier `forkguard watch --persist` " +
         "are pinned in " + kWatchPinDir + what + ": the kernel still judges" +
         (p.enforce == "off" ? "" : " (and refuses)") +
         " forks, and nothing logs them; `forkguard watch --unpin` removes them\n";
}

std::string FormatJson(const api::Census& c, const std::optional<WatchState>& w,
                       const std::optional<PinnedWatch>& pinned) {
  Json root = Json::object();
  root["schema"] = "forkguard.ps/1";
  Json devices = Json::array();
  for (const std::string& d : c.devices) devices.emplace_back(d);
  root["devices"] = std::move(devices);
  root["kernel_copy_on_fork"] =
      c.cof.value == KernelCof::kUnknown ? Json() : Json(c.cof.value == KernelCof::kYes);
  Json procs = Json::array();
  for (const api::ProcessFacts& p : c.processes) {
    ForkVerdict v = api::DecideForProcess(p, c.cof.value, nullptr);
    Json j = Json::object();
    j["pid"] = p.pid;
    j["comm"] = p.comm;
    j["job"] = p.job ? Json(*p.job) : Json();
    j["rank"] = p.rank ? Json(*p.rank) : Json();
    j["shim_loaded"] = p.shim_loaded ? Json(*p.shim_loaded) : Json();
    // The shim's mode in it (null: no shim, or its environment is not readable).
    std::optional<std::string> mode = p.shim_loaded.value_or(false) ? ShimMode(p) : std::nullopt;
    j["shim_mode"] = mode ? Json(*mode) : Json();
    Json o = Json::object();
    o["contexts"] = p.objects.contexts;
    o["pds"] = p.objects.pds;
    o["mrs"] = p.objects.mrs;
    o["mr_bytes"] = static_cast<int64_t>(p.objects.mr_bytes);
    o["cqs"] = p.objects.cqs;
    o["qps"] = p.objects.qps;
    o["cm_ids"] = p.objects.cm_ids;
    j["objects"] = std::move(o);
    j["vm_pin_kb"] = p.vm_pin_kb >= 0 ? Json(p.vm_pin_kb) : Json();
    j["uverbs_fds"] = OptInt(p.uverbs_fds);
    j["rdma_cm_fds"] = OptInt(p.rdma_cm_fds);
    j["dc_vmas"] = OptInt(p.dc_count);
    j["verdict"] = api::VerdictText(v.reasons);
    Json reasons = Json::array();
    for (Reason r : {kChildSegv, kParentCorruption, kInheritedRdma}) {
      if ((v.reasons & r) != 0) reasons.emplace_back(ReasonName(r));
    }
    j["reasons"] = std::move(reasons);
    std::string unknown = VerdictUnknown(p);
    j["verdict_unknown"] = unknown.empty() ? Json() : Json(unknown);
    Json unreadable = Json::array();
    for (const std::string& f : Unreadable(p)) unreadable.emplace_back(f);
    j["unreadable"] = std::move(unreadable);
    procs.push_back(std::move(j));
  }
  root["processes"] = std::move(procs);
  Json orphans = Json::object();
  orphans["total"] = c.orphan_objects;
  orphans["contexts"] = c.orphans.contexts;
  orphans["pds"] = c.orphans.pds;
  orphans["mrs"] = c.orphans.mrs;
  orphans["cqs"] = c.orphans.cqs;
  orphans["qps"] = c.orphans.qps;
  orphans["cm_ids"] = c.orphans.cm_ids;
  root["objects_without_pid"] = std::move(orphans);
  root["netlink_error"] = c.netlink_error.empty() ? Json() : Json(c.netlink_error);
  // The running watcher's view (null: none runs).
  root["watcher"] = w ? WatchStateJson(*w) : Json();
  // Programs an earlier --persist left pinned while no watcher runs (null: none).
  Json p;
  if (pinned && !w) {
    p = Json::object();
    p["links"] = pinned->links >= 0 ? Json(pinned->links) : Json();
    p["enforce"] = pinned->enforce.empty() ? Json() : Json(pinned->enforce);
    p["hook"] = pinned->hook.empty() ? Json() : Json(pinned->hook);
  }
  root["pinned"] = std::move(p);
  return WriteJson(root) + "\n";
}

}  // namespace

int PsMain(int argc, char** argv) {
  flags::Options a = flags::Options::Parse(argc, argv, PsFlags());
  if (flags::PrintHelpIfAsked(a, PsHelp)) return kExitOk;
  std::string format = a.Str("format");
  if (format != "text" && format != "json") {
    throw flags::UsageError("--format: expected text or json, not '" + format + "'");
  }
  api::Census c = api::TakeCensus();
  std::optional<WatchState> w = ReadWatchState();
  std::optional<PinnedWatch> pinned = ReadPinnedWatch();
  std::string out = format == "json" ? FormatJson(c, w, pinned) : PsText(c);
  if (format != "json" && w) out += WatcherText(c, *w);
  if (format != "json" && !w && pinned) out += PinnedText(*pinned);
  fputs(out.c_str(), stdout);
  return c.netlink_error.empty() ? kExitOk : kExitFail;
}

}  // namespace forkguard::cli
