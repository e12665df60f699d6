// The RDMA objects of every process on this node, from the kernel's RDMA netlink resource
// dumps (what `rdma resource show` prints): device contexts, PDs, MRs, CQs, QPs and
// rdma_cm ids. Needs no privilege (an unprivileged dump leaves out keys, nothing we use).
//
// The kernel names the *thread* that created each user object; ThreadGroup() maps it to its
// process. An object whose creating thread has exited has no pid at all (`pid == 0`, not
// kernel): it cannot be attributed to a process and is counted apart.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace forkguard::api {

enum class ResourceKind { kContext, kPd, kMr, kCq, kQp, kCmId };
const char* ResourceKindName(ResourceKind k);  // "ctx", "pd", "mr", "cq", "qp", "cm_id"

struct RdmaResource {
  ResourceKind kind = ResourceKind::kContext;
  std::string device;
  pid_t tid = 0;          // the creating thread, as the kernel reports it; 0: none
  bool kernel = false;    // a kernel object (kern_name set)
  std::string kern_name;  // e.g. "ib_core" for kernel objects
  uint64_t mr_len = 0;    // MRs
  uint64_t iova = 0;      // MRs, when the kernel reports it
  bool has_iova = false;
};

struct ResourceDump {
  std::vector<RdmaResource> resources;
  std::vector<std::string> devices;
  // Empty when the dump worked; else why not ("no RDMA netlink: ...").
  std::string error;
  // Object kinds this kernel cannot dump (older kernels have no context dump).
  std::vector<std::string> unsupported;
};

// Every device's objects of every kind. Never throws; `error` says what failed.
ResourceDump DumpRdmaResources();

// /proc/TID/status "Tgid": the process a thread belongs to; 0 when unknown (exited).
pid_t ThreadGroup(pid_t tid);

// Per-process counts of one dump.
struct ResourceCounts {
  int contexts = 0;
  int pds = 0;
  int mrs = 0;
  int cqs = 0;
  int qps = 0;
  int cm_ids = 0;
  uint64_t mr_bytes = 0;
  int total() const { return contexts + pds + mrs + cqs + qps + cm_ids; }
  void Add(const RdmaResource& r);
};

}  // namespace forkguard::api
