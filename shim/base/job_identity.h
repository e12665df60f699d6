// JobIdentity: who this process is in a launched job (rank, local rank, job id, host), read
// once at init from the launchers' variables (list and order: formats/EVENT_LOG.md). Fixed-size
// storage: the fork path, the forked child and the SIGSEGV handler read it without
// allocating.
#pragma once

#include "shim/base/config.h"

namespace forkguard {

struct JobIdentity {
  static constexpr int kMaxJobLen = 96;

  long rank = -1;             // -1: not launched by a launcher we know
  long local_rank = -1;       // -1: unknown
  long step = -1;             // Slurm's job step (SLURM_STEP_ID); -1: none
  char job[kMaxJobLen] = {};  // empty: unknown; only [A-Za-z0-9._:@+=-], others as '_'
  char host[256] = "?";       // gethostname()
  char short_host[64] = "?";  // host up to its first '.', for the stderr prefix
};

// The first variable of each list that holds a non-negative integer (rank, local rank) or a
// non-empty value (job id). `env` as for ParseConfig; a secure process passes nullptr and
// gets no rank and no job.
JobIdentity ReadJobIdentity(EnvLookup env, void* env_ctx);

// Sets host/short_host from `name` (gethostname()'s answer).
void SetIdentityHost(JobIdentity& id, const char* name);

}  // namespace forkguard
