# A light Slurm task (tests/cluster/slurm_*_test.sh): opens rxe0 with pyverbs, registers
# 1 MiB, then forks a child that exits at once (a fork after RDMA init: the hazard), and
# prints "fork_job: rank R on HOST: forked after RDMA init OK" (or the fork's error) with
# the rank Slurm gave the task. No torch: a second or two per task under TCG.
import os
import socket
import sys

from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
import pyverbs.enums as e

rank = os.environ.get("SLURM_PROCID", "?")
host = socket.gethostname()
ctx = Context(name=os.environ.get("RXE_DEV", "rxe0"))
pd = PD(ctx)
mr = MR(pd, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE)
try:
    pid = os.fork()  # MARK:fork-after-init
except OSError as ex:
    print(f"fork_job: rank {rank} on {host}: fork failed: {ex}", flush=True)
    sys.exit(3)
if pid == 0:
    os._exit(0)
_, status = os.waitpid(pid, 0)
print(f"fork_job: rank {rank} on {host}: forked after RDMA init {'OK' if status == 0 else 'BAD'}", flush=True)
sys.exit(0 if status == 0 else 1)
