#include "shim/state/fork_frames.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "shim/state/state.h"

namespace forkguard {
namespace {

bool AllZero(const ForkFrame& f) {
  static const ForkFrame kZero{};
  return memcmp(&f, &kZero, sizeof(f)) == 0;
}

ForkFrame Frame(ForkFrame::Stage stage, bool by_wrapper) {
  ForkFrame f{};
  f.stage = stage;
  f.by_wrapper = by_wrapper;
  return f;
}

// Runs `body` in a forked child (the frames and the state lock are per process/thread) and
// expects it to exit 0.
template <typename Body>
void InChild(Body body) {
  pid_t p = fork();
  ASSERT_GE(p, 0);
  if (p == 0) _exit(body());
  int status = -1;
  ASSERT_EQ(waitpid(p, &status, 0), p);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// InChild with our atfork handlers installed and an RDMA context known (so a fork's prepare
// handler wants the state lock): `body` gets this thread's frames.
template <typename Body>
void InChildWithAContext(Body body) {
  InstallForkAtfork(nullptr);
  InChild([&] {
    GlobalState().AddContext(0x70, "rxe0");
    return body(ThisThreadForks());
  });
}

// A fork from the child of `fork()` with the frames as the test set them up: the return
// code says what the grandchild saw (0 = as expected).
int ForkAndWait(int (*in_grandchild)()) {
  pid_t p = fork();
  if (p < 0) return 100;
  if (p == 0) _exit(in_grandchild());
  int status = -1;
  if (waitpid(p, &status, 0) != p || !WIFEXITED(status)) return 101;
  return WEXITSTATUS(status);
}

TEST(ForkFramesTest, PushPopKeepsEveryFrameAboveTheDepthZero) {
  ThreadForkFrames& t = ThisThreadForks();
  ASSERT_EQ(t.depth, 0);
  ForkFrame f = Frame(ForkFrame::Stage::kDecided, true);
  f.hazard = true;
  f.explain_segv = true;
  ForkFrame* top = PushForkFrame(f);
  ASSERT_NE(top, nullptr);
  EXPECT_EQ(TopForkFrame(), top);
  EXPECT_EQ(t.depth, 1);
  EXPECT_TRUE(top->hazard && top->explain_segv && top->by_wrapper);
  top->took_state_lock = true;
  EXPECT_TRUE(HeldByOurAtfork());
  PopForkFrame();
  EXPECT_EQ(t.depth, 0);
  EXPECT_EQ(TopForkFrame(), nullptr);
  EXPECT_FALSE(HeldByOurAtfork());
  for (const ForkFrame& g : t.frames) EXPECT_TRUE(AllZero(g));
}

TEST(ForkFramesTest, FullStackRefusesAPush) {
  ThreadForkFrames& t = ThisThreadForks();
  for (int i = 0; i < ThreadForkFrames::kCapacity; ++i) {
    ASSERT_NE(PushForkFrame(Frame(ForkFrame::Stage::kInWindow, false)), nullptr);
  }
  EXPECT_EQ(PushForkFrame(Frame(ForkFrame::Stage::kInWindow, false)), nullptr);
  EXPECT_EQ(t.depth, ThreadForkFrames::kCapacity);
  while (t.depth > 0) PopForkFrame();
  for (const ForkFrame& g : t.frames) EXPECT_TRUE(AllZero(g));
}

// A fork nested in another fork's window (a frame below it) pushes its own frame, takes the
// lock only if it is not this thread's already, and leaves the outer frame as it was.
TEST(ForkFramesTest, NestedForkPushesAndPopsItsOwnFrame) {
  InChildWithAContext([](ThreadForkFrames& t) {
    ForkFrame* outer = PushForkFrame(Frame(ForkFrame::Stage::kInWindow, false));
    int rc = ForkAndWait([] {
      ThreadForkFrames& c = ThisThreadForks();
      // The child handler popped the fork's own frame; the outer one was copied as it was.
      return c.depth == 1 && c.overflow == 0 && !GlobalState().lock().HeldByAnyone() ? 0 : 1;
    });
    if (rc != 0) return 10 + rc;
    if (t.depth != 1 || TopForkFrame() != outer || !AllZero(t.frames[1])) return 2;
    if (GlobalState().lock().HeldByAnyone()) return 3;  // taken and released by the fork
    PopForkFrame();
    return 0;
  });
}

// A wrapper's frame (kDecided) is claimed by the fork's prepare handler, keeps its decision
// and is left for the wrapper to pop; the state lock taken for the fork is released.
TEST(ForkFramesTest, WrapperFrameIsClaimedNotPoppedByTheHandlers) {
  InChildWithAContext([](ThreadForkFrames& t) {
    ForkFrame f = Frame(ForkFrame::Stage::kDecided, true);
    f.hazard = true;
    ForkFrame* w = PushForkFrame(f);
    int rc = ForkAndWait([] {
      ForkFrame* c = TopForkFrame();
      return c != nullptr && ThisThreadForks().depth == 1 && c->hazard &&
                     c->stage == ForkFrame::Stage::kInWindow && !c->took_state_lock
                 ? 0
                 : 1;
    });
    if (rc != 0) return 10 + rc;
    if (t.depth != 1 || w->stage != ForkFrame::Stage::kInWindow || w->took_state_lock) return 2;
    if (GlobalState().lock().HeldByAnyone()) return 3;
    PopForkFrame();
    return 0;
  });
}

// Full: a fork beyond the capacity is counted, not framed, and takes no lock; the count is
// back to zero in the parent and in the child, and the frames are untouched.
TEST(ForkFramesTest, ForkWithTheStackFullIsCountedAndTakesNoLock) {
  InChildWithAContext([](ThreadForkFrames& t) {
    for (int i = 0; i < ThreadForkFrames::kCapacity; ++i) {
      PushForkFrame(Frame(ForkFrame::Stage::kInWindow, false));
    }
    int rc = ForkAndWait([] {
      ThreadForkFrames& c = ThisThreadForks();
      return c.depth == ThreadForkFrames::kCapacity && c.overflow == 0 ? 0 : 1;
    });
    if (rc != 0) return 10 + rc;
    if (t.depth != ThreadForkFrames::kCapacity || t.overflow != 0) return 2;
    for (const ForkFrame& g : t.frames) {
      if (g.took_state_lock) return 3;
    }
    if (GlobalState().lock().HeldByAnyone()) return 4;
    while (t.depth > 0) PopForkFrame();
    return 0;
  });
}

}  // namespace
}  // namespace forkguard
