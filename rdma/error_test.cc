// Host tests (no device needed) for the pieces of the transport that do not
// touch verbs: the creator-pid guard and address parsing.
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "rdma/error.h"
#include "rdma/transport.h"

namespace forkguard::rdma {
namespace {

TEST(CreatorPid, AllowsTheCreator) {
  CreatorPid c;
  EXPECT_TRUE(c.InCreator());
  EXPECT_NO_THROW(c.Check("queue pair"));
}

TEST(CreatorPid, RefusesAForkedChildWithAClearMessage) {
  CreatorPid c;
  int p[2];
  ASSERT_EQ(0, pipe(p));
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::string msg = "no error";
    try {
      c.Check("queue pair");
    } catch (const ForkedChildError& e) {
      msg = e.what();
    }
    msg += c.InCreator() ? "|in-creator" : "|not-creator";
    (void)!write(p[1], msg.data(), msg.size());
    _exit(0);
  }
  close(p[1]);
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int st;
  waitpid(child, &st, 0);
  EXPECT_EQ(msg, "queue pair created by pid " + std::to_string(getpid()) + ", used from pid " +
                     std::to_string(child) +
                     " (a forked child cannot use its parent's RDMA resources; create them in "
                     "the child, or fork before initializing RDMA)|not-creator");
}

TEST(ThrowCallError, NamesTheCallAndErrno) {
  try {
    ThrowCallError("ibv_reg_mr", ENOMEM, "4096 bytes");
    FAIL();
  } catch (const TransportError& e) {
    EXPECT_STREQ(e.what(), "ibv_reg_mr: Cannot allocate memory (errno 12); 4096 bytes");
  }
}

TEST(SplitHostPort, ParsesAndRejects) {
  EXPECT_EQ(SplitHostPort("10.11.12.1:7471"),
            std::make_pair(std::string("10.11.12.1"), std::string("7471")));
  EXPECT_THROW(SplitHostPort("10.11.12.1"), std::invalid_argument);
  EXPECT_THROW(SplitHostPort(":7471"), std::invalid_argument);
  EXPECT_THROW(SplitHostPort("10.11.12.1:"), std::invalid_argument);
}

}  // namespace
}  // namespace forkguard::rdma
