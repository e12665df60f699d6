// The right order: the helper process is forked before any RDMA init.
#include <gtest/gtest.h>

#include "rdma_steps.h"

TEST(ForkBeforeRdmaInit, HelperForkedFirst) {
  ASSERT_NO_FATAL_FAILURE(consumer::ForkHelper());
  consumer::RdmaResources rdma;
  ASSERT_NO_FATAL_FAILURE(consumer::OpenAndRegister(&rdma));
  consumer::Release(&rdma);
}
