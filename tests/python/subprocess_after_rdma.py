# subprocess.run after RDMA init: the child execs at once (CPython uses vfork or
# fork+exec), which is not a hazard.
import subprocess

import rdma_common


def main():
    rdma = rdma_common.open_rdma()
    done = subprocess.run(["true"])
    print("true exited", done.returncode, flush=True)
    del rdma


main()
