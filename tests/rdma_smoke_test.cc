// Foundation check of the real-device lane: open the device, register memory,
// and do an RDMA WRITE from one RC QP to another on the same port (loopback).
#include <infiniband/verbs.h>
#include <string.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/rc_qp.h"
#include "tests/support/rdma_device.h"

namespace {

struct Qp {
  ibv_qp* qp = nullptr;
};

void ToRts(ibv_qp* qp, uint32_t remote_qpn, const ibv_gid& gid, int gid_index) {
  const char* step = forkguard::test_support::ConnectRcQp(
      qp, remote_qpn, gid, gid_index, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
  ASSERT_EQ(step, nullptr) << step << ": " << strerror(errno);
}

TEST(RdmaSmoke, OpenRegisterWriteLoopback) {
  auto dev = forkguard::test_support::RequireRdmaDevice();
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_NE(list, nullptr) << strerror(errno);
  ibv_device* d = nullptr;
  for (int i = 0; i < n; ++i)
    if (dev.name == ibv_get_device_name(list[i])) d = list[i];
  ASSERT_NE(d, nullptr) << "device " << dev.name << " not in ibv_get_device_list";
  ibv_context* ctx = ibv_open_device(d);
  ibv_free_device_list(list);
  ASSERT_NE(ctx, nullptr) << strerror(errno);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ASSERT_NE(pd, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);

  std::vector<char> src(1 << 16), dst(1 << 16, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 3);
  ibv_mr* smr = ibv_reg_mr(pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr =
      ibv_reg_mr(pd, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(smr, nullptr) << strerror(errno);
  ASSERT_NE(dmr, nullptr) << strerror(errno);

  ibv_qp_init_attr qa{};
  qa.send_cq = cq;
  qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = 4;
  qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  ibv_qp* q1 = ibv_create_qp(pd, &qa);
  ibv_qp* q2 = ibv_create_qp(pd, &qa);
  ASSERT_NE(q1, nullptr) << strerror(errno);
  ASSERT_NE(q2, nullptr) << strerror(errno);
  ibv_gid gid;
  ASSERT_EQ(0, ibv_query_gid(ctx, 1, dev.gid_index, &gid));
  ASSERT_NO_FATAL_FAILURE(ToRts(q1, q2->qp_num, gid, dev.gid_index));
  ASSERT_NO_FATAL_FAILURE(ToRts(q2, q1->qp_num, gid, dev.gid_index));

  ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), static_cast<uint32_t>(src.size()),
              smr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 42;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(dst.data());
  wr.wr.rdma.rkey = dmr->rkey;
  ASSERT_EQ(0, ibv_post_send(q1, &wr, &bad));
  ibv_wc wc{};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int got = 0;
  while ((got = ibv_poll_cq(cq, 1, &wc)) == 0 && std::chrono::steady_clock::now() < deadline) {
  }
  ASSERT_EQ(got, 1) << "no completion within 20 s";
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, 42u);
  EXPECT_EQ(0, memcmp(src.data(), dst.data(), src.size()));

  EXPECT_EQ(0, ibv_destroy_qp(q1));
  EXPECT_EQ(0, ibv_destroy_qp(q2));
  EXPECT_EQ(0, ibv_dereg_mr(smr));
  EXPECT_EQ(0, ibv_dereg_mr(dmr));
  EXPECT_EQ(0, ibv_destroy_cq(cq));
  EXPECT_EQ(0, ibv_dealloc_pd(pd));
  EXPECT_EQ(0, ibv_close_device(ctx));
}

TEST(RdmaSmoke, DeviceCheckFailsWithoutDevice) {
  // The lane must never silently pass without a device: RequireRdmaDevice()
  // reads the same sysfs state the guest set up, so here it must find one.
  auto dev = forkguard::test_support::RequireRdmaDevice();
  EXPECT_FALSE(dev.name.empty());
}

}  // namespace
