// forkguard_fork_check_shim (api/forkguard.h): exported by libforkguard.so so that
// libforkguard_check.so (and any caller) finds the shim's answer with
// dlsym(RTLD_DEFAULT, "forkguard_fork_check_shim").
#include <errno.h>
#include <sys/mman.h>

#include "api/check_result.h"
#include "api/forkguard.h"
#include "shim/base/sys.h"
#include "shim/hooks/hooks.h"

extern "C" __attribute__((visibility("default"))) int forkguard_fork_check_shim(
    forkguard_check_result* out) {
  if (out == nullptr || out->size < forkguard::api::kMinResultSize) {
    errno = EINVAL;
    return -1;
  }
  // The whole result off the caller's stack (it may be small; ~20 KiB).
  auto* full =
      static_cast<forkguard_check_result*>(forkguard::MapAnonymous(sizeof(forkguard_check_result)));
  if (full == nullptr) {
    errno = ENOMEM;
    return -1;
  }
  int saved = errno;
  int rc = forkguard::hooks::QueryFork(full);
  int err = errno;
  if (rc == 0) forkguard::api::CopyOut(*full, out);
  munmap(full, sizeof(*full));
  errno = rc == 0 ? saved : err;
  return rc;
}
