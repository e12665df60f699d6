#include "shim/base/dlopen_check.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "shim/base/stderr_line.h"
#include "shim/base/sys.h"

namespace forkguard {
namespace {

// 0: nothing noted; 1: being written; 2: g_deepbind_file is complete.
std::atomic<int> g_deepbind_noted{0};
char g_deepbind_file[256];
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

void NoteDlopenFlags(const char* file, int flags) {
  if ((flags & RTLD_DEEPBIND) == 0) return;
  int expected = 0;
  if (!g_deepbind_noted.compare_exchange_strong(expected, 1)) return;  // first one wins
  const char* name = file != nullptr ? file : "(main program)";
  CopyCString(g_deepbind_file, sizeof g_deepbind_file, name);
  g_deepbind_noted.store(2, std::memory_order_release);
}

bool ReportDeepbindOnce() {
  if (g_deepbind_noted.load(std::memory_order_acquire) != 2) return false;
  if (g_deepbind_reported.load() || AuditModuleActive()) return false;
  // Only worth a word when RDMA can be involved.
  if (!IsLoaded("libibverbs.so.1") && !IsLoaded("librdmacm.so.1")) return false;
  if (g_deepbind_reported.exchange(true)) return false;
  char line[512];
  int n = snprintf(line, sizeof line,
                   "forkguard: %s loaded with RTLD_DEEPBIND; its RDMA calls bypass "
                   "interposition, relying on the /dev/infiniband descriptor backstop\n",
                   g_deepbind_file);
  if (n > 0) {
    size_t len = static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1;
    WriteStderrLines(line, len);
  }
  return true;
}

}  // namespace forkguard
