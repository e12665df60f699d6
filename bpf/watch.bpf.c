// The watcher's kernel side (`forkguard watch`): tracks each process's registered ranges
// (ib_umem_get .. ib_umem_release: MRs and the queue buffers drivers pin the same way), its
// RDMA device files and its MADV_DONTFORK/DOFORK calls, and judges every fork that makes a
// process (not a thread, vfork or posix_spawn: nothing with CLONE_VM) in the parent, before
// the child exists, from the kernel's own view of each range: its mapping's flags give the
// memory kind and whether it is MADV_DONTFORK, and the loader's table (facts::DecideRange
// over this machine's facts) gives the effect. With enforcement on, the LSM hook (or its
// fallback on security_task_alloc) refuses the fork with -EPERM.
#include <linux/bpf.h>

#include "bpf/kernel_types.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpf/watch_events.h"
#include "bpf/watch_marker.h"

char LICENSE[] SEC("license") = "GPL";

// Set by the loader before the object loads.
const volatile __u32 enforce = FGW_ENFORCE_OFF;
const volatile __u32 watcher_tgid = 0;
// No bpf_find_vma (before Linux 5.17): each range's kind and MADV_DONTFORK are read from the
// VMA list at registration and kept by the madvise calls since (the *_cached programs).
const volatile __u32 walk_vmas = 0;
// effect_table[kind * 2 + dc]: enum fgw_effect.
const volatile __u8 effect_table[12] = {FGW_UNKNOWN, FGW_UNKNOWN, FGW_UNKNOWN, FGW_UNKNOWN,
                                        FGW_UNKNOWN, FGW_UNKNOWN, FGW_UNKNOWN, FGW_UNKNOWN,
                                        FGW_UNKNOWN, FGW_UNKNOWN, FGW_UNKNOWN, FGW_UNKNOWN};

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 22);
} events SEC(".maps");

// Records lost: the ring buffer had no room for them, the process table was full, or a
// registration's entry or return probe did not run (the kernel skips a kprobe program in some
// contexts; a return probe skipped is counted at the thread's next call or its exit, or by the
// loader at its end): [0]. The loader adds the runs the kernel skipped of the programs it
// counts them for (trampolines: bpf_prog_info.recursion_misses).
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} lost SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);  // tgid
  __type(value, struct fgw_proc);
} procs SEC(".maps");

// ib_umem_get's range, from its entry to its return, per thread.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u64);
  __type(value, struct fgw_mr);
} umem_args SEC(".maps");

// Each live umem's owner (the tgid that registered it): a release may run in another
// process (the last holder of an inherited descriptor, a device's removal). Only where the
// registrations are seen by kprobes: with ib_uverbs' BTF the release reads the owner from the
// umem itself, and the loader shrinks this map to one entry.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u64);
  __type(value, __u32);
} umems SEC(".maps");

// A judged fork per forking thread, until the child is known.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u64);
  __type(value, __u8);
} pending SEC(".maps");

// The shim's mark (bpf/watch_marker.h) per thread: when it was made.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u64);
  __type(value, __u64);
} shim_marks SEC(".maps");

// The fork record is built here (it is larger than the BPF stack).
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct fgw_event);
} scratch SEC(".maps");

static __always_inline void count_lost(void) {
  __u32 zero = 0;
  __u64* n = bpf_map_lookup_elem(&lost, &zero);
  if (n) __sync_fetch_and_add(n, 1);
}

// The wakeup flag for a record nobody waits for (registrations, deregistrations, madvise):
// none, so that the registering thread pays no wakeup of the loader, which reads them on its
// next poll (at most 250 ms later) or with the next record that wakes it; once a quarter of
// the ring is waiting, a forced one so that it drains before it fills.
static __always_inline __u64 quiet_wakeup(void) {
  return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= (1 << 20) ? BPF_RB_FORCE_WAKEUP
                                                                    : BPF_RB_NO_WAKEUP;
}

// A record without ranges; `quiet`: one nobody waits for (quiet_wakeup).
static __always_inline void emit_small(__u32 type, __u32 tgid, __u32 tid, __u64 addr, __u64 len,
                                       __s32 advice, __u32 child, int quiet) {
  struct fgw_small* e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count_lost();
    return;
  }
  __builtin_memset(e, 0, sizeof(*e));
  e->type = type;
  e->tgid = tgid;
  e->tid = tid;
  e->child = child;
  e->ts_ns = bpf_ktime_get_boot_ns();
  bpf_get_current_comm(e->comm, sizeof(e->comm));
  e->addr = addr;
  e->len = len;
  e->advice = advice;
  bpf_ringbuf_submit(e, quiet ? quiet_wakeup() : 0);
}

static __always_inline __u8 kind_of(unsigned long flags, int file_backed) {
  if (flags & VM_SHARED) return FGW_SHARED;
  if (flags & VM_HUGETLB) return FGW_HUGETLB;
  if (file_backed) return FGW_FILE;
  return FGW_ANON;
}

// The mapping at `addr` of the current process, from the VMA list (kernels before the maple
// tree): its kind and MADV_DONTFORK into *m; m->known stays 0 when not found within the
// first 4096 mappings.
static __always_inline void read_mapping(__u64 addr, struct fgw_mr* m) {
  if (!bpf_core_field_exists(((struct mm_struct*)0)->mmap)) return;
  struct task_struct* t = (struct task_struct*)bpf_get_current_task();
  struct vm_area_struct* v = BPF_CORE_READ(t, mm, mmap);
  for (int i = 0; i < 4096 && v; i++) {
    unsigned long start = BPF_CORE_READ(v, vm_start);
    if (start > addr) break;
    if (addr < BPF_CORE_READ(v, vm_end)) {
      unsigned long flags = BPF_CORE_READ(v, vm_flags);
      m->kind = kind_of(flags, BPF_CORE_READ(v, vm_file) != 0);
      m->dc = (flags & VM_DONTCOPY) ? 1 : 0;
      m->known = 1;
      return;
    }
    v = BPF_CORE_READ(v, vm_next);
  }
}

// The process's entry in `procs`, made empty when it has none; NULL when the table is full.
static __always_inline struct fgw_proc* proc_of(__u32 tgid) {
  struct fgw_proc* p = bpf_map_lookup_elem(&procs, &tgid);
  if (p) return p;
  static const struct fgw_proc empty;
  bpf_map_update_elem(&procs, &tgid, &empty, BPF_NOEXIST);
  return bpf_map_lookup_elem(&procs, &tgid);
}

SEC("kprobe/ib_umem_get")
int BPF_KPROBE(fg_umem_get, void* device, unsigned long addr, unsigned long size) {
  __u64 id = bpf_get_current_pid_tgid();
  // This thread's last call is still here: the kernel skipped its return probe, and that
  // registration went unrecorded. Counted, never silent.
  if (bpf_map_lookup_elem(&umem_args, &id)) count_lost();
  struct fgw_mr m = {.addr = addr, .len = size};
  bpf_map_update_elem(&umem_args, &id, &m, BPF_ANY);
  return 0;
}

// A registration ib_umem_get made (`ret`, an ERR_PTR when it failed) of [addr, addr + len)
// by thread `id`: into its process's table, and a record; `keep_owner`: its owner into
// `umems` too, for a release seen by a kprobe.
static __always_inline void umem_registered(__u64 id, __u64 addr, __u64 len, long ret,
                                            int keep_owner) {
  if (ret == 0 || (unsigned long)ret >= (unsigned long)-4095) return;  // ERR_PTR
  __u32 tgid = id >> 32;
  struct fgw_proc* p = proc_of(tgid);
  if (!p) {
    count_lost();  // the table is full: neither kept nor recorded
    return;
  }
  __u32 n = p->n;
  if (n < FGW_MAX_MRS) {
    p->mr[n].addr = addr;
    p->mr[n].len = len;
    p->mr[n].umem = (__u64)ret;
    p->mr[n].known = 0;
    if (walk_vmas) read_mapping(addr, &p->mr[n]);
    p->n = n + 1;
  } else {
    p->overflow++;
  }
  if (keep_owner) {
    __u64 umem = (__u64)ret;
    bpf_map_update_elem(&umems, &umem, &tgid, BPF_ANY);
  }
  emit_small(FGW_MR_REG, tgid, (__u32)id, addr, len, 0, 0, 1);
}

// Where ib_uverbs has BTF (Linux 5.11 and later): its arguments and result in one program (a
// trampoline: no return probe, no table between entry and return).
SEC("fexit/ib_umem_get")
int BPF_PROG(fg_umem_get_exit, void* device, unsigned long addr, unsigned long size, int access,
             long ret) {
  umem_registered(bpf_get_current_pid_tgid(), addr, size, ret, 0);
  return 0;
}

// Elsewhere: a kprobe keeps the range per thread until the kretprobe sees the result.
SEC("kretprobe/ib_umem_get")
int BPF_KRETPROBE(fg_umem_get_ret, long ret) {
  __u64 id = bpf_get_current_pid_tgid();
  struct fgw_mr* m = bpf_map_lookup_elem(&umem_args, &id);
  if (!m) {
    // The kernel skipped the entry probe (or the call began before the watcher): a
    // registration that is not recorded. Counted, never silent.
    if (ret != 0 && (unsigned long)ret < (unsigned long)-4095) count_lost();
    return 0;
  }
  struct fgw_mr r = *m;
  bpf_map_delete_elem(&umem_args, &id);
  umem_registered(id, r.addr, r.len, ret, 1);
  return 0;
}

// The release of process `tgid`'s umem `umem` of [addr, addr + len) (0, 0: not known): out of
// its table, and a record. A range it registered before the watcher started (umem 0, from the
// census) is found by its range; one beyond the table's room is taken off the count.
static __always_inline void umem_released(__u32 tgid, __u64 umem, __u64 addr, __u64 len) {
  struct fgw_proc* p = bpf_map_lookup_elem(&procs, &tgid);
  if (!p) return;
  int found = 0;
  for (int i = 0; i < FGW_MAX_MRS; i++) {
    if (i >= p->n) break;
    if (p->mr[i].umem != umem &&
        !(p->mr[i].umem == 0 && len != 0 && p->mr[i].addr == addr && p->mr[i].len == len))
      continue;
    addr = p->mr[i].addr;
    len = p->mr[i].len;
    __u32 last = p->n - 1;
    if (last < FGW_MAX_MRS) p->mr[i] = p->mr[last];
    p->n = last;
    found = 1;
    break;
  }
  if (!found && p->overflow > 0) p->overflow--;
  emit_small(FGW_MR_DEREG, tgid, (__u32)bpf_get_current_pid_tgid(), addr, len, 0, 0, 1);
}

// Where ib_uverbs has BTF: the umem says whose memory it pins (owning_mm), so that no table
// of owners is kept per registration. That is the current process's, but where the last
// holder of an inherited descriptor, or a device's removal, releases it: then the mm's owner.
// (A process's own releases at its exit come after its mm is gone: its table went with it.)
SEC("fentry/ib_umem_release")
int BPF_PROG(fg_umem_release_fentry, struct ib_umem* umem) {
  // Typed pointers (BTF): read directly, no probe-read helper per field.
  if (!umem) return 0;
  // Made by ib_umem_odp_get or ib_umem_dmabuf_get, not by ib_umem_get: never tracked.
  if (BPF_CORE_READ_BITFIELD(umem, is_odp)) return 0;
  if (bpf_core_field_exists(umem->is_dmabuf) && BPF_CORE_READ_BITFIELD(umem, is_dmabuf)) return 0;
  struct mm_struct* mm = umem->owning_mm;
  struct task_struct* t = bpf_get_current_task_btf();
  __u32 tgid;
  if (mm == t->mm) {
    tgid = t->tgid;
  } else if (mm && bpf_core_field_exists(mm->owner)) {
    struct task_struct* owner = mm->owner;
    if (!owner) return 0;  // its process is gone, and its table with it
    tgid = owner->tgid;
  } else {
    return 0;
  }
  umem_released(tgid, (__u64)umem, umem->address, umem->length);
  return 0;
}

// Elsewhere: a kprobe, and the owner as `umems` kept it at the registration.
SEC("kprobe/ib_umem_release")
int BPF_KPROBE(fg_umem_release, void* umem_ptr) {
  __u64 umem = (__u64)umem_ptr;
  __u32* owner = bpf_map_lookup_elem(&umems, &umem);
  if (!owner) return 0;
  __u32 tgid = *owner;
  bpf_map_delete_elem(&umems, &umem);
  umem_released(tgid, umem, 0, 0);
  return 0;
}

// A device file opened: the record carries the process's own view of its pid and host
// name (a container's), read here while it runs; the loader names the process by them too.
static __always_inline int device_opened(int which) {
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32;
  struct fgw_proc* p = proc_of(tgid);
  if (!p) return 0;
  p->devices++;
  struct fgw_event* e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count_lost();
    return 0;
  }
  __builtin_memset(e, 0, sizeof(*e));
  e->type = FGW_DEVICE_OPEN;
  e->tgid = tgid;
  e->tid = (__u32)id;
  e->ts_ns = bpf_ktime_get_boot_ns();
  bpf_get_current_comm(e->comm, sizeof(e->comm));
  e->advice = which;
  struct task_struct* t = (struct task_struct*)bpf_get_current_task();
  struct pid* leader = BPF_CORE_READ(t, group_leader, thread_pid);
  __u32 level = BPF_CORE_READ(leader, level);
  e->ns_level = level;
  if (level > 0 && level < 64)
    bpf_probe_read_kernel(&e->ns_pid, sizeof(int),
                          (char*)&leader->numbers[0].nr + level * bpf_core_type_size(struct upid));
  struct uts_namespace* uts = BPF_CORE_READ(t, nsproxy, uts_ns);
  bpf_probe_read_kernel_str(e->ns_host, sizeof(e->ns_host), &uts->name.nodename);
  bpf_ringbuf_submit(e, 0);
  return 0;
}

SEC("kprobe/ib_uverbs_open")
int BPF_KPROBE(fg_uverbs_open) { return device_opened(0); }

SEC("kprobe/ucma_open")
int BPF_KPROBE(fg_ucma_open) { return device_opened(1); }

// A madvise(2) call: the shim's mark, or MADV_DONTFORK / MADV_DOFORK over a range.
static __always_inline int madvised(unsigned long start, unsigned long len, int advice) {
  __u64 id = bpf_get_current_pid_tgid();
  if ((int)advice == FORKGUARD_WATCH_MARK_ADVICE && start == FORKGUARD_WATCH_MARK_ADDR) {
    __u64 now = bpf_ktime_get_ns();
    bpf_map_update_elem(&shim_marks, &id, &now, BPF_ANY);
    return 0;
  }
  if (advice != MADV_DONTFORK && advice != MADV_DOFORK) return 0;
  emit_small(FGW_MADVISE, id >> 32, (__u32)id, start, len, (__s32)advice, 0, 1);
  if (!walk_vmas) return 0;
  __u32 tgid = id >> 32;
  struct fgw_proc* p = bpf_map_lookup_elem(&procs, &tgid);
  if (!p) return 0;
  for (int i = 0; i < FGW_MAX_MRS; i++) {
    if (i >= p->n) break;
    if (p->mr[i].addr < start + len && start < p->mr[i].addr + p->mr[i].len)
      p->mr[i].dc = advice == MADV_DONTFORK;
  }
  return 0;
}

// Every madvise(2) of the node, at the system call's entry, so that only madvise pays: not at
// the syscall tracepoint, which while attached sends every system call of every process on
// the node through the kernel's slow syscall path. (Not at do_madvise: on 5.10 a trampoline
// there did not see the system call's. io_uring's IORING_OP_MADVISE is not seen, as by the
// tracepoint.)
// A trampoline where the kernel has bpf_find_vma (Linux 5.17 and later)...
SEC("fentry/__x64_sys_madvise")
int BPF_PROG(fg_madvise, struct pt_regs* regs) {
  return madvised(regs->di, regs->si, (int)regs->dx);
}

// ...a kprobe before (5.10's verifier refuses the trampoline's typed read of the registers).
SEC("ksyscall/madvise")
int BPF_KSYSCALL(fg_madvise_kprobe, unsigned long start, unsigned long len, int advice) {
  return madvised(start, len, advice);
}

struct vma_view {
  __u8 kind;
  __u8 dc;
};

static long vma_cb(struct task_struct* task, struct vm_area_struct* vma, void* data) {
  struct vma_view* v = data;
  unsigned long flags = vma->vm_flags;
  v->kind = kind_of(flags, vma->vm_file != 0);
  v->dc = (flags & VM_DONTCOPY) ? 1 : 0;
  return 0;
}

// The verdict of a fork about to be made by the current process; 0 or -EPERM. `find_vma`:
// each range's mapping read now (bpf_find_vma), else as kept since registration.
static __always_inline int judge(unsigned long clone_flags, int find_vma) {
  if (clone_flags & CLONE_VM) return 0;  // a thread, vfork or posix_spawn
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32;
  if (tgid == watcher_tgid) return 0;
  struct task_struct* t =
      find_vma ? bpf_get_current_task_btf() : (struct task_struct*)bpf_get_current_task();
  struct mm_struct* mm = BPF_CORE_READ(t, mm);
  if (!mm) return 0;  // a kernel thread
  __u64 pinned = BPF_CORE_READ(mm, pinned_vm.counter);
  struct fgw_proc* p = bpf_map_lookup_elem(&procs, &tgid);
  if (!p && pinned == 0) return 0;  // no RDMA state the kernel knows of
  __u32 zero = 0;
  struct fgw_event* e = bpf_map_lookup_elem(&scratch, &zero);
  if (!e) return 0;
  e->type = FGW_FORK;
  e->tgid = tgid;
  e->tid = (__u32)id;
  e->child = 0;
  e->ts_ns = bpf_ktime_get_boot_ns();
  bpf_get_current_comm(e->comm, sizeof(e->comm));
  e->addr = 0;
  e->len = 0;
  e->advice = 0;
  e->vma_busy = 0;
  e->pinned_pages = pinned;
  e->clone_flags = clone_flags;
  e->nranges = 0;
  __u32 reasons = 0;
  __u32 mrs = 0;
  if (p) {
    mrs = p->n + p->overflow;
    for (int i = 0; i < FGW_MAX_MRS; i++) {
      if (i >= p->n) break;
      struct vma_view v = {.kind = FGW_NONE, .dc = 0};
      long r = -2;
      if (find_vma) {
        r = bpf_find_vma(t, p->mr[i].addr, vma_cb, &v, 0);
      } else if (p->mr[i].known) {
        v.kind = p->mr[i].kind;
        v.dc = p->mr[i].dc;
        r = 0;
      }
      __u8 effect = FGW_UNKNOWN;
      if (r == 0) {
        __u32 k = v.kind * 2 + v.dc;
        if (k < 12) effect = effect_table[k];
      } else if (r == -16) {  // -EBUSY: another thread holds the mm's lock
        e->vma_busy++;
      }
      if (effect == FGW_CHILD_SEGV) reasons |= FGW_REASON_CHILD_SEGV;
      if (effect == FGW_PARENT_CORRUPTION) reasons |= FGW_REASON_PARENT_CORRUPTION;
      __u32 j = e->nranges;
      if (j < FGW_FORK_RANGES) {
        e->ranges[j].addr = p->mr[i].addr;
        e->ranges[j].len = p->mr[i].len;
        e->ranges[j].kind = v.kind;
        e->ranges[j].dc = v.dc;
        e->ranges[j].effect = effect;
        e->nranges = j + 1;
      }
    }
  }
  if (mrs > 0 || pinned > 0 || (p && p->devices > 0)) reasons |= FGW_REASON_INHERITED_RDMA;
  e->mrs = mrs;
  e->reasons = reasons;
  // The shim in this process lets this fork through (allowed or suppressed there): marked
  // by this thread within the last second.
  e->shim_mark = 0;
  __u64* marked = bpf_map_lookup_elem(&shim_marks, &id);
  if (marked) {
    if (bpf_ktime_get_ns() - *marked < FORKGUARD_WATCH_MARK_NS) e->shim_mark = 1;
    bpf_map_delete_elem(&shim_marks, &id);
  }
  int refuse = 0;
  if (enforce >= FGW_ENFORCE_MEMORY &&
      (reasons & (FGW_REASON_CHILD_SEGV | FGW_REASON_PARENT_CORRUPTION)))
    refuse = 1;
  if (enforce == FGW_ENFORCE_ALL && reasons) refuse = 1;
  if (e->shim_mark) refuse = 0;
  e->refused = refuse;
  if (bpf_ringbuf_output(&events, e, sizeof(*e), 0) != 0) count_lost();
  if (!refuse) {
    __u8 one = 1;
    bpf_map_update_elem(&pending, &id, &one, BPF_ANY);
  }
  return refuse ? -EPERM : 0;
}

// A hook's result as an LSM program must return it: 0 or -errno, [-4095, 0] (the verifier
// checks it since Linux 6.8). `rc` is always one (judge's, or an earlier LSM's); the empty asm
// hides its value from clang, so that the check the verifier needs to see is not dropped.
// (64-bit: the register compared is the one returned.)
static __always_inline int errno_or_zero(long rc) {
  asm volatile("" : "+r"(rc));
  if (rc < -4095 || rc > 0) return -EPERM;
  return rc;
}

SEC("lsm/task_alloc")
int BPF_PROG(fg_task_alloc, struct task_struct* task, unsigned long clone_flags, int ret) {
  if (ret) return errno_or_zero(ret);
  return errno_or_zero(judge(clone_flags, 1));
}

// Where BPF LSM is not active (e.g. Linux 5.10 without lsm=...,bpf): the same judgment as a
// return-value override of security_task_alloc.
SEC("fmod_ret/security_task_alloc")
int BPF_PROG(fg_task_alloc_fallback, struct task_struct* task, unsigned long clone_flags, int ret) {
  if (ret) return errno_or_zero(ret);
  return errno_or_zero(judge(clone_flags, 1));
}

// The same two without bpf_find_vma (before Linux 5.17): the mappings as kept since each
// registration.
SEC("lsm/task_alloc")
int BPF_PROG(fg_task_alloc_cached, struct task_struct* task, unsigned long clone_flags, int ret) {
  if (ret) return errno_or_zero(ret);
  return errno_or_zero(judge(clone_flags, 0));
}

SEC("fmod_ret/security_task_alloc")
int BPF_PROG(fg_task_alloc_fallback_cached, struct task_struct* task, unsigned long clone_flags,
             int ret) {
  if (ret) return errno_or_zero(ret);
  return errno_or_zero(judge(clone_flags, 0));
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(fg_fork, struct task_struct* parent, struct task_struct* child) {
  if (child->pid != child->tgid) return 0;  // a thread
  __u64 id = bpf_get_current_pid_tgid();
  if (!bpf_map_lookup_elem(&pending, &id)) return 0;
  bpf_map_delete_elem(&pending, &id);
  emit_small(FGW_FORK_CHILD, id >> 32, (__u32)id, 0, 0, 0, child->pid, 0);
  return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(fg_exit, struct task_struct* task) {
  __u64 id = bpf_get_current_pid_tgid();
  bpf_map_delete_elem(&pending, &id);
  bpf_map_delete_elem(&shim_marks, &id);
  // A thread that leaves with its last ib_umem_get call still here: the kernel skipped that
  // call's return probe, and the registration went unrecorded. Counted, never silent.
  if (bpf_map_delete_elem(&umem_args, &id) == 0) count_lost();
  if (task->pid != task->tgid) return 0;
  __u32 tgid = task->tgid;
  if (bpf_map_delete_elem(&procs, &tgid) == 0) emit_small(FGW_EXIT, tgid, tgid, 0, 0, 0, 0, 0);
  return 0;
}
