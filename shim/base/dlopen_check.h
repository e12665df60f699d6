// Detects dlopen flags that defeat LD_PRELOAD interposition (RTLD_DEEPBIND).
//
// A library loaded RTLD_DEEPBIND binds its own references in its own dependency scope
// first, so its libibverbs/librdmacm calls skip the shim's wrappers. The shim cannot undo
// that; it says so once and relies on the /dev/infiniband descriptor backstop at fork
// time. Under the LD_AUDIT module (libforkguard_audit.so) those bindings are routed to
// the shim anyway, so nothing is said.
//
// Two phases, because a dlopen wrapper must not call the real dlopen from a C frame of
// its own: glibc searches the *caller's* DT_RUNPATH and $ORIGIN, so the wrapper has to
// tail-jump to the real dlopen (like the shim's vfork) and cannot run code after it.
#pragma once

namespace forkguard {

// Phase 1, before the real dlopen: remembers the first file opened with RTLD_DEEPBIND.
// No allocation, no locks, no output.
void NoteDlopenFlags(const char* file, int flags);

// Phase 2, outside the loader (e.g. in the parent when a fork is found hazardous; not in
// an atfork handler): when a RTLD_DEEPBIND load was noted, libibverbs or librdmacm is
// loaded, and the audit module is not active, writes once per process to stderr
//   forkguard: <file> loaded with RTLD_DEEPBIND; its RDMA calls bypass interposition,
//   relying on the /dev/infiniband descriptor backstop
// and returns true (the caller may log a `note` event). Thread-safe. Takes the loader
// lock (dlopen RTLD_NOLOAD).
bool ReportDeepbindOnce();

// True when LD_AUDIT names libforkguard_audit.so (the loader read it at startup).
bool AuditModuleActive();

}  // namespace forkguard
