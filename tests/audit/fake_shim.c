// Stand-in for libforkguard.so in host tests of the audit module: exports a few of the
// shim's wrapper names, says on stderr that it was called, and forwards to the real
// default-version function the way the shim does (dlvsym from inside this library, which
// the audit module must not redirect back here -- that would recurse forever).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static void Said(const char* name) {
  const char prefix[] = "fake-shim: ";
  ssize_t ignored = write(STDERR_FILENO, prefix, sizeof prefix - 1);
  ignored = write(STDERR_FILENO, name, strlen(name));
  ignored = write(STDERR_FILENO, "\n", 1);
  (void)ignored;
}

static void* Real(const char* name) {
  void* fn = dlvsym(RTLD_NEXT, name, "IBVERBS_1.1");
  if (fn == NULL) {  // libibverbs loaded RTLD_LOCAL: not in the global scope
    void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib != NULL) {
      fn = dlvsym(lib, name, "IBVERBS_1.1");
      dlclose(lib);
    }
  }
  return fn;
}

EXPORT void* ibv_open_device(void* device) {
  Said("ibv_open_device");
  return ((void* (*)(void*))Real("ibv_open_device"))(device);
}

EXPORT void* ibv_alloc_pd(void* context) {
  Said("ibv_alloc_pd");
  return ((void* (*)(void*))Real("ibv_alloc_pd"))(context);
}

EXPORT void* ibv_reg_mr(void* pd, void* addr, size_t length, int access) {
  Said("ibv_reg_mr");
  return ((void* (*)(void*, void*, size_t, int))Real("ibv_reg_mr"))(pd, addr, length, access);
}

EXPORT int ibv_fork_init(void) {
  Said("ibv_fork_init");
  return ((int (*)(void))Real("ibv_fork_init"))();
}
