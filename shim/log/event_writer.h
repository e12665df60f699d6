// The event log's records, one function per event (schema: formats/EVENT_LOG.md; names and keys:
// formats/event_schema.h). Each renders what the core knows - for a fork, the decision's
// ForkReport, as shim/messages/message.cc renders it as text - and writes it through EventLog as
// one line. All of them do nothing when the log is off; none calls malloc, so the fork path may
// call them.
#pragma once

#include <sys/types.h>

#include "shim/log/event_log.h"
#include "shim/messages/message.h"
#include "shim/stack/python_stack.h"
#include "shim/stack/stack.h"
#include "shim/state/state.h"

namespace forkguard {

// `note`: shim self-diagnostics.
void LogNote(const char* text);
// `process_start`: argv (from /proc/self/cmdline), the mode, the shim's version, the exe.
void LogProcessStart(const char* mode, const char* shim_version);
// `rdma_call`: a watched call (device may be null).
void LogRdmaCall(const char* call, const char* device, const void* handle, bool ok, int err);
// `rdma_init`: the process's first RDMA initialization and where it happened.
void LogRdmaInit(RdmaCall call, const char* device, const RawStack& stack, const PythonStack* py);
// `mr_register`: a registration at `rec.stack`; `dontfork`: the library marked the whole
// range MADV_DONTFORK during this call. At a site (stack, call, dontfork) this file already
// has a line for, the registration is counted instead: `mr_counts`.
void LogMrRegister(const MrRecord& rec, bool dontfork);
// `mr_deregister`: an MR the shim never saw registered was deregistered.
void LogMrDeregister(const void* mr);
// A tracked MR's deregistration: counted (`mr_counts`'s deregs), not a line.
void CountMrDeregister();
// Writes the counts not written yet (before an exec). Async-signal-safe.
void FlushEventCounts();
// `fork_init`: ibv_fork_init's result; `caller` "" when unknown.
void LogForkInit(int ret, int err, const char* caller);

// `fork`: the decision, in the parent before the real fork. Hazards carry r.snap and the
// facts; a clean fork has no snap (init null, ranges empty, live zero, facts null); a partial
// one (r.partial: a fork from a signal handler that interrupted forkguard) has no stack and
// no site, and its `live` is r.partial_live. `line`: the caller already holds the log's
// large line (its buffers, e.g. the fork's Python stack, are guarded by it); otherwise this
// takes one, or for a partial event uses a small buffer on the stack (no table, no lock).
void LogFork(const ForkReport& r, EventLog::LargeLine* line = nullptr);
// `action` of the fork event: "proceeded", "failed", "aborted", "off".
const char* ForkActionName(const ForkReport& r);

// `fork_child`: written by the parent after fork returned.
void LogForkChild(pid_t child);
// `spawn`: posix_spawn*, vfork (child_pid null when unknown or failed).
void LogSpawn(const char* call, pid_t child, bool ok);
// `process_exit`: from the shim's destructor (status unknown).
void LogProcessExit();

}  // namespace forkguard
