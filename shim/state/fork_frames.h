// The fork path's per-thread bookkeeping: one stack of fork frames per thread.
//
// A fork from a signal handler can run inside another fork in progress on the same thread
// (between our wrapper's decision and the real fork, or inside the atfork window, where our
// prepare handler holds the state lock). Each fork in progress on the thread has one frame:
// what was decided for it (for the atfork child handler) and whether its prepare took the
// state lock (for the parent handler, and so that a nested fork knows the tables are
// readable). Nothing else on the fork path keeps per-thread state.
//
// Who pushes and pops:
//   - our fork wrappers (fork, daemon, forkpty): BeforeFork pushes a `kDecided` frame after
//     a decision that needs one (a hazard, a log, or any fork nested in another), and
//     AfterForkParent/AfterForkChild pop it; the prepare handler claims the `kDecided` top
//     frame (`kInWindow`) instead of deciding again;
//   - the atfork prepare handler, for a fork that did not come through a wrapper and needs a
//     frame (it decided something, the state lock is to be taken, or it is nested): pushes
//     a `kInWindow` frame, which the atfork parent/child handler pops;
//   - _Fork runs no atfork handlers: its wrapper pushes nothing.
// A clean fork at depth 0 without a log pushes nothing and writes nothing (after fork every
// first write to a page copies it). Every fork that starts while a frame is on the stack
// pushes one, so in a fork's atfork handlers a non-empty stack's top frame is that fork's.
//
// Signal safety: a push raises the depth before it writes the frame, a pop clears the frame
// before it lowers the depth, and every frame above the depth is all zero; a handler's fork
// landing between any two steps pushes and pops above them and leaves them as it found them.
// The stage is written last, so a frame is never claimed half-written.
//
// Full (kCapacity frames, i.e. that many forks nested in one another on one thread): a fork
// that cannot push is counted in `overflow` instead, and while it is nonzero the atfork
// handlers do nothing but count (no decision, no state lock: nothing can leak); such a fork
// through a wrapper is still decided there and the wrapper applies its child side itself.
//
// ASYNC-SIGNAL-SAFE: TLS (initial-exec) only; no malloc, no locks.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace forkguard {

struct ForkFrame {
  enum class Stage : uint8_t {
    kFree = 0,  // above the depth, or not yet written
    kDecided,   // pushed by a fork wrapper; its atfork prepare has not run yet
    kInWindow,  // the fork's atfork prepare ran (claimed or pushed by it)
  };
  Stage stage;
  bool by_wrapper;       // popped by the wrapper, not by the atfork handlers
  bool hazard;           // the child is a hazardous child
  bool explain_segv;     // the child gets the SIGSEGV explanation (a table was prepared)
  bool took_state_lock;  // this fork's prepare holds the state lock
  bool fix_window;       // a fork decided by the prepare handler holds the fix window
};

struct ThreadForkFrames {
  static constexpr int kCapacity = 32;
  int depth;
  int overflow;  // forks in progress beyond kCapacity (see above)
  // Not a frame: the pid this thread vforked from (our vfork prologue tail-jumps to the
  // real vfork, so nothing runs after it to pop). A vfork child shares our memory, so the
  // unseen-child check must neither fire nor write in it; cleared back in the parent.
  pid_t vfork_from;
  ForkFrame frames[kCapacity];
};

// This thread's frames (zero-initialized TLS, initial-exec: no allocation, no lock).
ThreadForkFrames& ThisThreadForks();

// The innermost frame, nullptr when the stack is empty.
inline ForkFrame* TopForkFrame() {
  ThreadForkFrames& t = ThisThreadForks();
  return t.depth > 0 ? &t.frames[t.depth - 1] : nullptr;
}

// Pushes `frame` (its stage written last); nullptr when the stack is full (the caller
// counts the fork in `overflow` or goes on without a frame).
ForkFrame* PushForkFrame(const ForkFrame& frame);
// Pops the top frame (which must be the caller's).
void PopForkFrame();

// True when this thread holds the state lock because the atfork prepare handler of a fork
// in progress on it took it (the tables are then safe to read from a nested fork).
bool HeldByOurAtfork();

// What the core does in the atfork handlers (shim/hooks/fork_decision.cc); all optional.
struct ForkAtforkHooks {
  // A fork that no wrapper decided: decide it (warn only). True when `out` (hazard,
  // explain_segv) needs a frame.
  bool (*decide)(ForkFrame* out);
  // Parent, after the fork: `frame` was pushed by the prepare handler (not a wrapper's).
  void (*parent)(const ForkFrame& frame);
  // Every child, after the state lock was reset: `frame` is the fork's (nullptr: none).
  void (*child)(const ForkFrame* frame);
};

// Registers the one set of atfork handlers that keeps the frames and the state lock across
// fork (idempotent: the first call registers; `hooks`, when given, are used from then on).
// A caller that returns has them registered (a concurrent first call waits for the
// registration). Registered lazily (docs/shim-cost.md): at start only when a log or
// RDMA devices need them, otherwise at the first watched RDMA call, before it touches any
// lock of ours. Never from a fork wrapper or an atfork handler: glibc's pthread_atfork
// takes the lock that fork holds across its handlers.
void InstallForkAtfork(const ForkAtforkHooks* hooks);

// True once InstallForkAtfork's registration is complete (never before pthread_atfork
// returned): forks from then on run our handlers. Inherited by forked children.
bool ForkAtforkInstalled();

}  // namespace forkguard
