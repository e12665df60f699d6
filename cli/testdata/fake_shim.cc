// A stand-in for libforkguard.so for the host tests of `forkguard run`: it
// writes forkguard.event/1 lines (process_start, and a fork decision at each
// fork() — "hazard" when FAKE_SHIM_HAZARD=1) so that the CLI's environment
// setup, exit statuses, signal forwarding and end-of-run report can be tested
// without the real shim or a device. The real shim is tested on rxe0 by
// run_rdma_test.
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

namespace {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int g_seq = 0;

void Emit(const char* event, const char* extra) {
  const char* dir = getenv("FORKGUARD_LOG");
  if (!dir || !*dir) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/forkguard.fakehost.%d.0.jsonl", dir, getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  char line[8192];
  int n = snprintf(line, sizeof line,
                   "{\"schema\":\"forkguard.event/1\",\"event\":\"%s\",\"ts_ns\":%lld,"
                   "\"pid\":%d,\"ppid\":%d,\"tid\":%d,\"host\":\"fakehost\",\"prog\":\"fake\","
                   "\"rank\":null,\"seq\":%d%s}\n",
                   event, static_cast<long long>(NowNs()), getpid(), getppid(), getpid(), g_seq++,
                   extra);
  if (n > 0 && write(fd, line, static_cast<size_t>(n)) < 0) {
  }
  close(fd);
}

__attribute__((constructor)) void Start() { Emit("process_start", ",\"mode\":\"warn\""); }

}  // namespace

extern "C" pid_t fork(void) {
  using ForkFn = pid_t (*)();
  static ForkFn real = reinterpret_cast<ForkFn>(dlsym(RTLD_NEXT, "fork"));
  const char* h = getenv("FAKE_SHIM_HAZARD");
  bool hazard = h && strcmp(h, "1") == 0;
  Emit("fork", hazard ? ",\"verdict\":\"hazard\",\"reasons\":[\"inherited-rdma\"],"
                        "\"action\":\"proceeded\",\"site\":\"fa4e\",\"stack\":[]"
                      : ",\"verdict\":\"clean\",\"reasons\":[],\"action\":\"proceeded\","
                        "\"site\":\"c1ea\",\"stack\":[]");
  pid_t pid = real();
  if (pid == 0) {
    g_seq = 0;  // a child starts its own file
    Emit("process_start", ",\"mode\":\"warn\"");
  }
  if (pid > 0) {
    char extra[64];
    snprintf(extra, sizeof extra, ",\"child_pid\":%d", pid);
    Emit("fork_child", extra);
  }
  return pid;
}
