"""forkguard: ask, before forking, whether a fork now would be a hazard for this process.

    import forkguard
    forkguard.check()                # raises ForkAfterRdmaError when a fork now is a hazard
    facts = forkguard.state()        # the verdict, the counts, the sites, the ranges
    ctx = forkguard.safe_mp_context()  # "fork" when that is safe now, else a clean forkserver

A thin ctypes layer over libforkguard_check.so (api/forkguard.h). Under the shim
(LD_PRELOAD=libforkguard.so, or `forkguard run`) the answer is the shim's own: the decision
it makes at fork(), with where RDMA was first initialized and where this check was called.
Without it the library answers from /proc and RDMA netlink, with less detail, and says so
(state()["source"] == "proc", state()["detail"]).

The library is found at $FORKGUARD_CHECK_LIB, else where scripts/install PREFIX puts it beside
this module (PREFIX/lib/libforkguard_check.so), else where the forkguard package installs it
(/usr/lib/<multiarch>/forkguard/libforkguard_check.so), else by the dynamic linker.
"""

import ctypes
import multiprocessing
import os
import sysconfig

__all__ = ["ForkAfterRdmaError", "check", "state", "safe_mp_context", "library_path"]

MAX_RANGES = 16
SOURCE_SHIM = 1
SOURCE_PROC = 2
_REASONS = ((0x1, "child-segv"), (0x2, "parent-corruption"), (0x4, "inherited-rdma"))


class _Range(ctypes.Structure):
    _fields_ = [
        ("start", ctypes.c_uint64),
        ("length", ctypes.c_uint64),
        ("dontfork", ctypes.c_int),
        ("corruptible", ctypes.c_int),
        ("call", ctypes.c_char * 32),
        ("site", ctypes.c_char * 256),
    ]


class _Result(ctypes.Structure):
    # Field for field struct forkguard_check_result (api/forkguard.h).
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("source", ctypes.c_int),
        ("hazard", ctypes.c_int),
        ("enforceable", ctypes.c_int),
        ("reasons", ctypes.c_uint),
        ("verdict", ctypes.c_char * 96),
        ("contexts", ctypes.c_int),
        ("pds", ctypes.c_int),
        ("mrs", ctypes.c_int),
        ("qps", ctypes.c_int),
        ("cm_ids", ctypes.c_int),
        ("cm_channels", ctypes.c_int),
        ("uverbs_fds", ctypes.c_int),
        ("rdma_cm_fds", ctypes.c_int),
        ("dc_vmas", ctypes.c_int),
        ("dontfork_mrs", ctypes.c_int),
        ("corruptible_mrs", ctypes.c_int),
        ("unattributed_dc", ctypes.c_int),
        ("orphan_objects", ctypes.c_int),
        ("vm_pin_kb", ctypes.c_long),
        ("kernel_cof", ctypes.c_int),
        ("kernel_cof_source", ctypes.c_char * 16),
        ("init_site", ctypes.c_char * 512),
        ("fork_site", ctypes.c_char * 512),
        ("range_count", ctypes.c_int),
        ("range_total", ctypes.c_int),
        ("ranges", _Range * MAX_RANGES),
        ("detail", ctypes.c_char * 256),
        ("message", ctypes.c_char * 16384),
    ]


class ForkAfterRdmaError(RuntimeError):
    """A fork now would be a hazard: RDMA is initialized in this process.

    str() is the shim's message (or the fallback's summary); .state has the facts."""

    def __init__(self, message, facts):
        super().__init__(message)
        self.state = facts


_lib = None


def library_path():
    """Where libforkguard_check.so is loaded from (a name for the dynamic linker last)."""
    env = os.environ.get("FORKGUARD_CHECK_LIB")
    if env:
        return env
    # scripts/install PREFIX: this file is PREFIX/lib/python3/dist-packages/forkguard/__init__.py
    # and the library PREFIX/lib/libforkguard_check.so.
    lib = os.path.dirname(os.path.abspath(__file__))
    for _ in range(3):
        lib = os.path.dirname(lib)
    beside = os.path.join(lib, "libforkguard_check.so")
    if os.path.basename(lib) == "lib" and os.path.exists(beside):
        return beside
    multiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
    installed = "/usr/lib/%s/forkguard/libforkguard_check.so" % multiarch
    if os.path.exists(installed):
        return installed
    return "libforkguard_check.so.1"


def _library():
    global _lib
    if _lib is None:
        # PyDLL keeps the GIL across the call: the shim reads this thread's Python stack
        # for the check's call site, as it does at os.fork().
        lib = ctypes.PyDLL(library_path(), use_errno=True)
        for name in ("forkguard_fork_check", "forkguard_fork_check_proc"):
            fn = getattr(lib, name)
            fn.argtypes = [ctypes.POINTER(_Result)]
            fn.restype = ctypes.c_int
        _lib = lib
    return _lib


def _text(raw):
    return raw.decode("utf-8", "replace")


def _count(v):
    return None if v < 0 else v


def state(source="auto"):
    """The facts of a fork from here, now, as a dict.

    source: "auto" (the shim's answer when it is loaded, else /proc) or "proc" (the /proc and
    RDMA netlink answer even under the shim). Keys: source ("shim"/"proc"), hazard,
    enforceable, verdict ("clean" or "hazard (child-segv, ...)"), reasons (names), counts
    (None when unknown), vm_pin_kb, kernel_copy_on_fork (True/False/None), init_site,
    fork_site, ranges, detail, message."""
    if source not in ("auto", "proc"):
        raise ValueError("source must be 'auto' or 'proc', not %r" % (source,))
    lib = _library()
    r = _Result()
    r.size = ctypes.sizeof(_Result)
    fn = lib.forkguard_fork_check if source == "auto" else lib.forkguard_fork_check_proc
    if fn(ctypes.byref(r)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "forkguard_fork_check failed: %s" % os.strerror(err))
    counts = {}
    for key in ("contexts", "pds", "mrs", "qps", "cm_ids", "cm_channels", "uverbs_fds",
                "rdma_cm_fds", "dc_vmas", "dontfork_mrs", "corruptible_mrs",
                "unattributed_dc", "orphan_objects"):
        counts[key] = _count(getattr(r, key))
    ranges = []
    for i in range(r.range_count):
        g = r.ranges[i]
        ranges.append({"start": g.start, "length": g.length, "dontfork": bool(g.dontfork),
                       "corruptible": bool(g.corruptible), "call": _text(g.call),
                       "site": _text(g.site)})
    cof = {1: True, 0: False}.get(r.kernel_cof)
    return {
        "source": "shim" if r.source == SOURCE_SHIM else "proc",
        "hazard": bool(r.hazard),
        "enforceable": bool(r.enforceable),
        "verdict": _text(r.verdict),
        "reasons": [name for bit, name in _REASONS if r.reasons & bit],
        "counts": counts,
        "vm_pin_kb": None if r.vm_pin_kb < 0 else r.vm_pin_kb,
        "kernel_copy_on_fork": cof,
        "kernel_copy_on_fork_source": _text(r.kernel_cof_source),
        "init_site": _text(r.init_site),
        "fork_site": _text(r.fork_site),
        "ranges": ranges,
        "range_total": r.range_total,
        "detail": _text(r.detail),
        "message": _text(r.message),
    }


def _message(facts):
    text = facts["message"].rstrip("\n")
    if text:
        return text
    return "forkguard: a fork now would be a hazard: verdict: %s" % facts["verdict"]


def check():
    """Raises ForkAfterRdmaError when a fork from here, now, would be a hazard; else
    returns the facts (state())."""
    facts = state()
    if facts["hazard"]:
        raise ForkAfterRdmaError(_message(facts), facts)
    return facts


def _rdma_descriptors(pid):
    """Descriptors on /dev/infiniband (uverbs*, rdma_cm) open in process `pid`."""
    n = 0
    fd_dir = "/proc/%d/fd" % pid
    for name in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, name))
        except OSError:
            continue
        if target.startswith("/dev/infiniband/"):
            n += 1
    return n


def safe_mp_context():
    """A multiprocessing context whose workers start with no RDMA hazard.

    "fork" when a fork from here is clean now. Otherwise "forkserver": its server is a
    fresh interpreter started with exec (multiprocessing's spawnv_passfds), so what this
    process holds is not in it; the server is started here and checked to hold no RDMA
    descriptor (a preloaded module that initializes RDMA would defeat it), else
    ForkAfterRdmaError."""
    facts = state()
    if not facts["hazard"]:
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver")
    from multiprocessing import forkserver

    forkserver.ensure_running()
    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if pid:
        try:
            held = _rdma_descriptors(pid)
        except OSError:
            held = 0  # not readable: nothing more to tell
        if held:
            raise ForkAfterRdmaError(
                "forkguard: the forkserver (pid %d) holds %d RDMA descriptor(s): a module it "
                "preloads initializes RDMA; its workers would inherit them" % (pid, held),
                facts)
    return ctx
