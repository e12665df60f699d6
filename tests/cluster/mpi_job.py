# One rank of the two-host Open MPI job (tests/cluster/mpi_test.sh): mpi4py over
# Open MPI's cm PML / ofi MTL (libfabric verbs;ofi_rxm on rxe0), a ring exchange
# of 1 MiB, then a fork after MPI_Init (the hazard: the rank holds RDMA
# resources). Prints "mpi_job: rank R of N on HOST: ... OK".
import os
import socket
import sys

from mpi4py import MPI  # MPI_Init: libfabric opens rxe0 and registers memory

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
host = socket.gethostname()
n = 1 << 20
out = bytearray((rank + 1) % 256 for _ in range(256)) * (n // 256)
got = bytearray(n)
comm.Sendrecv(out, dest=(rank + 1) % size, recvbuf=got, source=(rank - 1) % size)
ok = got[:1] == bytes([rank % size if rank else size % 256]) and got[-1] == got[0]

pid = os.fork()  # MARK:fork-after-init
if pid == 0:
    os._exit(0)  # touches nothing of the parent's
_, status = os.waitpid(pid, 0)
ok = ok and status == 0
comm.Barrier()
total = comm.allreduce(1 if ok else 0)
print(f"mpi_job: rank {rank} of {size} on {host}: ring sendrecv of 1 MiB "
      f"{'OK' if ok else 'BAD'}, forked child {pid} after MPI_Init; {total}/{size} ranks OK", flush=True)
sys.exit(0 if total == size else 1)
