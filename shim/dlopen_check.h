// Detects dlopen flags that defeat LD_PRELOAD interposition (RTLD_DEEPBIND).
//
// A library loaded RTLD_DEEPBIND binds its own references in its own dependency scope
// first, so its libibverbs/librdmacm calls skip the shim's wrappers. The shim cannot undo
// that; it says so once and relies on the /dev/infiniband descriptor backstop at fork
// time. Under the LD_AUDIT module (libforkguard_audit.so) those bindings are routed to
// the shim anyway, so nothing is said.
#ifndef FORKGUARD_SHIM_DLOPEN_CHECK_H_
#define FORKGUARD_SHIM_DLOPEN_CHECK_H_

namespace forkguard {

// Call from the shim's dlopen wrapper after the real dlopen succeeded (handle != nullptr).
// When `flags` has RTLD_DEEPBIND, an RDMA library is loaded in the process and the audit
// module is not active, writes once per process to stderr:
//   forkguard: <file> loaded with RTLD_DEEPBIND; its RDMA calls bypass interposition,
//   relying on the /dev/infiniband descriptor backstop
// and returns true (the caller may log a `note` event); false otherwise. Thread-safe;
// takes the loader lock (dlopen RTLD_NOLOAD): not for the fork path.
bool CheckDlopenFlags(const char* file, int flags);

// True when LD_AUDIT names libforkguard_audit.so (the loader read it at startup).
bool AuditModuleActive();

}  // namespace forkguard

#endif  // FORKGUARD_SHIM_DLOPEN_CHECK_H_
