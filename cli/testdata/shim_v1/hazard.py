# A trainer in miniature: RDMA init and a registration through libibverbs (the
# stub on the host), then os.fork() - the hazard, with Python frames.
import ctypes, mmap, os
v = ctypes.CDLL("libibverbs.so.1")
v.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
v.ibv_open_device.restype = ctypes.c_void_p
v.ibv_open_device.argtypes = [ctypes.c_void_p]
v.ibv_alloc_pd.restype = ctypes.c_void_p
v.ibv_alloc_pd.argtypes = [ctypes.c_void_p]
v.ibv_reg_mr.restype = ctypes.c_void_p
v.ibv_reg_mr.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
def setup_transport():
    n = ctypes.c_int()
    devs = v.ibv_get_device_list(ctypes.byref(n))
    ctx = v.ibv_open_device(devs[0])
    pd = v.ibv_alloc_pd(ctx)
    buf = mmap.mmap(-1, 1 << 20)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    return v.ibv_reg_mr(pd, addr, 1 << 20, 1), buf
def make_loader():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
mr, buf = setup_transport()
make_loader()
