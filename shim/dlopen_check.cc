#include "shim/dlopen_check.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace forkguard {
namespace {

std::atomic<bool> g_deepbind_reported{false};

bool IsLoaded(const char* soname) {
  void* handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  dlclose(handle);  // drops the reference RTLD_NOLOAD added
  return true;
}

}  // namespace

bool AuditModuleActive() {
  const char* audit = getenv("LD_AUDIT");
  return audit != nullptr && strstr(audit, "libforkguard_audit.so") != nullptr;
}

bool CheckDlopenFlags(const char* file, int flags) {
  if ((flags & RTLD_DEEPBIND) == 0 || AuditModuleActive()) return false;
  // Only worth a word when RDMA can be involved: the library itself or one of its
  // dependencies pulled in libibverbs/librdmacm.
  if (!IsLoaded("libibverbs.so.1") && !IsLoaded("librdmacm.so.1")) return false;
  if (g_deepbind_reported.exchange(true)) return false;
  char line[512];
  int n = snprintf(line, sizeof line,
                   "forkguard: %s loaded with RTLD_DEEPBIND; its RDMA calls bypass "
                   "interposition, relying on the /dev/infiniband descriptor backstop\n",
                   file != nullptr ? file : "(main program)");
  if (n > 0) {
    size_t len = static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1;
    ssize_t ignored = write(STDERR_FILENO, line, len);
    (void)ignored;
  }
  return true;
}

}  // namespace forkguard
