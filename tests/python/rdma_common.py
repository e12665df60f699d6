# Shared by the real-device Python programs: RDMA init with pyverbs and a tiny dataset.
import os

from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
import pyverbs.enums as e


class Squares:  # map-style: torch only here (minutes to import under TCG; pyverbs-only users skip it)
    def __len__(self):
        return 8

    def __getitem__(self, i):
        import torch
        return torch.tensor([i * i])


def open_rdma():
    """Opens $RXE_DEV, allocates a PD and registers 16 KiB; returns the objects."""
    ctx = Context(name=os.environ.get("RXE_DEV", "rxe0"))  # MARK:open-device
    pd = PD(ctx)
    mr = MR(pd, 4 * 4096, e.IBV_ACCESS_LOCAL_WRITE)
    return ctx, pd, mr


def total(loader):
    return int(sum(batch.sum() for batch in loader))  # MARK:iterate


PAGE = 4096


def pattern(n, seed):
    """n bytes of a pattern that differs per seed (what the readers check)."""
    return bytes((i * 7 + seed * 31 + 3) & 0xFF for i in range(n))


def register_inside(pd, data, offset, length):
    """Registers bytes [offset, offset + length) of bytearray `data` (heap memory, its pages
    shared with the bytes around them) and returns (mr, first page offset, end page offset):
    the bytes of `data` that share a page with the MR."""
    import ctypes
    base = ctypes.addressof((ctypes.c_char * len(data)).from_buffer(data))
    mr = MR(pd, length, e.IBV_ACCESS_LOCAL_WRITE, address=base + offset)  # MARK:register-inside
    lo = max(0, (base + offset) // PAGE * PAGE - base)
    hi = min(len(data), -(-(base + offset + length) // PAGE) * PAGE - base)
    return mr, lo, hi
