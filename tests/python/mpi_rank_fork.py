# One rank of an mpi4py job: MPI is initialized at import (Open MPI over rxe0 with
# libfabric verbs opens the device), then the rank forks a helper with os.fork().
import os
import sys

from mpi4py import MPI  # MARK:mpi-import


def rank_fork_site():
    sys.stdout.flush()
    pid = os.fork()  # MARK:rank-fork
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def main():
    comm = MPI.COMM_WORLD
    total = comm.allreduce(comm.Get_rank() + 1)  # MARK:allreduce
    rank_fork_site()  # MARK:main-fork
    comm.Barrier()
    print("rank", comm.Get_rank(), "of", comm.Get_size(), "sum", total, flush=True)


main()
