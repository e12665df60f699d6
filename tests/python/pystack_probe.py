# Driven by python_stack_test: prints the Python stack seen from C (shim/python_stack)
# with the GIL held (ctypes.PyDLL), with it released (ctypes.CDLL), and at os.fork().
import ctypes
import os
import sys

PROBE = sys.argv[1]


def show(tag, lib):
    lib.forkguard_probe_format.restype = ctypes.c_size_t
    lib.forkguard_probe_format.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    buf = ctypes.create_string_buffer(16384)
    lib.forkguard_probe_format(buf, len(buf))  # MARK:probe-call
    print(tag + "-BEGIN")
    print(buf.value.decode())
    print(tag + "-END")


def with_gil():
    show("WITH-GIL", ctypes.PyDLL(PROBE))  # MARK:with-gil


def without_gil():
    show("WITHOUT-GIL", ctypes.CDLL(PROBE))  # ctypes releases the GIL around the call


def fork_child():
    sys.stdout.flush()
    pid = os.fork()  # MARK:fork
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def main():
    with_gil()  # MARK:main-with-gil
    without_gil()
    fork_child()  # MARK:main-fork


main()  # MARK:module
