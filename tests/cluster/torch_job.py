# One rank of the two-host torchrun job (tests/cluster/torchrun_test.sh): a gloo
# process group over TCP, RDMA opened with pyverbs, and DataLoader(num_workers=2).
#   TORCH_JOB=orders  right order first (persistent workers forked, then RDMA: silent),
#                     then the wrong order (a new DataLoader forks after RDMA: the
#                     hazard, 2 forks per rank); both epochs must complete.
#   TORCH_JOB=error   wrong order under FORKGUARD_MODE=error: the DataLoader's start
#                     must fail (fork() -> EPERM) on every rank.
# Prints "torch_job: rank R ... OK" and exits 0 only when this rank behaved so.
import os
import socket
import sys
import time

T0 = time.time()
import torch  # noqa: E402  (~30 s under TCG)
import torch.distributed as dist  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
import pyverbs.enums as e  # noqa: E402
T_IMPORT = time.time() - T0


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.tensor([i * i])


def open_rdma():
    ctx = Context(name=os.environ.get("RXE_DEV", "rxe0"))
    pd = PD(ctx)
    mr = MR(pd, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    return ctx, pd, mr


def say(msg, err=False):
    print(f"torch_job: rank {RANK} on {HOST}: {msg}", file=sys.stderr if err else sys.stdout, flush=True)


def total(batches):
    return int(sum(b.sum() for b in batches))


HOST = socket.gethostname()
RANK = int(os.environ["RANK"])


def main():
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    x = torch.tensor([float(RANK + 1)])
    dist.all_reduce(x)  # gloo over TCP, across both hosts
    ok = x.item() == world * (world + 1) / 2
    say(f"gloo all_reduce {x.item():g} over {world} ranks; import torch+pyverbs {T_IMPORT:.0f}s")
    job = os.environ["TORCH_JOB"]
    if job == "orders":
        # Right order: the workers exist before any RDMA init.
        right = torch.utils.data.DataLoader(Squares(), batch_size=2, num_workers=2, persistent_workers=True)
        it = iter(right)  # forks both workers now
        rdma = open_rdma()
        s = total(it)
        say(f"right order done: sum {s}", err=True)  # marker: nothing from forkguard before it
        ok = ok and s == 140
        # Wrong order: this DataLoader forks its workers after RDMA init.
        wrong = torch.utils.data.DataLoader(Squares(), batch_size=2, num_workers=2)
        s = total(wrong)
        say(f"wrong order done: sum {s}")
        ok = ok and s == 140
        del it, right
    else:
        rdma = open_rdma()
        wrong = torch.utils.data.DataLoader(Squares(), batch_size=2, num_workers=2)
        try:
            s = total(wrong)
            say(f"UNEXPECTED: the DataLoader started and summed {s}")
            ok = False
        except Exception as ex:  # what a user's trainer sees at its DataLoader line
            say(f"DataLoader start failed: {type(ex).__name__}: {ex}")
    dist.barrier()
    dist.destroy_process_group()
    del rdma
    say("OK" if ok else "FAILED")
    return 0 if ok else 1


sys.exit(main())
