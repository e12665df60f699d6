// The bug forkguard's gate catches: a helper process forked after RDMA init.
#include <gtest/gtest.h>

#include "rdma_steps.h"

TEST(ForkAfterRdmaInit, HelperForkedAfterRegistration) {
  consumer::RdmaResources rdma;
  ASSERT_NO_FATAL_FAILURE(consumer::OpenAndRegister(&rdma));
  consumer::ForkHelper();
  consumer::Release(&rdma);
}
