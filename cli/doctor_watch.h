// `forkguard doctor`'s "watcher" check: whether `forkguard watch` can run on this machine
// (cli/watch_command.cc): the kernel's BTF, the helper its fork judgment needs, which hook
// judges forks (BPF LSM, or fmod_ret where BPF LSM is not active), and privileges.
#pragma once

#include <string>

#include "cli/doctor_checks.h"

namespace forkguard::cli::doctor {

struct WatcherFacts {
  bool btf = false;              // /sys/kernel/btf/vmlinux loads
  bool find_vma = false;         // the kernel has the bpf_find_vma helper (Linux 5.17 or later)
  bool lsm_known = false;        // /sys/kernel/security/lsm was read
  std::string lsm;               // the active LSM list
  bool task_alloc_hook = false;  // bpf_lsm_task_alloc (BPF LSM's hook) is in the BTF
  bool fmod_ret_target = false;  // security_task_alloc is in the BTF
  bool root = false;
  unsigned uid = 0;
  // As root: whether the kernel loads the watcher's BPF programs for this process (loaded,
  // not attached: a container or a seccomp policy may refuse what the kernel has); errno
  // when it did not.
  bool load_tried = false;
  bool loads = false;
  int load_errno = 0;
};

// Reads the facts (no privilege needed: the BTF and the LSM list are world-readable).
WatcherFacts GatherWatcherFacts();

Check CheckWatcher(const WatcherFacts& w);

}  // namespace forkguard::cli::doctor
