// What the watcher's BPF object (bpf/watch.bpf.c) and `forkguard watch` share: the ring
// buffer's records and the settings the loader writes before the object loads. Plain C, the
// same layout for the BPF target and x86-64.
#pragma once

#ifndef __bpf__
#include <stdint.h>
typedef uint8_t fgw_u8;
typedef uint32_t fgw_u32;
typedef uint64_t fgw_u64;
typedef int32_t fgw_s32;
#else
typedef __u8 fgw_u8;
typedef __u32 fgw_u32;
typedef __u64 fgw_u64;
typedef __s32 fgw_s32;
#endif

// The MRs tracked per process (ib_umem_get .. ib_umem_release); more are counted, not kept.
#define FGW_MAX_MRS 64
// The ranges a fork record carries (the first ones; `mrs` counts them all).
#define FGW_FORK_RANGES 16

// Memory kinds as the kernel shows them (facts::MemoryKind's order; THP cannot be told
// from the mapping's flags, so it is "anonymous" here).
enum fgw_kind {
  FGW_ANON = 0,
  FGW_THP = 1,
  FGW_HUGETLB = 2,
  FGW_SHARED = 3,
  FGW_FILE = 4,
  FGW_NONE = 5
};
// facts::ForkEffect's order.
enum fgw_effect { FGW_NOTHING = 0, FGW_CHILD_SEGV = 1, FGW_PARENT_CORRUPTION = 2, FGW_UNKNOWN = 3 };
// Enforcement levels.
enum fgw_enforce { FGW_ENFORCE_OFF = 0, FGW_ENFORCE_MEMORY = 1, FGW_ENFORCE_ALL = 2 };

enum fgw_type {
  FGW_MR_REG = 1,
  FGW_MR_DEREG = 2,
  FGW_MADVISE = 3,
  FGW_FORK = 4,        // a fork judged in the parent before the child exists
  FGW_FORK_CHILD = 5,  // that fork's child: `child`
  FGW_EXIT = 6,
  FGW_DEVICE_OPEN = 7,  // a uverbs or rdma_cm file opened (advice: 0 uverbs, 1 rdma_cm)
};

struct fgw_range {
  fgw_u64 addr;
  fgw_u64 len;
  fgw_u8 kind;    // enum fgw_kind of the mapping at addr (FGW_NONE: not mapped)
  fgw_u8 dc;      // VM_DONTCOPY: MADV_DONTFORK
  fgw_u8 effect;  // enum fgw_effect from the loader's table
  fgw_u8 pad[5];
};

struct fgw_event {
  fgw_u32 type;
  fgw_u32 tgid;
  fgw_u32 tid;
  fgw_u32 child;  // FGW_FORK: the child's pid (0: refused or not yet known)
  fgw_u64 ts_ns;  // CLOCK_REALTIME-free: bpf_ktime_get_boot_ns(), the loader converts
  char comm[16];
  // FGW_MR_REG / FGW_MR_DEREG / FGW_MADVISE: the range; advice for FGW_MADVISE.
  fgw_u64 addr;
  fgw_u64 len;
  fgw_s32 advice;
  // FGW_FORK:
  fgw_u32 refused;       // the fork was refused (-EPERM) by the kernel hook
  fgw_u32 vma_busy;      // a range's mapping could not be read (its mm lock was taken)
  fgw_u32 mrs;           // MRs tracked for the process (may exceed FGW_FORK_RANGES)
  fgw_u64 pinned_pages;  // mm->pinned_vm
  fgw_u64 clone_flags;
  fgw_u32 reasons;  // bit 0 child-segv, bit 1 parent-corruption, bit 2 inherited-rdma
  fgw_u32 nranges;
  fgw_u32 shim_mark;  // the shim marked this fork as one it lets through (bpf/watch_marker.h)
  // FGW_DEVICE_OPEN: the process as it sees itself, read in the kernel while it runs (a
  // container's): its pid namespace's level (0: the node's), its pid there, its host name.
  fgw_u32 ns_level;
  fgw_u32 ns_pid;
  char ns_host[68];
  struct fgw_range ranges[FGW_FORK_RANGES];
};

// The records that carry a range at most (registrations, releases, madvise, a fork's child,
// an exit) are this much: struct fgw_event's first fields, to `advice`, at the same offsets.
// The loader reads them into a zeroed fgw_event. (A fork record is a whole fgw_event.)
struct fgw_small {
  fgw_u32 type;
  fgw_u32 tgid;
  fgw_u32 tid;
  fgw_u32 child;
  fgw_u64 ts_ns;
  char comm[16];
  fgw_u64 addr;
  fgw_u64 len;
  fgw_s32 advice;
  fgw_u32 pad;
};

// A process's registered ranges and device files, the kernel's table (`procs`), which the
// loader seeds from the census at start.
struct fgw_mr {
  fgw_u64 addr;
  fgw_u64 len;
  fgw_u64 umem;  // the kernel's ib_umem (0: registered before the watcher started)
  // Where the kernel has no bpf_find_vma (before Linux 5.17): the mapping's kind and
  // MADV_DONTFORK as read at registration (the VMA list) and kept by the madvise calls since.
  fgw_u8 kind;
  fgw_u8 dc;
  fgw_u8 known;
  fgw_u8 pad[5];
};
struct fgw_proc {
  fgw_u32 n;         // mr[0..n) are live
  fgw_u32 overflow;  // live registrations beyond FGW_MAX_MRS
  fgw_u32 devices;   // uverbs/rdma_cm files opened by this process
  fgw_u32 pad;
  struct fgw_mr mr[FGW_MAX_MRS];
};

#define FGW_REASON_CHILD_SEGV 1u
#define FGW_REASON_PARENT_CORRUPTION 2u
#define FGW_REASON_INHERITED_RDMA 4u
