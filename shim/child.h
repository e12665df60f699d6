// Everything that runs in a forked child or in the SIGSEGV handler.
//
// ASYNC-SIGNAL-SAFE ONLY in child.cc: flags, write(2), open(2), sigaction(2); no malloc,
// no locks, no stdio, no dladdr. The parent prepares everything the child might print
// (ranges and pre-formatted registering stacks) in the shim's own mmap'd pages before the
// fork: heap pages can share a page with a registered buffer and be gone in the child.
#pragma once

#include <signal.h>

#include <cstdint>

#include "shim/state.h"

namespace forkguard {

// Parent, before a hazardous fork with MADV_DONTFORK ranges: builds the table the child's
// SIGSEGV handler uses (symbolizes the registering stacks; may call dladdr). Returns false
// when it could not be built (the child then just gets no explanation). With `quiet`
// (FORKGUARD_QUIET) the child prints nothing and only logs child_segv.
bool PrepareChildSegvTable(const StateSnapshot& snap, const bool* mr_dontfork, bool quiet);
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

// The SIGSEGV explanation as the handler prints it (exposed for unit tests): returns the
// number of bytes written into buf.
struct ChildSegvRange {
  uintptr_t start;  // registered range
  uintptr_t end;
  uintptr_t page_start;  // page-rounded: what MADV_DONTFORK removed
  uintptr_t page_end;
  const char* call;
  const char* stack_text;  // pre-formatted "    #0 ...\n" lines
  int nips;
  const uintptr_t* ips;
};
size_t FormatChildSegv(char* buf, size_t cap, long pid, uintptr_t addr,
                       const ChildSegvRange& range);

}  // namespace forkguard
