# forkguard.torch.patch() on a real multi-worker DataLoader after RDMA init (pyverbs), in one
# process (torch is imported once: under TCG that is most of the run):
#   error   the iterator's start raises ForkAfterRdmaError before any worker exists;
#   switch  the same loader gets forkguard.safe_mp_context() (a forkserver) and one batch
#           comes back from its two workers.
# Prints "error: ...", "error-first: ...", "error-init: ...", "switch: ...". torch is
# imported at the top so that the forkserver (which imports this file as __mp_main__) has it
# before it forks the workers; RDMA is opened only under __main__.
import sys
import time

T0 = time.monotonic()
import torch  # noqa: E402

import forkguard  # noqa: E402
import forkguard.torch  # noqa: E402


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return i * i


def elapsed():
    return "%.1fs" % (time.monotonic() - T0)


def main():
    print("import-torch: %s" % elapsed(), flush=True)
    import rdma_common

    rdma = rdma_common.open_rdma()
    loader = torch.utils.data.DataLoader(Squares(), batch_size=2, num_workers=2)

    forkguard.torch.patch(mode="error")
    try:
        next(iter(loader))  # MARK:error-iterate
        print("error: not raised", flush=True)
    except forkguard.ForkAfterRdmaError as e:
        text = str(e)
        print("error: raised", flush=True)
        print("error-first: " + text.splitlines()[0], flush=True)
        print("error-init: " + e.state["init_site"], flush=True)
        print("error-source: " + e.state["source"], flush=True)
        print("error-at-start: %s" % ("at DataLoader start (2 workers)" in text), flush=True)
    print("context-after-error: %s" % loader.multiprocessing_context, flush=True)

    forkguard.torch.patch(mode="switch")
    batch = next(iter(loader))  # MARK:switch-iterate
    print("switch: %s (context %s)" % (batch.tolist(),
                                       loader.multiprocessing_context.get_start_method()),
          flush=True)
    print("total: %s" % elapsed(), flush=True)
    del rdma


if __name__ == "__main__":
    sys.exit(main())
