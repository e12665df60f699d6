# The right order: persistent DataLoader workers are forked before any RDMA init;
# later epochs reuse them, so no fork happens after RDMA init.
import torch

import rdma_common


def main():
    loader = torch.utils.data.DataLoader(
        rdma_common.Squares(), batch_size=2, num_workers=2, persistent_workers=True)
    print("sum", rdma_common.total(loader), flush=True)  # workers forked here
    rdma = rdma_common.open_rdma()
    print("sum", rdma_common.total(loader), flush=True)  # same workers, no fork
    del rdma


main()
