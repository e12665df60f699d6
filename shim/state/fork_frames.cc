#include "shim/state/fork_frames.h"

#include <pthread.h>

#include <atomic>

#include "shim/base/child_path.h"
#include "shim/base/start_path.h"
#include "shim/state/state.h"

namespace forkguard {
namespace {

__thread ThreadForkFrames t_forks __attribute__((tls_model("initial-exec"))) = {};

FORKGUARD_START_DATA std::atomic<const ForkAtforkHooks*> g_hooks{nullptr};
// pthread_atfork returned (ForkAtforkInstalled)
FORKGUARD_START_DATA std::atomic<bool> g_installed{false};
FORKGUARD_START_DATA pthread_once_t g_install_once = PTHREAD_ONCE_INIT;

inline void Fence() { std::atomic_signal_fence(std::memory_order_seq_cst); }

// The state lock is held across fork only by processes that touched RDMA (or while someone
// holds it): a process that never did writes none of the shim's pages around fork.
bool StateWantsLock() {
  RdmaState& st = GlobalState();
  return st.AnyLive() || st.EverInitialized() || st.lock().HeldByAnyone();
}

// Prepare handlers run in reverse order of registration: ours, registered at start, runs
// after those of libraries loaded later and before the real fork copies the address space.
void AtforkPrepare() {
  ThreadForkFrames& t = t_forks;
  // Inside a fork that found the stack full: this one is beyond it too.
  if (t.overflow > 0) {
    ++t.overflow;
    return;
  }
  ForkFrame* f = nullptr;
  if (t.depth > 0 && t.frames[t.depth - 1].stage == ForkFrame::Stage::kDecided) {
    // Our wrapper decided this fork. (A fork that bypassed our wrappers from a signal handler
    // that interrupted a wrapper before its real fork also lands here and is taken for the
    // wrapper's: not decided on its own, never a leak; the wrapper's fork is then decided
    // again here.)
    f = &t.frames[t.depth - 1];
    f->stage = ForkFrame::Stage::kInWindow;
  } else {
    // Full: checked before deciding, so that nothing is decided (a SIGSEGV table prepared)
    // for a fork that can have no frame to carry it to the parent and child handlers.
    if (t.depth >= ThreadForkFrames::kCapacity) {
      ++t.overflow;
      return;
    }
    ForkFrame mine{};
    mine.stage = ForkFrame::Stage::kInWindow;
    const ForkAtforkHooks* hooks = g_hooks.load(std::memory_order_acquire);
    bool decided = hooks != nullptr && hooks->decide != nullptr && hooks->decide(&mine);
    // The clean path: nothing decided, nothing nested, no lock to take - no write at all.
    if (!decided && t.depth == 0 && !StateWantsLock()) return;
    f = PushForkFrame(mine);  // not full: any fork nested in decide() popped its frame
    if (f == nullptr) return;
  }
  StateLock& l = GlobalState().lock();
  // Already ours (a fork from a signal handler inside another fork's window, or one that
  // interrupted a table update): not taken again, never released by this fork. The flag is
  // set after the lock is taken: a handler's fork in between sees the lock held but not by
  // our atfork, and decides without the tables. A lock given up on: the fork goes on.
  if (StateWantsLock() && !l.HeldByThisThread() && l.Lock()) {
    Fence();
    f->took_state_lock = true;
  }
}

// Parent (and child) handlers run in order of registration, ours first.
void AtforkParent() {
  ThreadForkFrames& t = t_forks;
  if (t.overflow > 0) {
    --t.overflow;
    return;
  }
  if (t.depth == 0) return;
  ForkFrame& f = t.frames[t.depth - 1];
  // Cleared before the unlock: a handler's fork in between sees the lock held but not by
  // our atfork (partial verdict), never a claim the lock does not back.
  if (f.took_state_lock) {
    f.took_state_lock = false;
    Fence();
    GlobalState().lock().Unlock();
  }
  if (f.by_wrapper) return;  // the wrapper pops it when the real fork returns
  const ForkAtforkHooks* hooks = g_hooks.load(std::memory_order_acquire);
  if (hooks != nullptr && hooks->parent != nullptr) hooks->parent(f);
  PopForkFrame();
}

FORKGUARD_CHILD_PATH void AtforkChild() {
  ThreadForkFrames& t = t_forks;
  ForkFrame* f = nullptr;
  if (t.overflow > 0) {
    --t.overflow;
  } else if (t.depth > 0) {
    f = &t.frames[t.depth - 1];
    if (f->took_state_lock) f->took_state_lock = false;  // reset below
  }
  ResetCachedTid();
  GlobalState().lock().ResetInChild();
  const ForkAtforkHooks* hooks = g_hooks.load(std::memory_order_relaxed);
  if (hooks != nullptr && hooks->child != nullptr) hooks->child(f);
  if (f != nullptr && !f->by_wrapper) PopForkFrame();
}

}  // namespace

FORKGUARD_CHILD_PATH ThreadForkFrames& ThisThreadForks() { return t_forks; }

ForkFrame* PushForkFrame(const ForkFrame& frame) {
  ThreadForkFrames& t = t_forks;
  int d = t.depth;
  if (d >= ThreadForkFrames::kCapacity) return nullptr;
  // frames[d] is all zero (kFree): a handler's fork after this sees a free top frame,
  // claims nothing and pushes above it.
  t.depth = d + 1;
  Fence();
  ForkFrame& f = t.frames[d];
  f.by_wrapper = frame.by_wrapper;
  f.hazard = frame.hazard;
  f.explain_segv = frame.explain_segv;
  f.took_state_lock = frame.took_state_lock;
  Fence();
  f.stage = frame.stage;
  return &f;
}

FORKGUARD_CHILD_PATH void PopForkFrame() {
  ThreadForkFrames& t = t_forks;
  int d = t.depth - 1;
  if (d < 0) return;
  ForkFrame& f = t.frames[d];
  // Cleared while still counted, so every frame above the depth stays all zero. Only what
  // is set is written (in a child, a write copies the page).
  if (f.stage != ForkFrame::Stage::kFree) f.stage = ForkFrame::Stage::kFree;
  if (f.by_wrapper) f.by_wrapper = false;
  if (f.hazard) f.hazard = false;
  if (f.explain_segv) f.explain_segv = false;
  if (f.took_state_lock) f.took_state_lock = false;
  Fence();
  t.depth = d;
}

bool HeldByOurAtfork() {
  const ThreadForkFrames& t = t_forks;
  for (int i = 0; i < t.depth && i < ThreadForkFrames::kCapacity; ++i) {
    if (t.frames[i].took_state_lock) return true;
  }
  return false;
}

FORKGUARD_START_PATH void InstallForkAtfork(const ForkAtforkHooks* hooks) {
  if (hooks != nullptr) g_hooks.store(hooks, std::memory_order_release);
  if (g_installed.load(std::memory_order_acquire)) return;
  // pthread_once, not a flag: a second thread's first RDMA call must not go on to take our
  // locks while the first thread's registration is still in progress (a fork in between
  // would run no handler of ours and its child would inherit the lock held).
  pthread_once(&g_install_once, [] {
    pthread_atfork(AtforkPrepare, AtforkParent, AtforkChild);
    g_installed.store(true, std::memory_order_release);
  });
}

bool ForkAtforkInstalled() { return g_installed.load(std::memory_order_acquire); }

}  // namespace forkguard
