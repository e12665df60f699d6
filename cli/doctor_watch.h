// `forkguard doctor`'s "watcher" check: whether `forkguard watch` can run on this machine
// (cli/watch_command.cc): the kernel's BTF, the helper its fork judgment needs, which hook
// judges forks (BPF LSM, or fmod_ret where BPF LSM is not active), and privileges.
#pragma once

#include <string>

#include "bpf/watch.skel.h"
#include "cli/doctor_checks.h"

namespace forkguard::cli::doctor {

struct WatcherFacts {
  bool btf = false;              // /sys/kernel/btf/vmlinux loads
  bool find_vma = false;         // the kernel has the bpf_find_vma helper (Linux 5.17 or later)
  bool lsm_known = false;        // /sys/kernel/security/lsm was read
  std::string lsm;               // the active LSM list
  bool task_alloc_hook = false;  // bpf_lsm_task_alloc (BPF LSM's hook) is in the BTF
  bool fmod_ret_target = false;  // security_task_alloc is in the BTF
  bool umem_btf = false;         // ib_uverbs (ib_umem_get's module) has BTF: fexit and fentry on it
  bool root = false;
  unsigned uid = 0;
  // As root: whether the kernel loads the watcher's BPF programs for this process (loaded,
  // not attached: a container or a seccomp policy may refuse what the kernel has); errno
  // when it did not.
  bool load_tried = false;
  bool loads = false;
  int load_errno = 0;
};

// Reads the facts (no privilege needed: the BTF and the LSM list are world-readable); as
// root with `try_load`, also loads the watcher's object (load_tried, loads, load_errno).
WatcherFacts GatherWatcherFacts(bool try_load = true);

// Whether forks are judged by the BPF LSM hook (BPF LSM active, its task_alloc hook in the
// BTF), else by fmod_ret on security_task_alloc.
bool JudgesInLsm(const WatcherFacts& w);

// Sets the object's programs up for this machine before it loads: the one fork-judging
// program its kernel takes (LSM or fmod_ret; with bpf_find_vma or on the mappings kept
// since registration) and walk_vmas. Returns the hook's name for messages.
const char* ChooseJudgeProgram(watch_bpf* skel, const WatcherFacts& w);

Check CheckWatcher(const WatcherFacts& w);

}  // namespace forkguard::cli::doctor
