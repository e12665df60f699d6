# forkguard.torch.patch() on a real DataLoader after RDMA init (pyverbs): in "error" mode the
# iterator's start raises ForkAfterRdmaError naming where RDMA was initialized, before any
# worker is forked; in "switch" mode the same loader gets forkguard.safe_mp_context() and the
# epoch completes. Prints "error: ..." and "switch: sum N (context ...)".
import torch

import forkguard
import forkguard.torch
import rdma_common


def main():
    rdma = rdma_common.open_rdma()
    loader = torch.utils.data.DataLoader(rdma_common.Squares(), batch_size=2, num_workers=2)

    forkguard.torch.patch(mode="error")
    try:
        rdma_common.total(loader)  # MARK:error-iterate
        print("error: not raised", flush=True)
    except forkguard.ForkAfterRdmaError as e:
        text = str(e)
        print("error: raised", flush=True)
        print("error-first: " + text.splitlines()[0], flush=True)
        print("error-init: " + e.state["init_site"], flush=True)
        print("error-text-has-init: %s" % ("RDMA first initialized" in text or
                                           "no shim" in text), flush=True)

    forkguard.torch.patch(mode="switch")
    total = rdma_common.total(loader)
    print("switch: sum %d (context %s)" % (total, loader.multiprocessing_context.get_start_method()),
          flush=True)
    del rdma


if __name__ == "__main__":
    main()
