# pyverbs registers part of a heap buffer (run with RDMAV_FORK_SAFE=1: rdma-core marks the
# registered pages MADV_DONTFORK), then multiprocessing (the "fork" start method) forks
# workers that read the bytes sharing those pages outside the MR and send back a checksum.
# Prints one line per worker ("worker K: checksum right" / "checksum WRONG" / "died
# (signal N)" / "died (exit N)"), then "workers N: alive A, died D, checksums right R" and
# "parent data intact" (or "parent data CHANGED"). Exit status 0 when it got that far.
import multiprocessing
import zlib

import rdma_common

WORKERS = 4


def neighbors(data, offset, length, lo, hi):
    """The bytes of `data` in the MR's pages, outside the MR."""
    return bytes(data[lo:offset]) + bytes(data[offset + length:hi])


def work(conn, data, offset, length, lo, hi):
    conn.send(zlib.crc32(neighbors(data, offset, length, lo, hi)))  # MARK:worker-read


def main():
    data = bytearray(rdma_common.pattern(16 * rdma_common.PAGE, 1))  # below mmap's threshold
    offset, length = 6 * rdma_common.PAGE + 100, 3 * rdma_common.PAGE
    ctx, pd, _ = rdma_common.open_rdma()
    mr, lo, hi = rdma_common.register_inside(pd, data, offset, length)
    want = zlib.crc32(neighbors(data, offset, length, lo, hi))
    whole = zlib.crc32(data)
    print("registered %d bytes; %d heap bytes share its pages" % (length, hi - lo - length),
          flush=True)
    workers = []
    for _ in range(WORKERS):
        rd, wr = multiprocessing.Pipe(duplex=False)
        p = multiprocessing.Process(target=work, args=(wr, data, offset, length, lo, hi))
        p.start()  # MARK:worker-start
        wr.close()
        workers.append((p, rd))
    alive = right = 0
    for k, (p, rd) in enumerate(workers):
        p.join(120)
        if p.exitcode is None:
            p.kill()
            p.join()
        if p.exitcode != 0:
            how = "signal %d" % -p.exitcode if p.exitcode < 0 else "exit %d" % p.exitcode
            print("worker %d: died (%s)" % (k, how), flush=True)
            continue
        alive += 1
        ok = rd.poll(5) and rd.recv() == want
        right += ok
        print("worker %d: checksum %s" % (k, "right" if ok else "WRONG"), flush=True)
    print("workers %d: alive %d, died %d, checksums right %d" % (WORKERS, alive, WORKERS - alive,
                                                                 right), flush=True)
    print("parent data", "intact" if zlib.crc32(data) == whole else "CHANGED", flush=True)
    del mr, pd, ctx


if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    main()
