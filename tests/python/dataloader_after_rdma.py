# The bug forkguard exists for: RDMA initialized (pyverbs), then a DataLoader with
# worker processes forks them. Prints "sum N" when the epoch completes.
import torch

import rdma_common


def main():
    rdma = rdma_common.open_rdma()  # MARK:main-open
    loader = torch.utils.data.DataLoader(rdma_common.Squares(), batch_size=2, num_workers=2)
    print("sum", rdma_common.total(loader), flush=True)  # MARK:main-iterate
    del rdma


main()
