// rdma_holder: holds RDMA objects for `forkguard ps` tests. Opens $RXE_DEV, allocates a PD,
// registers 64 KiB, creates a CQ and an RC QP; and from a thread that then exits, allocates
// a second PD (an object whose creating thread is gone: no pid in the netlink dump).
// Prints "ready PID" and waits until its stdin closes.
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <thread>

int main() {
  const char* want = getenv("RXE_DEV");
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_device* dev = nullptr;
  for (int i = 0; i < n; ++i) {
    if (want == nullptr || strcmp(ibv_get_device_name(list[i]), want) == 0) dev = list[i];
  }
  if (dev == nullptr) {
    fprintf(stderr, "rdma_holder: error: no device %s\n", want ? want : "");
    return 2;
  }
  ibv_context* ctx = ibv_open_device(dev);
  ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
  void* buf = aligned_alloc(4096, 64 * 1024);
  ibv_mr* mr = pd ? ibv_reg_mr(pd, buf, 64 * 1024, IBV_ACCESS_LOCAL_WRITE) : nullptr;
  ibv_cq* cq = ctx ? ibv_create_cq(ctx, 16, nullptr, nullptr, 0) : nullptr;
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  ibv_qp* qp = cq ? ibv_create_qp(pd, &qa) : nullptr;
  ibv_pd* orphan = nullptr;
  std::thread([&] { orphan = ibv_alloc_pd(ctx); }).join();
  if (mr == nullptr || qp == nullptr || orphan == nullptr) {
    fprintf(stderr, "rdma_holder: error: RDMA setup failed\n");
    return 2;
  }
  printf("ready %d\n", static_cast<int>(getpid()));
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  return 0;
}
