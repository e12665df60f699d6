// The process hooks: a child no fork wrapper saw (raw clone), posix_spawn/vfork, exec*, and
// the open()/dlopen calls that arm the descriptor backstop.
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "formats/text_buffer.h"
#include "shim/base/exec_watch.h"
#include "shim/child/child.h"
#include "shim/hooks/hooks.h"
#include "shim/hooks/hooks_internal.h"
#include "shim/log/event_writer.h"
#include "shim/messages/message.h"

namespace forkguard::hooks {

// A process created by a raw clone()/clone3() syscall (Go's runtime, sandboxes) runs no
// atfork handler and none of our fork wrappers: the first watched call it makes (exec*, an
// device open/PD/rdma_cm call, fork) finds this thread's cached pid still the parent's (not
// on registration: one getpid() per ibv_reg_mr is measurable there). Say once, then treat it
// as a hazardous child. Async-signal-safe (getpid, write); writes nothing in a vfork child.
void CheckUnseenChild() {
  pid_t cached = CachedPid();
  if (cached == 0 || !GlobalState().EverInitialized()) return;
  pid_t now = getpid();
  ThreadForkFrames& forks = ThisThreadForks();
  if (now == cached) {
    if (forks.vfork_from != 0) forks.vfork_from = 0;  // back in the parent after a vfork
    return;
  }
  if (forks.vfork_from == cached) return;
  ResetCachedTid();
  bool live = GlobalState().AnyLive();
  ChildAfterFork(live, false);
  if (g_config.quiet || g_config.mode == Mode::kOff) return;
  char buf[768];
  TextBuffer b(buf, sizeof(buf));
  FormatRawCloneChild(b, now, g_prog, cached, live);
  WriteStderr(b.data(), b.size());
}

void OnSpawn(const char* call, pid_t child, int ret) {
  BusyScope busy;
  // Without a log there is nothing to write: not Active(), which registers our atfork
  // handlers (a posix_spawn or vfork is no reason for every later fork to run them).
  EnsureInit();
  if (NoLog() || !Active()) return;
  LogSpawn(call, child, ret == 0);
}

void OnVfork() {
  // getpid(), not CurrentPid(): a pid cached on this thread before any watched call would
  // be inherited by the child of a later fork that resets no cache (our atfork handlers are
  // registered at the first watched call; until then a fork runs none).
  ThisThreadForks().vfork_from = getpid();
  OnSpawn("vfork", 0, 0);
}

void OnOpened(const char* path, int fd) {
  if (fd < 0 || path == nullptr || g_backstop_armed.load(std::memory_order_relaxed)) return;
  // /dev/infiniband/uverbsN, /dev/infiniband/rdma_cm, or rdma-core's fallback device node
  // of the same name in a private directory (containers without /dev/infiniband).
  const char* base = BaseName(path);
  if (strncmp(base, "uverbs", 6) == 0 || strcmp(base, "rdma_cm") == 0) {
    // Before the flag: a fork that sees the backstop armed finds our handlers registered.
    if (g_ready && g_config.mode != Mode::kOff) InstallForkAtfork(&kCoreAtforkHooks);
    g_backstop_armed.store(true, std::memory_order_relaxed);
  }
}

void OnDeepBind() {
  if (g_ready && g_config.mode != Mode::kOff) InstallForkAtfork(&kCoreAtforkHooks);
  g_backstop_armed.store(true, std::memory_order_relaxed);
}

void OnExecTarget(const char* file, char* const envp[], bool search) {
  // Async-signal-safe, as OnExec. Only with a log: the record is for `forkguard run`/`report`.
  if (!g_ready || g_config.mode == Mode::kOff) return;
  EventLog& log = GlobalEventLog();
  if (!log.enabled()) return;
  char resolved[1024];
  unsigned why = ExecUnwatchedReasons(file, envp != nullptr ? envp : environ, search, resolved,
                                      sizeof(resolved));
  // Nothing to say, or a target that cannot be opened (the exec fails, or we cannot tell).
  if (why == 0 || resolved[0] == '\0' || access(resolved, F_OK) != 0) return;
  RdmaFds fds = ScanRdmaFds();
  bool held = GlobalState().AnyLive() || fds.uverbs > 0 || fds.rdma_cm > 0;
  char buf[2048];
  TextBuffer b(buf, sizeof(buf));
  b.Key(schema::kKeyPath).JsonStr(resolved).Key(schema::kKeyWhy).Char('[');
  bool first = true;
  for (ExecUnwatched r : {kExecPreloadRemoved, kExecStatic, kExecSetuid}) {
    if ((why & r) == 0) continue;
    if (!first) b.Char(',');
    b.Quoted(ExecUnwatchedName(r));
    first = false;
  }
  b.Char(']').Key(schema::kKeyHeldRdma).Str(held ? "true" : "false");
  b.Key(schema::kKeyExecBy).JsonStr(g_prog);
  if (b.truncated()) return;
  // The program keeps this process's pid; a vforked child shares our memory and our cached
  // pid: ask the kernel. The record goes into a file of its own, under that pid.
  pid_t pid = static_cast<pid_t>(syscall(SYS_getpid));
  pid_t ppid = static_cast<pid_t>(syscall(SYS_getppid));
  log.WriteForeignFile(pid, ppid, BaseName(resolved), schema::kUnwatchedExec, b.data());
}

void OnExec(const char* path) {
  // Async-signal-safe: a child may exec right after fork.
  if (g_ready && g_config.mode != Mode::kOff) CheckUnseenChild();
  if (IsHazardousChild()) ChildNoteExec(path);
  // Not from a vfork child: it shares its parent's memory (its log state, its counts, the
  // cached pid) but not its descriptors, which it may have closed (close_fds), and its exec
  // is another pid's. A write there would fail and mark the parent's log broken.
  pid_t vfork_from = ThisThreadForks().vfork_from;
  if (vfork_from != 0 && getpid() != vfork_from) return;
  LogExec(path);
  // The counts not written yet: the image that counted them is about to go (its destructor
  // never runs).
  if (NoLog()) return;
  FlushEventCounts();
}
}  // namespace forkguard::hooks
