# forkguard's query API from Python (the forkguard module over libforkguard_check.so), then
# a real fork, in one process: the tests compare what the check said with the shim's message
# for the fork that follows. argv[1]: the scenario
#   pd      open the device and allocate a PD
#   mr      the same and register 16 KiB (fork support from $RDMAV_FORK_SAFE)
#   closed  all of that, then released again
#   safe    mr, then two workers from forkguard.safe_mp_context()
# pyverbs on the real device; with FORKGUARD_TEST_VERBS=ctypes the same calls through ctypes
# on the host's stub libibverbs.
import ctypes
import os
import sys

import forkguard


class CtypesVerbs:
    def __init__(self):
        ctypes.CDLL("libibverbs.so.1", mode=ctypes.RTLD_GLOBAL)
        lib = ctypes.CDLL(None)
        vp = ctypes.c_void_p
        lib.ibv_get_device_list.restype = ctypes.POINTER(vp)
        lib.ibv_open_device.restype, lib.ibv_open_device.argtypes = vp, [vp]
        lib.ibv_close_device.argtypes = [vp]
        lib.ibv_alloc_pd.restype, lib.ibv_alloc_pd.argtypes = vp, [vp]
        lib.ibv_dealloc_pd.argtypes = [vp]
        lib.ibv_reg_mr.restype = vp
        lib.ibv_reg_mr.argtypes = [vp, vp, ctypes.c_size_t, ctypes.c_int]
        lib.ibv_dereg_mr.argtypes = [vp]
        self.lib = lib
        n = ctypes.c_int()
        self.ctx = lib.ibv_open_device(lib.ibv_get_device_list(ctypes.byref(n))[0])  # MARK:init-ctypes
        self.pd = lib.ibv_alloc_pd(self.ctx)
        self.mr = None
        self.buf = None

    def register(self):
        self.buf = ctypes.create_string_buffer(4 * 4096)
        self.mr = self.lib.ibv_reg_mr(self.pd, self.buf, 4 * 4096, 1)

    def close(self):
        if self.mr:
            self.lib.ibv_dereg_mr(self.mr)
        self.lib.ibv_dealloc_pd(self.pd)
        self.lib.ibv_close_device(self.ctx)


class Pyverbs:
    def __init__(self):
        from pyverbs.device import Context
        from pyverbs.pd import PD

        self.ctx = Context(name=os.environ.get("RXE_DEV", "rxe0"))  # MARK:init-pyverbs
        self.pd = PD(self.ctx)
        self.mr = None

    def register(self):
        from pyverbs.mr import MR
        import pyverbs.enums as e

        self.mr = MR(self.pd, 4 * 4096, e.IBV_ACCESS_LOCAL_WRITE)

    def close(self):
        if self.mr:
            self.mr.close()
        self.pd.close()
        self.ctx.close()


def c_api():
    """forkguard_fork_check() called straight from the library, past the module's dict:
    "VERDICT (shim|proc) hazard=N"."""
    r = forkguard._Result()
    r.size = ctypes.sizeof(r)
    if forkguard._library().forkguard_fork_check(ctypes.byref(r)) != 0:
        return "failed: errno %d" % ctypes.get_errno()
    source = {forkguard.SOURCE_SHIM: "shim", forkguard.SOURCE_PROC: "proc"}.get(r.source, "?")
    return "%s (%s) hazard=%d" % (r.verdict.decode(), source, r.hazard)


def square(x):
    return x * x


def main():
    scenario = sys.argv[1]
    verbs = CtypesVerbs() if os.environ.get("FORKGUARD_TEST_VERBS") == "ctypes" else Pyverbs()
    if scenario in ("mr", "closed", "safe"):
        verbs.register()
    if scenario == "closed":
        verbs.close()

    facts = forkguard.state()  # MARK:check
    proc = forkguard.state(source="proc")
    print("check: %s (%s)" % (facts["verdict"], facts["source"]))
    print("c_api: %s" % c_api())
    print("proc: %s (%s)" % (proc["verdict"], proc["source"]))
    print("init_site: %s" % facts["init_site"])
    print("fork_site: %s" % facts["fork_site"])
    print("ranges: %d dontfork %d" % (len(facts["ranges"]),
                                       sum(r["dontfork"] for r in facts["ranges"])))
    print("proc detail: %s" % proc["detail"])
    try:
        forkguard.check()
        print("raises: no")
    except forkguard.ForkAfterRdmaError as e:
        print("raises: ForkAfterRdmaError: %s" % str(e).splitlines()[0])
    sys.stdout.flush()

    if scenario == "safe":
        ctx = forkguard.safe_mp_context()
        print("context: %s" % ctx.get_start_method())
        with ctx.Pool(2) as pool:
            print("squares: %s" % pool.map(square, [1, 2, 3]))
        return
    pid = os.fork()  # MARK:fork
    if pid == 0:
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("child: %d" % os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
