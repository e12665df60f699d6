// Test probe for shim/python_stack: loaded into /usr/bin/python3 (ctypes, and LD_PRELOAD
// for the fork hook), it prints what the shim would see.
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>

#include "shim/stack/python_stack.h"

extern "C" {

// Formats the calling thread's Python stack into buf; returns its length.
__attribute__((visibility("default"))) size_t forkguard_probe_format(char* buf, size_t cap) {
  return forkguard::FormatCurrentPythonStack(buf, cap, forkguard::PythonStack::kMaxFrames);
}

// With PYSTACK_PROBE_FORK=1: writes "probe-fork:\n<Python stack>" to stderr, then forks,
// which is where the shim captures it (in the parent, before the real fork).
__attribute__((visibility("default"))) pid_t fork(void) {
  using ForkFn = pid_t (*)();
  static ForkFn real = reinterpret_cast<ForkFn>(dlsym(RTLD_NEXT, "fork"));
  const char* on = getenv("PYSTACK_PROBE_FORK");
  if (on != nullptr && strcmp(on, "1") == 0) {
    static char buf[16384];
    size_t n = forkguard::FormatCurrentPythonStack(buf, sizeof buf, 32);
    ssize_t ignored = write(STDERR_FILENO, "probe-fork:\n", 12);
    ignored = write(STDERR_FILENO, buf, n);
    (void)ignored;
  }
  return real();
}

}  // extern "C"
