// libforkguard_check.so: forkguard_fork_check() (api/forkguard.h). The shim's answer when
// libforkguard.so is loaded; otherwise what /proc and RDMA netlink show, put through the
// shim's own verdict rule (shim/verdict/verdict.h over facts/fork_rule.h), range by range.
#include <dlfcn.h>
#include <errno.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "api/census.h"
#include "api/check_result.h"
#include "api/forkguard.h"
#include "api/rdma_resources.h"
#include "shim/verdict/proc_facts.h"
#include "shim/verdict/verdict.h"

namespace forkguard::api {
namespace {

int CofValue(KernelCof c) {
  if (c == KernelCof::kYes) return FORKGUARD_COF_YES;
  if (c == KernelCof::kNo) return FORKGUARD_COF_NO;
  return FORKGUARD_COF_UNKNOWN;
}

std::string Plural(int n, const char* what) { return std::to_string(n) + " " + what; }

// The message a fork check without the shim gives: the verdict and its reasons, the facts
// and where they came from (result's fields, filled already).
std::string ProcCheckMessage(const forkguard_check_result& result, const ForkVerdict& v,
                             const ProcessFacts& p, const std::vector<MrFate>& fates,
                             const RdmaFds& fds, KernelCof cof, pid_t self) {
  const bool netlink = p.netlink;
  const ResourceCounts& mine = p.objects;
  std::string msg = "forkguard: fork check in pid " + std::to_string(self) + " (no shim)\n";
  msg += std::string("  verdict: ") + result.verdict + "\n";
  if (v.dontfork_mrs > 0 || v.unattributed_dc > 0) {
    int n = v.dontfork_mrs > 0 ? v.dontfork_mrs : v.unattributed_dc;
    msg += "  child-segv: " + Plural(n, "range(s)") +
           " marked MADV_DONTFORK; the child is killed by SIGSEGV if it touches them\n";
  }
  if (v.corruptible_mrs > 0) {
    // Why, from the first such range's basis (the rule's own words).
    std::string why;
    for (size_t i = 0; i < p.mr_ranges.size(); ++i) {
      if (fates[i].verdict.effect != facts::ForkEffect::kParentCorruption) continue;
      char buf[256];
      why = facts::BasisText(fates[i].verdict, buf, sizeof(buf));
      break;
    }
    msg += "  parent-corruption: " + Plural(v.corruptible_mrs, "registered range(s)") +
           " not MADV_DONTFORK whose pages the parent loses to the child at fork" +
           (why.empty() ? std::string() : " (" + why + ")") + "\n";
  }
  if (v.unknown_mrs > 0) {
    msg += "  unknown: " + Plural(v.unknown_mrs, "registered range(s)") +
           " for which nothing on this machine tells what a fork does to them\n";
  }
  if ((v.reasons & kInheritedRdma) != 0) {
    msg += "  inherited-rdma: the child inherits ";
    msg += netlink ? Plural(mine.contexts, "device context(s), ") + Plural(mine.pds, "PD(s), ") +
                         Plural(mine.mrs, "MR(s), ") + Plural(mine.qps, "QP(s), ") +
                         Plural(mine.cm_ids, "rdma_cm id(s) and ")
                   : std::string();
    msg +=
        Plural(fds.uverbs + fds.rdma_cm, "descriptor(s) on /dev/infiniband") + " it must not use\n";
  }
  msg += "  facts: VmPin " + std::to_string(result.vm_pin_kb) + " kB, " +
         std::to_string(result.dc_vmas) + " MADV_DONTFORK mapping(s), kernel copy-on-fork: " +
         (cof == KernelCof::kYes  ? "yes"
          : cof == KernelCof::kNo ? "no"
                                  : "unknown") +
         " (" + result.kernel_cof_source + ")\n";
  msg += std::string("  ") + result.detail + "\n";
  return msg;
}

void ProcCheck(forkguard_check_result* out) {
  ResetResult(out, FORKGUARD_SOURCE_PROC);
  LearnRdmaDeviceNumbers();
  ResourceDump dump = DumpRdmaResources();
  pid_t self = getpid();
  ProcessFacts p = GatherProcess(self, &dump);
  bool netlink = p.netlink;
  const ResourceCounts& mine = p.objects;
  int orphans = 0;
  for (const RdmaResource& r : dump.resources) orphans += !r.kernel && r.tid == 0;
  RdmaFds fds;
  fds.uverbs = p.uverbs_fds.value_or(0);
  fds.rdma_cm = p.rdma_cm_fds.value_or(0);
  out->uverbs_fds = fds.uverbs;
  out->rdma_cm_fds = fds.rdma_cm;
  out->vm_pin_kb = p.vm_pin_kb;
  out->dc_vmas = p.dc_count.value_or(-1);
  if (netlink) {
    out->contexts = mine.contexts;
    out->pds = mine.pds;
    out->mrs = mine.mrs;
    out->qps = mine.qps;
    out->cm_ids = mine.cm_ids;
    out->orphan_objects = orphans;
  }
  KernelCofFact cof = KernelCopyOnFork();
  out->kernel_cof = CofValue(cof.value);
  CopyField(out->kernel_cof_source, sizeof(out->kernel_cof_source),
            cof.source != nullptr ? cof.source : "unknown");

  std::vector<char> flags(p.mr_ranges.size() + 1);
  std::vector<MrFate> fates(p.mr_ranges.size() + 1);
  ForkVerdict v =
      DecideForProcess(p, cof.value, reinterpret_cast<bool*>(flags.data()), fates.data());
  SetVerdict(out, v.reasons);
  out->enforceable = v.enforceable() ? 1 : 0;
  out->dontfork_mrs = v.dontfork_mrs;
  out->corruptible_mrs = v.corruptible_mrs;
  out->unattributed_dc = v.unattributed_dc;
  bool placed = mine.mrs == 0 || p.mr_addresses_known;
  out->range_total = placed ? static_cast<int>(p.mr_ranges.size()) : mine.mrs;
  for (size_t i = 0; placed && i < p.mr_ranges.size() && out->range_count < FORKGUARD_MAX_RANGES;
       ++i) {
    forkguard_range& g = out->ranges[out->range_count++];
    g.start = p.mr_ranges[i].start;
    g.length = p.mr_ranges[i].end - p.mr_ranges[i].start;
    g.dontfork = flags[i] != 0;
    // The shim's rule (facts/fork_rule.h) for this range's memory kind on this machine.
    g.corruptible = fates[i].verdict.effect == facts::ForkEffect::kParentCorruption;
  }

  std::string detail = "no shim: from /proc and RDMA netlink, no call sites";
  if (!netlink) {
    detail += "; " + dump.error;
  } else if (!placed) {
    detail += "; MR addresses unknown: every MADV_DONTFORK mapping counts as registered";
  }
  if (orphans > 0) {
    detail += "; " + Plural(orphans, "object(s) on this node belong to an exited thread");
  }
  CopyField(out->detail, sizeof(out->detail), detail.c_str());

  std::string msg = ProcCheckMessage(*out, v, p, fates, fds, cof.value, self);
  CopyField(out->message, sizeof(out->message), msg.c_str());
}

using ShimCheck = int (*)(forkguard_check_result*);

int Checked(forkguard_check_result* out) {
  if (out == nullptr || out->size < kMinResultSize) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

}  // namespace
}  // namespace forkguard::api

extern "C" {

__attribute__((visibility("default"))) int forkguard_fork_check_proc(forkguard_check_result* out) {
  namespace api = forkguard::api;
  if (api::Checked(out) != 0) return -1;
  int saved = errno;
  auto full = std::make_unique<forkguard_check_result>();
  api::ProcCheck(full.get());
  api::CopyOut(*full, out);
  errno = saved;
  return 0;
}

__attribute__((visibility("default"))) int forkguard_fork_check(forkguard_check_result* out) {
  namespace api = forkguard::api;
  if (api::Checked(out) != 0) return -1;
  auto shim = reinterpret_cast<api::ShimCheck>(dlsym(RTLD_DEFAULT, "forkguard_fork_check_shim"));
  if (shim != nullptr) return shim(out);
  return forkguard_fork_check_proc(out);
}

__attribute__((visibility("default"))) const char* forkguard_reason_name(unsigned reason) {
  return forkguard::api::ReasonText(reason);
}

}  // extern "C"
