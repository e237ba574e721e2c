"""What verifying Riegeli chunk data hashes costs the byte-range reader.

Two measurements:

1. HighwayHash-64 throughput, per implementation, on buffers of 1 KiB to 16 MiB: thresher's C
   module (``thresher/sources/remote/_highway.c``, what every range read uses when it could be
   built) and the pure-Python fallback (used only where no C module can be built); as MB/s
   and milliseconds per MB (median of ``--repeats``). With them, bounds for the two other
   ways considered: a NumPy HighwayHash across ``k`` chunks at once (one packet update per
   chunk, ``numpy_bound``) and array_record's own reader verifying a chunk written as a
   one-chunk file in memory (``array_record_bound``).
2. W1 (benchmarks/work.py decode + augment + Batch) over ``s3://`` from the local range
   server (tests/sources/remote/range_server.py in its own process, ``--latency-ms`` per
   request, as ``remote_read``), thresher's range reader with ``worker_count=0`` so that all
   reading and hashing happen in the measured process: rows ``verified`` (as shipped) and
   ``unverified`` (``format.check_data_hash`` replaced by a no-op, for this comparison only),
   run alternately, median records/s of ``--repeats`` windows; for ``s3`` (the default chunk
   cache: a dataset that fits is fetched once) and ``s3 cache/4`` (a cache of a quarter of the
   records' bytes: chunks are fetched, hashed and evicted all the time, the worst case). Also
   reported: the time spent inside the hash during the verified windows, as a share of their
   wall time, and MB hashed per second of reading.

    python -m benchmarks.chunk_hash --quick
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

import numpy as np

import thresher as th
from benchmarks.datasets import ensure
from benchmarks.remote_read import REPO, _rate, _shards
from thresher.sources.remote import RemoteReadOptions
from thresher.sources.remote import format as riegeli
from thresher.sources.remote.highway import highway_hash64, implementation, python_hash64


def hash_speeds(repeats: int, quick: bool) -> list[dict[str, Any]]:
    """MB/s and ms/MB of each implementation for each buffer size."""
    rows = []
    rng = np.random.default_rng(0)
    for size in (1 << 10, 64 << 10, 1 << 20, 16 << 20):
        data = rng.bytes(size)
        for name, fn in (("c", highway_hash64), ("python", python_hash64)):
            if name == "python" and size > (64 << 10 if quick else 1 << 20):
                continue
            loops = max(1, (64 << 20) // size) if name == "c" else 1
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                for _ in range(loops):
                    fn(data)
                times.append((time.perf_counter() - start) / loops)
            t = statistics.median(times)
            rows.append({"impl": name, "size": size, "mb_s": size / t / 1e6, "ms_per_mb": t * 1e3 / (size / 1e6)})
    return rows


def numpy_bound(repeats: int) -> list[dict[str, Any]]:
    """MB/s of the core of a HighwayHash vectorised with NumPy across ``k`` chunks at once:
    the update of one 32-byte packet of each of ``k`` equal-length chunks (the hash is
    sequential within a chunk, so one chunk is one lane). Padding and finalisation are not
    counted, so a whole implementation would be slower than this bound."""
    m32 = np.uint64(0xFFFFFFFF)
    rows = []
    for k in (1, 64, 1024):
        rng = np.random.default_rng(1)
        v0, v1, mul0, mul1, lanes = (rng.integers(0, 2**63, (4, k), dtype=np.uint64) for _ in range(5))
        steps = 200
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(steps):
                v1 += mul0 + lanes
                mul0 ^= (v1 & m32) * (v0 >> np.uint64(32))
                v0 += mul1
                mul1 ^= (v0 & m32) * (v1 >> np.uint64(32))
                for src, dst in ((v1, v0), (v0, v1)):  # the zipper merge: byte moves of lane pairs
                    for a, b in ((1, 0), (3, 2)):
                        x, y = src[a], src[b]
                        dst[b] += (((y & np.uint64(0xFF000000)) | (x & np.uint64(0xFF00000000))) >> np.uint64(24)) \
                            | (((y & np.uint64(0xFF0000000000)) | (x & np.uint64(0xFF000000000000))) >> np.uint64(16)) \
                            | (y & np.uint64(0xFF0000)) | ((y & np.uint64(0xFF00)) << np.uint64(32)) \
                            | ((x & np.uint64(0xFF00000000000000)) >> np.uint64(8)) | (y << np.uint64(56))
                        dst[a] += (((x & np.uint64(0xFF000000)) | (y & np.uint64(0xFF00000000))) >> np.uint64(24)) \
                            | (x & np.uint64(0xFF0000)) | ((x & np.uint64(0xFF0000000000)) >> np.uint64(16)) \
                            | ((x & np.uint64(0xFF00)) << np.uint64(24)) \
                            | ((y & np.uint64(0xFF000000000000)) >> np.uint64(8)) \
                            | ((x & np.uint64(0xFF)) << np.uint64(48)) | (y & np.uint64(0xFF00000000000000))
            times.append((time.perf_counter() - start) / steps)
        t = statistics.median(times)
        rows.append({"impl": f"numpy k={k}", "size": 32 * k, "mb_s": 32 * k / t / 1e6,
                     "ms_per_mb": t * 1e3 / (32 * k / 1e6)})
    return rows


def array_record_bound(repeats: int) -> list[dict[str, Any]]:
    """Seconds for array_record's own reader to open a one-chunk file in memory (tmpfs where
    there is one) and read its records: what verifying a fetched chunk with it would cost at
    the least (assembling that file from the chunk, with new block headers, footer and
    postscript, not counted)."""
    from array_record.python import array_record_module

    folder = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    rows = []
    try:
        rng = np.random.default_rng(2)
        for size in (1 << 10, 64 << 10, 1 << 20):
            path = os.path.join(folder, f"{size}.array_record")
            writer = array_record_module.ArrayRecordWriter(path, "group_size:1,uncompressed")
            writer.write(rng.bytes(size))
            writer.close()
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                for _ in range(20):
                    reader = array_record_module.ArrayRecordReader(path, "readahead_buffer_size:0")
                    reader.read([0])
                    reader.close()
                times.append((time.perf_counter() - start) / 20)
            t = statistics.median(times)
            rows.append({"impl": "array_rec", "size": size, "mb_s": size / t / 1e6,
                         "ms_per_mb": t * 1e3 / (size / 1e6)})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return rows


class _Timed:
    """``format.check_data_hash`` that adds up the seconds and bytes it hashes."""

    def __init__(self, real: Any) -> None:
        self.real, self.seconds, self.bytes = real, 0.0, 0
        self.lock = threading.Lock()

    def __call__(self, data: bytes, expected: int, begin: int) -> None:
        start = time.perf_counter()
        self.real(data, expected, begin)
        spent = time.perf_counter() - start
        with self.lock:
            self.seconds += spent
            self.bytes += len(data)


def w1_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    sys.path.insert(0, REPO)
    from tests.sources.remote.range_server import RangeServer

    real = riegeli.check_data_hash
    rows = []
    root = tempfile.mkdtemp(prefix="thresher-buckets-")
    try:
        with RangeServer(root, args.latency_ms / 1000, process=True) as server:
            bucket = server.make_bucket("bench")
            so = server.s3_options()
            base = ensure(args.cache, "mnist", 600 if args.tiny else 20_000 if args.quick else 60_000)
            for group in [int(g) for g in args.group_sizes.split(",")]:
                paths = _shards(base["path"], group, args.shard_mb << 20)
                prefix = os.path.join(root, bucket, f"W1-g{group}")
                os.makedirs(prefix, exist_ok=True)
                for p in paths:
                    shutil.copy(p, prefix)
                urls = [f"s3://{bucket}/W1-g{group}/{os.path.basename(p)}" for p in paths]
                for where, options in (("s3", RemoteReadOptions()),
                                       ("s3 cache/4", RemoteReadOptions(cache_bytes=base["payload_bytes"] // 4))):
                    src = th.sources.ArrayRecordSource(urls, storage_options=so, read_options=options)
                    rates: dict[str, list[float]] = {"verified": [], "unverified": []}
                    shares, mb_s = [], []
                    for r in range(args.repeats):
                        for variant in ("verified", "unverified"):
                            timed = _Timed(real)
                            riegeli.check_data_hash = timed if variant == "verified" else (lambda *a: None)
                            try:
                                start = time.perf_counter()
                                rate, _ = _rate(src, "W1", 0, args.seconds, r, server, args.warmup)
                                wall = time.perf_counter() - start
                            finally:
                                riegeli.check_data_hash = real
                            rates[variant].append(rate)
                            if variant == "verified":
                                shares.append(timed.seconds / wall)
                                mb_s.append(timed.bytes / 1e6 / wall)
                    v, u = statistics.median(rates["verified"]), statistics.median(rates["unverified"])
                    rows.append({"group": group, "where": where, "verified": v, "unverified": u,
                                 "cost": 1 - v / u, "hash_share": statistics.median(shares),
                                 "hashed_mb_s": statistics.median(mb_s)})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Runs the benchmark, prints the tables, returns their rows."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smaller dataset, 3 s windows")
    ap.add_argument("--tiny", action="store_true", help="a smoke run of the harness (seconds)")
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--warmup", type=float, default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--group-sizes", default="1,64")
    ap.add_argument("--shard-mb", type=int, default=16)
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "thresher-bench-remote"))
    args = ap.parse_args(argv)
    if args.tiny:
        args.repeats, args.group_sizes = 1, "1"
    args.seconds = args.seconds or (0.3 if args.tiny else 3.0 if args.quick else 6.0)
    if args.warmup is None:
        args.warmup = 0.0 if args.tiny else 3.0
    print(f"HighwayHash here: {implementation()}; machine shared with other work (noisy)\n")
    print(f"{'impl':<8}{'bytes':>10}{'MB/s':>10}{'ms/MB':>10}")
    reps = 3 if args.tiny else args.repeats
    speeds = hash_speeds(reps, args.quick or args.tiny) + numpy_bound(reps) + array_record_bound(reps)
    for r in speeds:
        print(f"{r['impl']:<8}{r['size']:>10}{r['mb_s']:>10.1f}{r['ms_per_mb']:>10.3f}")
    rows = w1_rows(args)
    print(f"\nW1 over s3:// from the local range server ({args.latency_ms:g} ms per request), worker_count=0; "
          f"median of {args.repeats} alternated windows of {args.seconds:g} s after {args.warmup:g} s\n")
    print(f"{'group':>6}  {'source':<12}{'verified/s':>12}{'unverified/s':>14}{'cost':>8}{'in hash':>9}"
          f"{'MB hashed/s':>13}")
    for r in rows:
        print(f"{r['group']:>6}  {r['where']:<12}{r['verified']:>12,.0f}{r['unverified']:>14,.0f}"
              f"{r['cost']:>8.1%}{r['hash_share']:>9.2%}{r['hashed_mb_s']:>13.1f}")
    return {"speeds": speeds, "w1": rows}


if __name__ == "__main__":
    main()
