# pyverbs opens the device and registers memory, then multiprocessing forks a
# worker (the default "fork" start method on Linux): the hazard, in plain Python.
import multiprocessing

import rdma_common


def work(q):
    q.put(sum(i * i for i in range(8)))


def start_worker(q):
    p = multiprocessing.Process(target=work, args=(q,))
    p.start()  # MARK:worker-start
    return p


def main():
    rdma = rdma_common.open_rdma()  # MARK:main-open
    q = multiprocessing.Queue()
    p = start_worker(q)  # MARK:main-start
    print("sum", q.get(), flush=True)
    p.join()
    del rdma


if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    main()
