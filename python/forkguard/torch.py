"""forkguard for PyTorch: check when a multi-worker DataLoader iterator starts.

    import forkguard.torch
    forkguard.torch.patch()              # mode from $FORKGUARD_TORCH, default "error"
                                         # ("off" under FORKGUARD_MODE=fix)
    forkguard.torch.patch(mode="switch")

A DataLoader with num_workers > 0 forks its workers when its iterator starts (with the
default "fork" start method). patch() wraps that start: when a fork now would be a hazard
(forkguard.state()), mode
  "error":  raises forkguard.ForkAfterRdmaError with the shim's message (where RDMA was
            first initialized), before any worker exists;
  "switch": gives the loader forkguard.safe_mp_context() (a clean forkserver) and goes on
            (the dataset must then be picklable, as for any non-fork start method);
  "warn":   prints the message on stderr once and lets the fork happen;
  "off":    nothing.
Loaders that already use a non-fork context are left alone. Under FORKGUARD_MODE=fix the
shim makes each such fork safe itself (the workers get copies of registered memory the kernel
copies, and never see memory it would corrupt), so without FORKGUARD_TORCH the check is off.
"""

import os
import sys

import forkguard

MODES = ("error", "switch", "warn", "off")
_state = {"mode": None, "original": None, "warned": False}


def _default_mode():
    fix = os.environ.get("FORKGUARD_MODE", "").strip().lower() == "fix"
    return "off" if fix else "error"


def _mode_from_env():
    default = _default_mode()
    value = os.environ.get("FORKGUARD_TORCH", default).strip().lower() or default
    if value not in MODES:
        raise ValueError("FORKGUARD_TORCH=%s: expected one of %s" % (value, ", ".join(MODES)))
    return value


def _forks(loader):
    ctx = loader.multiprocessing_context
    if ctx is None:
        import multiprocessing

        return multiprocessing.get_start_method(allow_none=False) == "fork"
    return ctx.get_start_method() == "fork"


def _before_workers(loader):
    mode = _state["mode"]
    if mode == "off" or loader.num_workers == 0 or not _forks(loader):
        return
    facts = forkguard.state()
    if not facts["hazard"]:
        return
    message = forkguard._message(facts)
    if mode == "error":
        raise forkguard.ForkAfterRdmaError(
            message + "\n  at DataLoader start (%d workers): fix: create the DataLoader's "
            "workers before RDMA init (persistent_workers=True), or "
            "FORKGUARD_TORCH=switch" % loader.num_workers, facts)
    if mode == "switch":
        loader.multiprocessing_context = forkguard.safe_mp_context()
        return
    if not _state["warned"]:
        _state["warned"] = True
        sys.stderr.write(message + "\n")


def patch(mode=None):
    """Installs the check (idempotent; a second call changes the mode)."""
    if mode is None:
        mode = _mode_from_env()
    if mode not in MODES:
        raise ValueError("mode must be one of %s, not %r" % (", ".join(MODES), mode))
    _state["mode"] = mode
    if _state["original"] is not None:
        return
    from torch.utils.data import dataloader

    original = dataloader._MultiProcessingDataLoaderIter.__init__

    def __init__(self, loader, *args, **kwargs):
        _before_workers(loader)
        original(self, loader, *args, **kwargs)

    _state["original"] = original
    dataloader._MultiProcessingDataLoaderIter.__init__ = __init__


def unpatch():
    if _state["original"] is None:
        return
    from torch.utils.data import dataloader

    dataloader._MultiProcessingDataLoaderIter.__init__ = _state["original"]
    _state["original"] = None
