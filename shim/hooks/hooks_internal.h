// What the hooks' files share and nothing else sees: the configuration and process facts that
// process_init.cc (process init and config) sets, and the steps the RDMA hooks (rdma_hooks.cc), the
// process hooks (process_hooks.cc) and the fork decision (fork_decision.cc) call on each
// other. Hidden like everything the shim compiles; declared hidden here as well, so that
// another file's use of a global is a PC-relative access the same as a use within one file.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>

#include "formats/suppressions.h"
#include "shim/base/config.h"
#include "shim/base/job_identity.h"
#include "shim/base/sys.h"
#include "shim/log/event_log.h"
#include "shim/messages/fork_report.h"
#include "shim/state/fork_frames.h"

#pragma GCC visibility push(hidden)

namespace forkguard::hooks {

// ---- Set by process_init.cc (process init and config). ----

// FORKGUARD_* as parsed by Init(); all zero bytes (mode warn, no log) until then.
extern Config g_config;
// Whether the /proc/self/fd scan can find anything (process_init.cc says when it is armed).
extern std::atomic<bool> g_backstop_armed;
// The program's name as it started, and whether the environment is ours to read.
extern char g_prog[256];
extern bool g_secure;
// Who this process is in its job: valid after EnsureIdentity().
extern char g_host[256];
extern long g_rank;
// Init() has finished: the hooks may act.
extern bool g_ready;
// FORKGUARD_SUPPRESSIONS, parsed once by Init; null when none applies.
extern SuppressionSet* g_suppressions;

// Fork support: written outside the fork path (ibv_fork_init, the first RDMA init); read when
// a hazardous fork is explained.
extern char g_fork_env[64];                    // "RDMAV_FORK_SAFE=1" when the environment asks
extern std::atomic<bool> g_fork_init_ok;       // an ibv_fork_init() returned 0
extern char g_fork_init_caller[128];           // basename of the object that called it
extern ZeroFilledAtomic<int, -1> g_rdma_core;  // rdma-core version, from /proc/self/maps
extern bool g_hugepages_safe;                  // RDMAV_HUGEPAGES_SAFE set

// Idempotent, async-signal-safe, errno-neutral: the fork support variables, the machine's
// RDMA device numbers and inherited descriptors, and the job identity (host, rank).
void EnsureForkEnv();
void EnsureForkFacts();
void EnsureIdentity();
ProcessIdentity Identity();

// Each line prefixed "[host rN pid] " and written whole (shim/base/stderr_line.h).
void WriteStderr(const char* p, size_t n);

// Set once a hook found everything in place (Init, the fork facts, the unwinder asked for;
// the mode is not off): from then on a hook's entry is this one load.
extern std::atomic<bool> g_hooks_ready;
bool ActiveSlow();
// Entry of every RDMA hook.
inline bool Active() { return g_hooks_ready.load(std::memory_order_acquire) || ActiveSlow(); }
// No FORKGUARD_LOG: the event log can never be enabled (not even asked).
inline bool NoLog() { return g_config.log_dir[0] == '\0'; }

// ---- process_hooks.cc ----

// A process created by a raw clone()/clone3() syscall: said once, then a hazardous child.
void CheckUnseenChild();

// ---- fork_decision.cc ----

// The core's atfork handlers (shim/state/fork_frames.h), registered at start or at the first
// watched RDMA call.
extern const ForkAtforkHooks kCoreAtforkHooks;

}  // namespace forkguard::hooks

#pragma GCC visibility pop
