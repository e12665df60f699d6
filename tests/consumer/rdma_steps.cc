#include "rdma_steps.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace consumer {

void OpenAndRegister(RdmaResources* r) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_NE(list, nullptr) << "ibv_get_device_list: " << strerror(errno);
  ASSERT_GT(n, 0) << "no RDMA device";
  r->context = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  ASSERT_NE(r->context, nullptr) << "ibv_open_device: " << strerror(errno);
  r->pd = ibv_alloc_pd(r->context);
  ASSERT_NE(r->pd, nullptr) << "ibv_alloc_pd: " << strerror(errno);
  ASSERT_EQ(posix_memalign(&r->buffer, 4096, r->length), 0);
  r->mr = ibv_reg_mr(r->pd, r->buffer, r->length, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(r->mr, nullptr) << "ibv_reg_mr: " << strerror(errno);
}

void Release(RdmaResources* r) {
  if (r->mr) EXPECT_EQ(ibv_dereg_mr(r->mr), 0);
  if (r->pd) EXPECT_EQ(ibv_dealloc_pd(r->pd), 0);
  if (r->context) EXPECT_EQ(ibv_close_device(r->context), 0);
  free(r->buffer);
  *r = RdmaResources{};
}

void ForkHelper() {
  pid_t pid = fork();
  ASSERT_GE(pid, 0) << "fork: " << strerror(errno);
  if (pid == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid) << "waitpid: " << strerror(errno);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "helper status " << status;
}

}  // namespace consumer
