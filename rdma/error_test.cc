// Host tests (no device needed) for the pieces of the transport that do not
// touch verbs: the creator-pid guard and address parsing.
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "rdma/error.h"
#include "rdma/transport.h"
#include "tests/support/forked_child.h"

namespace forkguard::rdma {
namespace {

TEST(CreatorPid, AllowsTheCreator) {
  CreatorPid c;
  EXPECT_TRUE(c.InCreator());
  EXPECT_NO_THROW(c.Check("queue pair"));
}

TEST(CreatorPid, RefusesAForkedChildWithAClearMessage) {
  CreatorPid c;
  test_support::ForkedChild child = test_support::RunInForkedChild([&] {
    std::string msg = "no error";
    try {
      c.Check("queue pair");
    } catch (const ForkedChildError& e) {
      msg = e.what();
    }
    return msg + (c.InCreator() ? "|in-creator" : "|not-creator");
  });
  ASSERT_GT(child.pid, 0);
  EXPECT_EQ(child.text,
            "queue pair created by pid " + std::to_string(getpid()) + ", used from pid " +
                std::to_string(child.pid) +
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
