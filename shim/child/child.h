// The child's side of a hazardous fork: the SIGSEGV explanation (the table the parent builds
// before the fork, the handler the child installs after it), the hazardous-child flag every
// RDMA hook asks, and the exec notes a child and an exec'ing process log.
//
// This is not the whole child path. What a child runs before fork() returns in it is marked
// FORKGUARD_CHILD_PATH (shim/base/child_path.h) and lives beside what it resets: the fork
// wrappers (interpose.cc), the atfork child handler and the fork frames (fork_frames.cc),
// hooks::CoreAtforkChild / AfterForkChild / AfterRawForkChild (fork_decision.cc), the cached
// pid and the state lock (state.cc), the event log's per-process file (event_log.cc), and
// ChildAfterFork here. A child of a raw clone() runs none of them: the first watched call it
// makes finds it (hooks::CheckUnseenChild, process_hooks.cc).
//
// ASYNC-SIGNAL-SAFE ONLY in child.cc, except PrepareChildSegvTable (the parent's side, which
// may call dladdr): flags, write(2), open(2), sigaction(2); no malloc, no locks, no stdio. The
// parent prepares everything the child might print (ranges and pre-formatted registering
// stacks) in the shim's own mmap'd pages before the fork: heap pages can share a page with a
// registered buffer and be gone in the child. The words it prints are in shim/messages/message.h
// (FormatChildSegv, ChildSegvTail).
#pragma once

#include <signal.h>

#include <cstdint>

#include "shim/fix/fork_fix.h"
#include "shim/messages/message.h"
#include "shim/state/state.h"

namespace forkguard {

// Parent, before a hazardous fork with MADV_DONTFORK ranges: builds the table the child's
// SIGSEGV handler uses (symbolizes the registering stacks; may call dladdr). Returns false
// when it could not be built (the child then just gets no explanation). With `quiet`
// (FORKGUARD_QUIET) the child prints nothing and only logs child_segv.
// `mr_fix` (may be null): what fix mode did per MR; a withheld range's explanation says so.
bool PrepareChildSegvTable(const StateSnapshot& snap, const bool* mr_dontfork, bool quiet,
                           const FixAction* mr_fix = nullptr);
// Parent, after the fork returned (or failed): the table is no longer needed in the parent.
void ReleaseChildSegvTable();

// Child, right after the fork (from the atfork child handler). Resets per-process
// bookkeeping; after a hazardous fork with a prepared table (`explain_segv`) installs the
// SIGSEGV handler.
void ChildAfterFork(bool hazardous, bool explain_segv);

// True in a child of a hazardous fork (until it execs). Inline: every RDMA hook asks.
extern volatile sig_atomic_t g_hazard_child;
inline bool IsHazardousChild() { return g_hazard_child != 0; }

// Child of a hazardous fork calling exec*: logs child_exec (the child is benign).
void ChildNoteExec(const char* path);
// An exec by a process that has its own log file: an `exec` event, so that a reader joins
// this file and the one the exec'd program writes (same pid) into one process. A process
// with no line yet (a forked child) writes nothing: no file is made only for this.
// Async-signal-safe.
void LogExec(const char* path);

}  // namespace forkguard
