// The report of one fork decision: the entry point it came through, the errno a failed fork
// returns, and the facts gathered for a hazardous fork (ForkReport), which the message
// (shim/messages/message.h), the event log (shim/log/event_writer.h) and forkguard_fork_check
// (shim/messages/query.h) are written from. The decision itself is shim/hooks/fork_decision.cc
// (declared in shim/hooks/hooks.h); these types are its output, and nothing here decides.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "facts/machine_facts.h"
#include "shim/base/config.h"
#include "shim/fix/fork_fix.h"
#include "shim/stack/python_stack.h"
#include "shim/stack/stack.h"
#include "shim/state/state.h"
#include "shim/verdict/proc_facts.h"
#include "shim/verdict/verdict.h"

namespace forkguard {

struct ProcessIdentity {
  pid_t pid = 0;
  const char* prog = "";
  const char* host = "";
  long rank = -1;  // -1: unknown
};

// How the fork was entered. kAtfork: seen only by our pthread_atfork prepare handler (a
// libc path we do not wrap); it cannot be failed. _Fork runs no atfork handlers at all.
enum class ForkVia { kFork, kAtfork, kUnderscoreFork, kDaemon, kForkpty };
// "fork", "atfork", "_Fork", "daemon", "forkpty" (the event log's `via`).
const char* ForkViaName(ForkVia via);
// The errno a failed (FORKGUARD_MODE=error) fork of this kind returns, and its name: one
// the call's man page allows. fork: EPERM (the documented contract; Python raises
// PermissionError); daemon: EPERM (from its setsid(2)); _Fork, forkpty: ENOMEM (fork(2)'s;
// EAGAIN would invite retry loops).
int FailErrno(ForkVia via);
const char* FailErrnoName(ForkVia via);

// Who turned fork support on (ibv_fork_init / RDMAV_FORK_SAFE), and the rdma-core version.
struct ForkSupportFact {
  bool on = false;            // ibv_fork_init() returned 0, or the environment asks for it
  const char* env = nullptr;  // "RDMAV_FORK_SAFE=1" / "IBV_FORK_SAFE=1" when set
  const char* caller = "";    // object that called ibv_fork_init ("" unknown / not called)
  int rdma_core = -1;         // rdma-core version from libibverbs' file name, -1 unknown
};

struct ForkReport {
  ProcessIdentity who;
  ForkVerdict verdict;
  const StateSnapshot* snap = nullptr;
  const bool* mr_dontfork = nullptr;  // per snap->mrs
  const MrFate* mr_fate = nullptr;    // per snap->mrs: the rule's answer (may be null)
  const Vma* dc_vmas = nullptr;       // for unattributed ranges
  int dc_count = 0;
  const RawStack* fork_stack = nullptr;
  const PythonStack* fork_py = nullptr;  // may be null or empty
  int64_t now_mono_ns = 0;
  Mode mode = Mode::kWarn;
  ForkVia via = ForkVia::kFork;
  int threads = -1;
  int map_count = -1;
  long max_map_count = -1;
  KernelCofFact cof;
  facts::MachineFacts machine;  // what the rule was given (facts/fork_rule.h)
  ForkSupportFact fork_support;
  const char* fix_text_library = nullptr;  // for FormatFix
  int fix_rule = -1;                       // FixRule, -1: the C-program default
  const char* child_exec_site = nullptr;   // where the exec'ing child is known from
  // What the decision did, for the event log's `fork` event (shim/log/event_writer.h).
  uint64_t site = 0;      // hash of the call site (fork_stack + fork_py)
  bool reported = false;  // the message was printed
  bool allowed = false;   // the site matched FORKGUARD_ALLOW: neither reported nor failed
  // The FORKGUARD_SUPPRESSIONS entry (canonical text) that matched: neither reported nor
  // failed, and logged with the entry so that the report counts it.
  const char* suppressed = nullptr;
  // Decided without the tables (a fork from a signal handler that interrupted forkguard on
  // this thread): no snap, no stacks, no site; `partial_live` has the descriptor counts.
  bool partial = false;
  LiveCounts partial_live;
  // FORKGUARD_MODE=fix: what was changed for this fork, in all and per snap->mrs (may be null).
  FixSummary fix;
  const FixAction* mr_fix = nullptr;
};

}  // namespace forkguard
