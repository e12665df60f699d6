// What anyone on this node can tell about a process's RDMA state without the shim and
// without root: its objects in the RDMA netlink resource dump (threads mapped to their
// process), its descriptors on /dev/infiniband and its MADV_DONTFORK ("dc") mappings where
// /proc lets us read them, VmPin, its job id and rank from its environment where readable,
// whether the shim is mapped in it - and what a fork would do to it now, by the shim's own
// rule (shim/verdict/verdict.h). Used by forkguard_fork_check()'s fallback (this process) and by
// `forkguard ps` (every process).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "api/rdma_resources.h"
#include "shim/verdict/proc_facts.h"
#include "shim/verdict/verdict.h"

namespace forkguard::api {

struct ProcessFacts {
  pid_t pid = 0;
  std::string comm;                // /proc/PID/comm
  ResourceCounts objects;          // from the netlink dump
  std::vector<Vma> mr_ranges;      // MRs whose address the kernel reported (iova)
  bool mr_addresses_known = true;  // every MR of the process had one
  std::optional<int> uverbs_fds;   // nullopt: /proc/PID/fd not readable
  std::optional<int> rdma_cm_fds;
  std::optional<int> dc_count;      // nullopt: /proc/PID/smaps not readable
  std::vector<Vma> dc;              // the dc mappings (up to a bound)
  std::vector<KindVma> kinds;       // the mappings under mr_ranges: their memory kinds
  long vm_pin_kb = -1;              // -1: unknown
  std::optional<std::string> job;   // nullopt: environment not readable; "" none
  std::optional<long> rank;         // nullopt: not readable or none
  std::optional<bool> shim_loaded;  // libforkguard.so in /proc/PID/maps; nullopt unreadable
  // FORKGUARD_MODE as the process's environment sets it ("" unset); nullopt: not readable.
  std::optional<std::string> mode_env;
  bool netlink = false;  // objects come from a working dump

  bool HoldsRdma() const {
    return objects.total() > 0 || uverbs_fds.value_or(0) > 0 || rdma_cm_fds.value_or(0) > 0;
  }
};

// The rule's verdict for a fork of this process now. Registrations whose addresses the
// kernel did not report are registrations nobody saw: as the shim does for them, every dc
// mapping then counts as registered memory while device descriptors are open (when
// /proc/PID/fd is unreadable, the netlink contexts stand in for them). When the dump says
// the process has no MR, dc mappings are not registrations. `mr_fate` (may be null)
// receives the rule's answer per entry of p.mr_ranges (facts/fork_rule.h, by the memory
// kind of the mappings under it).
ForkVerdict DecideForProcess(const ProcessFacts& p, KernelCof cof, bool* mr_dontfork,
                             MrFate* mr_fate = nullptr);

// "clean" or "hazard (child-segv, inherited-rdma)".
std::string VerdictText(unsigned reasons);

struct Census {
  std::vector<ProcessFacts> processes;  // every process that holds RDMA state, by pid
  int orphan_objects = 0;               // user objects whose creating thread has exited
  ResourceCounts orphans;               // the same by kind
  int kernel_objects = 0;               // objects of kernel users (ib_core, rdma_cm, ...)
  std::vector<std::string> devices;
  std::string netlink_error;  // "" when the dump worked
  KernelCofFact cof;
};

// Facts of one process; `dump` may be null (then only /proc).
ProcessFacts GatherProcess(pid_t pid, const ResourceDump* dump);

// Every process on the node with RDMA state: from the dump, plus those whose descriptors
// show it (readable /proc/PID/fd).
Census TakeCensus();

}  // namespace forkguard::api
