// The kernel structures and constants the watcher's BPF object reads, declared with only the
// fields it uses. `preserve_access_index` makes every access a CO-RE relocation: libbpf
// finds each field in the running kernel's BTF at load time, so the one object runs on every
// kernel with BTF (Debian's 5.10, 6.1 and 6.12) whatever the real layout. No generated
// vmlinux.h of any one kernel is checked in.
#pragma once

#include <linux/types.h>

// bpf_tracing.h then names pt_regs' fields as the kernel does (di, si, ...), as with a
// generated vmlinux.h.
#define __VMLINUX_H__

typedef struct {
  long long counter;
} atomic64_t;

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct pt_regs {
  unsigned long di;
  unsigned long si;
  unsigned long dx;
  unsigned long cx;
  unsigned long r8;
  unsigned long r9;
  unsigned long ax;
  unsigned long sp;
  unsigned long ip;
};

struct vm_area_struct;

struct task_struct;

struct mm_struct {
  atomic64_t pinned_vm;  // pages pinned long-term (ib_umem_get adds, ib_umem_release subtracts)
  struct vm_area_struct* mmap;  // the VMA list, before Linux 6.1's maple tree only
  struct task_struct* owner;    // the process using it (CONFIG_MEMCG; Debian's kernels have it)
};

struct file;

struct vm_area_struct {
  unsigned long vm_start;
  unsigned long vm_end;
  struct vm_area_struct* vm_next;  // before Linux 6.1's maple tree only
  unsigned long vm_flags;
  struct file* vm_file;
};

// The process's pid in each pid namespace from the node's (level 0) to its own (`level`), and
// its host name (its UTS namespace's).
struct upid {
  int nr;
  void* ns;
};
struct pid {
  unsigned int level;
  struct upid numbers[1];
};
struct new_utsname {
  char nodename[65];
};
struct uts_namespace {
  struct new_utsname name;
};
struct nsproxy {
  struct uts_namespace* uts_ns;
};

struct task_struct {
  int pid;
  int tgid;
  struct mm_struct* mm;
  struct task_struct* real_parent;
  struct task_struct* group_leader;
  struct pid* thread_pid;
  struct nsproxy* nsproxy;
};

// drivers/infiniband/core/umem.c's (in the ib_uverbs module, whose BTF libbpf reads): the
// registration's range and the process whose memory it pins.
struct ib_umem {
  struct mm_struct* owning_mm;
  unsigned long length;
  unsigned long address;
  unsigned int writable : 1;
  unsigned int is_odp : 1;
  unsigned int is_dmabuf : 1;  // Linux 5.12 and later
};

#pragma clang attribute pop

// include/linux/mm.h: stable across the kernels the watcher supports.
#define VM_SHARED 0x00000008UL
#define VM_DONTCOPY 0x00020000UL
#define VM_HUGETLB 0x00400000UL

// include/uapi/linux/sched.h, include/uapi/asm-generic/mman-common.h
#define CLONE_VM 0x00000100UL
#define MADV_DONTFORK 10
#define MADV_DOFORK 11
#define EPERM 1
