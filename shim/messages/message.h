// Every sentence the shim says to its user ("forkguard: ..." on stderr, and the notes the
// event log keeps of them): the message for a hazardous fork and the one-line notices. The
// phrases are a contract (tests and users grep for them; see shim/README.md). No malloc, no
// locks: the notices are formatted on the fork path, in a forked child and in a SIGSEGV
// handler, so each only appends to the caller's TextBuffer. The one exception is the
// "ignoring FORKGUARD_X=..." warning of a setting, formatted by shim/base/config.cc
// (FormatIgnoredVariable), which the config fuzzer compiles on its own; the LD_AUDIT module
// (audit.cc) and the RTLD_DEEPBIND notice (dlopen_check.cc) are built without the core and say
// their one line themselves.
#pragma once

#include "formats/text_buffer.h"
#include "shim/messages/fork_report.h"
#include "shim/stack/python_stack.h"
#include "shim/stack/stack.h"
#include "shim/verdict/proc_facts.h"
#include "shim/verdict/verdict.h"

namespace forkguard {

// Formats the whole multi-line message (ends with '\n'). No malloc.
void FormatHazardMessage(TextBuffer& out, const ForkReport& r, bool demangle);

// "  fork support: on, turned on by ...; rdma-core N ..." (the rdma-core x kernel x who case,
// from facts::RegistrationMarksDontfork; `v` (may be null) says whether the marked ranges
// need it).
void FormatForkSupportLine(TextBuffer& out, const ForkSupportFact& f, const facts::MachineFacts& m,
                           const ForkVerdict* v);
// "kernel copy-on-fork for pinned pages: yes (netlink); pin probe: anonymous intact, ..."
void FormatKernelFacts(TextBuffer& out, const KernelCofFact& cof, const facts::PinProbe& probe);

// Appends the frames of `stack` as "    #i func+0xoff (obj+0xoff)\n" lines.
void FormatStackLines(TextBuffer& out, const RawStack& stack, const char* indent, bool demangle);
// Appends a Python traceback ("Python stack (most recent call last):" + File lines), each
// line prefixed with `indent`; nothing for an empty stack.
void FormatPythonLines(TextBuffer& out, const PythonStack& py, const char* indent);

// Fix mode's part of the hazard message (the "  mode: fix - ..." line, ends with '\n').
void FormatFixModeLine(TextBuffer& out, const ForkReport& r);
// A fork fix mode made safe, in one line (ends with '\n'): "forkguard: fork made safe in pid P
// (prog on host): N ranges (...) made MADV_DOFORK for the fork: ...".
void FormatFixedForkLine(TextBuffer& out, const ForkReport& r);

// A hazardous fork decided without the tables (from a signal handler that interrupted
// forkguard on this thread), one line ending in '\n': "forkguard: fork after RDMA init in pid
// P (prog, rank R on host): verdict: hazard (inherited-rdma); forked from a signal handler
// that interrupted forkguard, so no details; mode: M - <action>".
void FormatPartialHazardLine(TextBuffer& out, const ProcessIdentity& who, Mode mode,
                             const char* action);

// A process created by a raw clone()/clone3() after RDMA init in its parent (ends with '\n').
// `parent_held_rdma`: the parent had live RDMA objects (then MADV_DONTFORK pages may be gone).
void FormatRawCloneChild(TextBuffer& out, long pid, const char* prog, long parent,
                         bool parent_held_rdma);

// A forked child calling `call` on an RDMA object its parent created (no '\n').
void FormatInheritedUse(TextBuffer& out, long pid, const char* prog, const char* call, long parent);

// A bounded lock wait that gave up: "forkguard: internal lock held for over N s by thread T in
// pid P: ..." (no '\n').
void FormatLockGaveUp(TextBuffer& out, long seconds, long owner, long pid);

// FORKGUARD_SUPPRESSIONS not used at all: a file with `bad` bad lines, the first at `line`
// ("forkguard: ignoring FORKGUARD_SUPPRESSIONS=path (every entry): path:N: what (and M more
// bad lines); using no suppressions"), or one that cannot be used ("forkguard: ignoring
// FORKGUARD_SUPPRESSIONS=path: why (err); using no suppressions"; `err` may be null). No '\n'.
void FormatSuppressionsRefused(TextBuffer& out, const char* path, int line, const char* what,
                               int bad);
void FormatSuppressionsIgnored(TextBuffer& out, const char* path, const char* why, const char* err);

// The event log stopped writing: "forkguard: event log: cannot <what> in <dir>: <error>; no
// more events are logged by pid P". `error`: the text for errno, or null (then "errno N").
void FormatEventLogFailed(TextBuffer& out, const char* what, const char* dir, const char* error,
                          int err, long pid);

// The SIGSEGV explanation as the child's handler prints it: returns the number of bytes
// written into buf (its head; the registering stack is pre-formatted in `range`), and the
// line that follows the stack (ChildSegvTail, with its '\n').
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
const char* ChildSegvTail();
// The same for a range fix mode withheld from the child.
const char* ChildSegvTailWithheld();

}  // namespace forkguard
