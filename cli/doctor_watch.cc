#include "cli/doctor_watch.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace forkguard::cli::doctor {

namespace {
bool HasBpf(const std::string& list) {
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    if (list.compare(at, comma - at, "bpf") == 0) return true;
    at = comma + 1;
  }
  return false;
}
}  // namespace

bool JudgesInLsm(const WatcherFacts& w) {
  return w.lsm_known && HasBpf(w.lsm) && w.task_alloc_hook;
}

const char* ChooseJudgeProgram(watch_bpf* skel, const WatcherFacts& w) {
  bpf_program* keep =
      w.find_vma ? (JudgesInLsm(w) ? skel->progs.fg_task_alloc : skel->progs.fg_task_alloc_fallback)
                 : (JudgesInLsm(w) ? skel->progs.fg_task_alloc_cached
                                   : skel->progs.fg_task_alloc_fallback_cached);
  for (bpf_program* p :
       {skel->progs.fg_task_alloc, skel->progs.fg_task_alloc_fallback,
        skel->progs.fg_task_alloc_cached, skel->progs.fg_task_alloc_fallback_cached}) {
    bpf_program__set_autoload(p, p == keep);
  }
  skel->rodata->walk_vmas = w.find_vma ? 0 : 1;
  // madvise(2): a trampoline on the system call from Linux 5.17, a kprobe before.
  bpf_program__set_autoload(skel->progs.fg_madvise, w.find_vma);
  bpf_program__set_autoload(skel->progs.fg_madvise_kprobe, !w.find_vma);
  // Registrations: fexit where ib_uverbs has BTF, and fentry on their releases, which read
  // the owner from the umem; else a kprobe and a kretprobe, and a kprobe on the release with
  // a table of owners, the only users of the two tables kept per call (then one entry each).
  bpf_program__set_autoload(skel->progs.fg_umem_get_exit, w.umem_btf);
  bpf_program__set_autoload(skel->progs.fg_umem_release_fentry, w.umem_btf);
  bpf_program__set_autoload(skel->progs.fg_umem_get, !w.umem_btf);
  bpf_program__set_autoload(skel->progs.fg_umem_get_ret, !w.umem_btf);
  bpf_program__set_autoload(skel->progs.fg_umem_release, !w.umem_btf);
  if (w.umem_btf) {
    bpf_map__set_max_entries(skel->maps.umems, 1);
    bpf_map__set_max_entries(skel->maps.umem_args, 1);
  }
  return JudgesInLsm(w) ? "BPF LSM task_alloc" : "fmod_ret security_task_alloc";
}

WatcherFacts GatherWatcherFacts(bool try_load) {
  WatcherFacts w;
  btf* vmlinux = btf__load_vmlinux_btf();
  if (libbpf_get_error(vmlinux) == 0 && vmlinux != nullptr) {
    w.btf = true;
    w.find_vma = btf__find_by_name_kind(vmlinux, "bpf_find_vma", BTF_KIND_FUNC) > 0;
    w.task_alloc_hook = btf__find_by_name_kind(vmlinux, "bpf_lsm_task_alloc", BTF_KIND_FUNC) > 0;
    w.fmod_ret_target = btf__find_by_name_kind(vmlinux, "security_task_alloc", BTF_KIND_FUNC) > 0;
    btf__free(vmlinux);
  }
  w.umem_btf = access("/sys/kernel/btf/ib_uverbs", R_OK) == 0;
  std::ifstream f("/sys/kernel/security/lsm");
  if (f && std::getline(f, w.lsm)) w.lsm_known = true;
  w.uid = geteuid();
  w.root = w.uid == 0;
  if (w.root && try_load) {
    w.load_tried = true;
    // The watcher's own object, loaded as `forkguard watch` loads it (not attached).
    libbpf_print_fn_t old = libbpf_set_print(nullptr);
    watch_bpf* skel = watch_bpf__open();
    if (skel == nullptr) {
      w.load_errno = errno;
    } else {
      ChooseJudgeProgram(skel, w);
      int r = watch_bpf__load(skel);
      w.loads = r == 0;
      w.load_errno = r < 0 ? -r : 0;
      watch_bpf__destroy(skel);
    }
    libbpf_set_print(old);
  }
  return w;
}

Check CheckWatcher(const WatcherFacts& w) {
  Check c{"watcher", Verdict::kOk, "", ""};
  if (!w.btf) {
    c.verdict = Verdict::kWarn;
    c.detail =
        "forkguard watch cannot run here: the kernel has no BTF (/sys/kernel/btf/vmlinux, "
        "CONFIG_DEBUG_INFO_BTF)";
    c.advice =
        "use the shim (forkguard run, the SPANK plugin); the watcher needs a kernel with BTF";
    return c;
  }
  bool lsm = JudgesInLsm(w);
  if (!lsm && !w.fmod_ret_target) {
    c.verdict = Verdict::kWarn;
    c.detail =
        "forkguard watch cannot judge forks here: BPF LSM is not active and security_task_alloc "
        "is not in the kernel's BTF";
    c.advice = "boot with lsm=...,bpf (the active list is in /sys/kernel/security/lsm)";
    return c;
  }
  if (w.load_tried && !w.loads) {
    c.verdict = Verdict::kWarn;
    c.detail = std::string(
                   "forkguard watch cannot run here: the kernel has what it needs (BTF, "
                   "bpf_find_vma) but refused to load its BPF programs for this root "
                   "process") +
               (w.load_errno ? std::string(" (") + strerror(w.load_errno) + ")" : "") +
               ": a container or a seccomp policy withholds bpf()";
    c.advice = "run the watcher on the host, outside the container (it watches the containers too)";
    return c;
  }
  c.detail = std::string("forkguard watch can run here (BTF; ") +
             (w.find_vma ? "bpf_find_vma: each range's mapping read at the fork"
                         : "no bpf_find_vma (before Linux 5.17): each range's mapping read at "
                           "registration and kept by the madvise calls since") +
             "); forks are judged ";
  if (lsm) {
    c.detail += "by the BPF LSM hook task_alloc (active LSMs: " + w.lsm + ")";
  } else {
    c.detail += std::string("by fmod_ret on security_task_alloc: BPF LSM is not ") +
                (w.lsm_known ? "in the active list (" + w.lsm + ")"
                             : "known to be active (/sys/kernel/security/lsm unreadable)");
  }
  c.detail += w.root ? "; its BPF programs load here" : "; it loads BPF programs: run it as root";
  return c;
}

}  // namespace forkguard::cli::doctor
