#include "shim/base/job_identity.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "shim/base/sys.h"

namespace forkguard {
namespace {

// Launchers nest (srun starting torchrun, mpirun under Slurm): the innermost launcher's
// variable comes first, as the worker's own view of its rank.
constexpr const char* kRankVars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK",
                                     "PMIX_RANK"};
constexpr const char* kLocalRankVars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "SLURM_LOCALID"};
// The batch system's id first: it names the whole allocation, which is what a shared log
// directory is organized by; torchrun's run id inside it is per launch. PMIX_NAMESPACE (the
// PMIx job namespace) last: mpirun without a batch system still has a job.
constexpr const char* kJobVars[] = {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "PBS_JOBID", "LSB_JOBID",
                                    "PMIX_NAMESPACE"};

long FirstNumber(EnvLookup env, void* ctx, const char* const* vars, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const char* v = env(vars[i], ctx);
    if (v == nullptr || v[0] == '\0') continue;
    errno = 0;
    char* end = nullptr;
    long r = strtol(v, &end, 10);
    if (errno == 0 && end != nullptr && *end == '\0' && r >= 0) return r;
  }
  return -1;
}

bool JobChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == ':' || c == '@' || c == '+' || c == '=';
}

}  // namespace

JobIdentity ReadJobIdentity(EnvLookup env, void* env_ctx) {
  JobIdentity id;
  if (env == nullptr) return id;
  id.rank = FirstNumber(env, env_ctx, kRankVars, sizeof(kRankVars) / sizeof(kRankVars[0]));
  id.local_rank =
      FirstNumber(env, env_ctx, kLocalRankVars, sizeof(kLocalRankVars) / sizeof(kLocalRankVars[0]));
  const char* step_var = "SLURM_STEP_ID";
  id.step = FirstNumber(env, env_ctx, &step_var, 1);
  for (const char* var : kJobVars) {
    const char* v = env(var, env_ctx);
    if (v == nullptr || v[0] == '\0') continue;
    // torchrun's default --rdzv-id: every such launch would be one job.
    if (strcmp(var, "TORCHELASTIC_RUN_ID") == 0 && strcmp(v, "none") == 0) continue;
    // The id goes into file names (%j) and greppable lines: no '/', no spaces, bounded.
    size_t i = 0;
    for (; v[i] != '\0' && i < sizeof(id.job) - 1; ++i) id.job[i] = JobChar(v[i]) ? v[i] : '_';
    id.job[i] = '\0';
    // "." and ".." would name a directory other than a job's.
    if (strcmp(id.job, ".") == 0 || strcmp(id.job, "..") == 0) id.job[0] = '_';
    break;
  }
  return id;
}

void SetIdentityHost(JobIdentity& id, const char* name) {
  if (name == nullptr || name[0] == '\0') name = "?";
  size_t n = CopyCString(id.host, sizeof(id.host), name);
  size_t s = 0;
  while (s < n && s < sizeof(id.short_host) - 1 && name[s] != '.') ++s;
  if (s == 0) {
    strcpy(id.short_host, "?");
    return;
  }
  memcpy(id.short_host, name, s);
  id.short_host[s] = '\0';
}

}  // namespace forkguard
