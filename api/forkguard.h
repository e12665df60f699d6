/* forkguard's query API: would a fork() now be a hazard for this process?
 *
 * Link with -lforkguard_check (libforkguard_check.so). When libforkguard.so is preloaded
 * the answer is the shim's own: the same decision it makes at fork(), without forking
 * (the verdict, the registered ranges and where each was registered, where RDMA was first
 * initialized). Otherwise the library answers from what the kernel shows any process:
 * descriptors on /dev/infiniband in /proc/self/fd, MADV_DONTFORK ("dc") mappings in
 * /proc/self/smaps, VmPin, and the RDMA netlink resource dump (contexts, PDs, MRs, QPs of
 * this process); it has no sites, and says so in `detail`.
 *
 * Nothing here forks, allocates in the caller's name or writes to stderr. Thread-safe.
 * C and C++; every string is NUL-terminated (cut to its field's size when longer). */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where the answer came from. */
#define FORKGUARD_SOURCE_SHIM 1 /* libforkguard.so is loaded in this process */
#define FORKGUARD_SOURCE_PROC 2 /* /proc and RDMA netlink only (no shim) */

/* Verdict reasons (bits of `reasons`); the names are the shim's. */
#define FORKGUARD_CHILD_SEGV 0x1        /* "child-segv" */
#define FORKGUARD_PARENT_CORRUPTION 0x2 /* "parent-corruption" */
#define FORKGUARD_INHERITED_RDMA 0x4    /* "inherited-rdma" */

/* Whether the kernel copies pinned pages on fork (Linux >= 5.13). */
#define FORKGUARD_COF_UNKNOWN (-1)
#define FORKGUARD_COF_NO 0
#define FORKGUARD_COF_YES 1

#define FORKGUARD_MAX_RANGES 16

struct forkguard_range {
  uint64_t start;
  uint64_t length;
  int dontfork;    /* the kernel marks it MADV_DONTFORK: the child faults on it */
  int corruptible; /* the parent's data goes stale at fork (the rule, by memory kind) */
  char call[32];   /* "ibv_reg_mr", ...; "" when unknown (no shim) */
  char site[256];  /* where it was registered: "func (obj+0xoff)"; "" when unknown */
};

struct forkguard_check_result {
  /* In: sizeof(struct forkguard_check_result). A caller built against an older header
   * passes its own size; fields past it are not written. */
  uint32_t size;
  int source;      /* FORKGUARD_SOURCE_* */
  int hazard;      /* 1: a fork now would be a hazard (reasons != 0); 0: clean */
  int enforceable; /* FORKGUARD_MODE=error/abort would apply to a fork now */
  unsigned reasons;
  char verdict[96]; /* "clean" or "hazard (child-segv, inherited-rdma)", as the shim prints */

  /* Live RDMA objects. -1: not known from this source. */
  int contexts;
  int pds;
  int mrs;
  int qps; /* only from RDMA netlink (fallback); -1 from the shim */
  int cm_ids;
  int cm_channels;
  int uverbs_fds;
  int rdma_cm_fds;
  int dc_vmas;                /* mappings the kernel marks MADV_DONTFORK ("dc") */
  int dontfork_mrs;           /* registered ranges marked dc (child-segv) */
  int corruptible_mrs;        /* registered ranges whose data goes stale at fork */
  int unattributed_dc;        /* dc mappings counted as registered memory nobody saw registered */
  int orphan_objects;         /* netlink objects whose creating thread has exited (no pid) */
  long vm_pin_kb;             /* VmPin from /proc/self/status, -1 unknown */
  int kernel_cof;             /* FORKGUARD_COF_* */
  char kernel_cof_source[16]; /* "netlink", "uname", "unknown" */

  /* Sites (shim only; "" otherwise). */
  char init_site[512]; /* "ibv_open_device(rxe0) at setup_rdma (train+0x12a7)" + Python line */
  char fork_site[512]; /* where forkguard_fork_check was called from */

  int range_count; /* entries filled in `ranges` */
  int range_total; /* live registered ranges (may exceed FORKGUARD_MAX_RANGES) */
  struct forkguard_range ranges[FORKGUARD_MAX_RANGES];

  /* What this answer could not tell (fallback: "no shim: ..."), "" when nothing. */
  char detail[256];
  /* The shim: the whole message it would print for a fork here ("" when clean).
   * The fallback: a short multi-line summary in the same words. */
  char message[16384];
};

/* Fills *out (out->size must be set). Returns 0, or -1 with errno EINVAL when out is NULL
 * or out->size is too small for the fields up to `verdict`. */
int forkguard_fork_check(struct forkguard_check_result* out);

/* The fallback's answer (/proc and RDMA netlink) even when the shim is loaded: to compare
 * the two, or to ask without the shim's bookkeeping. Same contract. */
int forkguard_fork_check_proc(struct forkguard_check_result* out);

/* "child-segv", "parent-corruption", "inherited-rdma"; NULL for anything else. */
const char* forkguard_reason_name(unsigned reason);

/* Exported by libforkguard.so (the shim) itself; forkguard_fork_check finds it with
 * dlsym(RTLD_DEFAULT, ...) and prefers it. Same contract as forkguard_fork_check. */
int forkguard_fork_check_shim(struct forkguard_check_result* out);

#ifdef __cplusplus
}
#endif
