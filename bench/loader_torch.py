#!/usr/bin/python3
"""The PyTorch side of `scripts/bench loader`: a DataLoader over the same
TFRecord shards refloader reads, written the way a competent PyTorch user would.

- Dataset indexes the records once (length headers, length CRC checked) and
  mmaps the shards lazily in each worker (no copy of the file, nothing pickled
  but the index).
- Per-sample work is the same as refloader's VerifyAndDecodeTransform: check
  the data's masked CRC32C (the `crc32c` C extension, Debian's python3-crc32c),
  then decode into a fixed-size uint8 tensor (copy, truncate or zero-pad).
- DataLoader: num_workers=N, persistent_workers=True, pin_memory=False, the
  same batch size, prefetch_factor=2 (refloader's prefetch per worker), default
  collate (torch.stack into shared memory), shuffled with a seeded generator.

--batched is the expert variant, for reference: the sampler yields whole
batches (BatchSampler, batch_size=None), so each worker call builds one
(B, sample_bytes) array in numpy instead of B Python-level __getitem__ calls and
a collate.

Prints one line per epoch and a summary line in refloader's format:
  summary: samples=N bytes=B seconds=T samples_per_s=X MB_per_s=Y
"""
import argparse
import mmap
import os
import struct
import sys
import time

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler

try:
    import crc32c as _crc32c
except ImportError:  # scripts/setup installs python3-crc32c
    sys.exit("loader_torch.py: needs Debian's python3-crc32c (apt-get install python3-crc32c)")


def masked_crc(data):
    c = _crc32c.crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class TFRecordDataset(Dataset):
    def __init__(self, files, sample_bytes, verify=True):
        self.files = files
        self.sample_bytes = sample_bytes
        self.verify = verify
        self.index = []  # (file number, offset of the record, data length)
        for fi, path in enumerate(files):
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                off, size = 0, len(mm)
                while off < size:
                    (length,) = struct.unpack_from("<Q", mm, off)
                    (lcrc,) = struct.unpack_from("<I", mm, off + 8)
                    if masked_crc(mm[off:off + 8]) != lcrc:
                        raise ValueError(f"{path}: record at offset {off}: length CRC mismatch")
                    self.index.append((fi, off, length))
                    off += 12 + length + 4
        self._maps = None  # per process, opened on first use (after the fork)

    def __len__(self):
        return len(self.index)

    def _map(self, fi):
        if self._maps is None:
            self._maps = []
            for p in self.files:
                with open(p, "rb") as f:
                    self._maps.append(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        return self._maps[fi]

    def _decode_into(self, i, out):
        fi, off, n = self.index[i]
        mm = self._map(fi)
        data = memoryview(mm)[off + 12: off + 12 + n]
        if self.verify:
            (stored,) = struct.unpack_from("<I", mm, off + 12 + n)
            if masked_crc(data) != stored:
                raise ValueError(f"{self.files[fi]}: record at offset {off}: data CRC mismatch")
        m = min(n, self.sample_bytes)
        out[:m] = np.frombuffer(data, dtype=np.uint8, count=m)
        out[m:] = 0
        del data

    def __getitem__(self, i):
        if isinstance(i, list):  # --batched: a whole batch per call
            out = np.empty((len(i), self.sample_bytes), dtype=np.uint8)
            for k, j in enumerate(i):
                self._decode_into(j, out[k])
            return torch.from_numpy(out)
        out = np.empty(self.sample_bytes, dtype=np.uint8)
        self._decode_into(i, out)
        return torch.from_numpy(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="a .tfrecord file or a directory of them")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--sample-bytes", type=int, default=4096)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--batched", action="store_true", help="whole batches per worker call")
    ap.add_argument("--skip-first-epoch-in-total", action="store_true")
    a = ap.parse_args()

    if os.path.isdir(a.data):
        files = sorted(os.path.join(a.data, f) for f in os.listdir(a.data) if f.endswith(".tfrecord"))
    else:
        files = [a.data]
    ds = TFRecordDataset(files, a.sample_bytes, verify=not a.no_verify)
    g = torch.Generator()
    g.manual_seed(a.seed)
    common = dict(num_workers=a.workers, persistent_workers=a.workers > 0, pin_memory=False,
                  prefetch_factor=a.prefetch if a.workers > 0 else None)
    if a.batched:
        batches = BatchSampler(RandomSampler(ds, generator=g), a.batch_size, drop_last=False)
        loader = DataLoader(ds, batch_size=None, sampler=batches, **common)
    else:
        loader = DataLoader(ds, batch_size=a.batch_size, shuffle=True, generator=g, **common)
    print(f"torch {torch.__version__}: {len(ds)} records in {len(files)} shard(s), "
          f"{a.workers} workers, batch {a.batch_size} x {a.sample_bytes} B"
          f"{', batched' if a.batched else ''}", flush=True)
    tot_s = tot_b = 0
    tot_t = 0.0
    for e in range(a.epochs):
        n = b = 0
        t0 = time.perf_counter()
        for batch in loader:
            n += batch.shape[0]
            b += batch.numel()
        dt = time.perf_counter() - t0
        print(f"epoch {e}: {n} samples in {dt:.3f} s: {n / dt:.0f} samples/s, {b / dt / 1e6:.1f} MB/s",
              flush=True)
        if a.skip_first_epoch_in_total and e == 0 and a.epochs > 1:
            continue
        tot_s, tot_b, tot_t = tot_s + n, tot_b + b, tot_t + dt
    print(f"summary: samples={tot_s} bytes={tot_b} seconds={tot_t:.4f} "
          f"samples_per_s={tot_s / tot_t:.1f} MB_per_s={tot_b / tot_t / 1e6:.1f}", flush=True)


if __name__ == "__main__":
    main()
