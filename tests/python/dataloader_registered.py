# A torch DataLoader (2 workers, forked when the epoch starts) over a dataset whose bytes are
# registered for RDMA by pyverbs first (run with RDMAV_FORK_SAFE=1: rdma-core marks the
# registered pages MADV_DONTFORK): the first and last samples share a page with the MR, the
# others are in it. Every batch is compared with what the parent holds. Prints one line per
# batch ("batch K: right" / "batch K: WRONG"), "loader failed: ..." when the DataLoader
# raised, then "batches N: right R, wrong W, missing M". Exit status 0 when it got that far.
import torch

import rdma_common

SAMPLES = 16
SAMPLE_BYTES = 1024
BATCH = 2


class RegisteredSamples:  # map-style: sample i is bytes [i * SAMPLE_BYTES, ...) of `data`
    def __init__(self, data, start):
        self.data = data
        self.start = start

    def __len__(self):
        return SAMPLES

    def __getitem__(self, i):
        at = self.start + i * SAMPLE_BYTES
        return torch.tensor(list(self.data[at:at + SAMPLE_BYTES]), dtype=torch.uint8)  # MARK:read


def main():
    start = rdma_common.PAGE
    data = bytearray(rdma_common.pattern(SAMPLES * SAMPLE_BYTES + 2 * rdma_common.PAGE, 2))
    ctx, pd, _ = rdma_common.open_rdma()
    # The MR leaves 100 bytes of the first and the last sample out: they share its pages.
    mr, _, _ = rdma_common.register_inside(pd, data, start + 100, SAMPLES * SAMPLE_BYTES - 200)
    dataset = RegisteredSamples(data, start)
    want = [torch.stack([dataset[i] for i in range(b, b + BATCH)])
            for b in range(0, SAMPLES, BATCH)]
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=2)
    got = []
    try:
        for batch in loader:  # MARK:iterate
            got.append(batch)
    except RuntimeError as err:
        print("loader failed:", str(err).splitlines()[0], flush=True)
    right = 0
    for k, batch in enumerate(got):
        ok = k < len(want) and torch.equal(batch, want[k])
        right += ok
        print("batch %d: %s" % (k, "right" if ok else "WRONG"), flush=True)
    print("batches %d: right %d, wrong %d, missing %d" %
          (len(want), right, len(got) - right, max(0, len(want) - len(got))), flush=True)
    del mr, pd, ctx


main()
