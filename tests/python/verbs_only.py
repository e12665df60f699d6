# RDMA init for fork_kinds.py without torch (a torch import costs ~20 s in the TCG guest):
# pyverbs on the real device; with FORKGUARD_TEST_VERBS=ctypes, the same calls through
# ctypes on whatever libibverbs.so.1 is found (the host tests' stub, which pyverbs cannot
# load). ctypes looks the functions up in the global scope, so LD_PRELOAD's wrappers see them.
import ctypes
import os


def _open_rdma_ctypes():
    ctypes.CDLL("libibverbs.so.1", mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(None)
    vp = ctypes.c_void_p
    lib.ibv_get_device_list.restype = ctypes.POINTER(vp)
    lib.ibv_open_device.restype, lib.ibv_open_device.argtypes = vp, [vp]
    lib.ibv_alloc_pd.restype, lib.ibv_alloc_pd.argtypes = vp, [vp]
    lib.ibv_reg_mr.restype = vp
    lib.ibv_reg_mr.argtypes = [vp, vp, ctypes.c_size_t, ctypes.c_int]
    n = ctypes.c_int()
    devices = lib.ibv_get_device_list(ctypes.byref(n))
    ctx = lib.ibv_open_device(devices[0])  # MARK:verbs-open
    pd = lib.ibv_alloc_pd(ctx)
    buf = ctypes.create_string_buffer(4 * 4096)
    mr = lib.ibv_reg_mr(pd, buf, 4 * 4096, 1)
    if not ctx or not pd or not mr:
        raise OSError("ibv_open_device/ibv_alloc_pd/ibv_reg_mr failed")
    return ctx, pd, mr, buf


def open_rdma():
    """Opens $RXE_DEV, allocates a PD and registers 16 KiB; returns the objects."""
    if os.environ.get("FORKGUARD_TEST_VERBS") == "ctypes":
        return _open_rdma_ctypes()
    from pyverbs.device import Context
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    import pyverbs.enums as e

    ctx = Context(name=os.environ.get("RXE_DEV", "rxe0"))  # MARK:verbs-open
    pd = PD(ctx)
    mr = MR(pd, 4 * 4096, e.IBV_ACCESS_LOCAL_WRITE)
    return ctx, pd, mr
