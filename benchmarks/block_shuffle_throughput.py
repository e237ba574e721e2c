"""BlockShuffle throughput: chunked and remote ArrayRecord against a full shuffle on local disk.

Two targets of the block-shuffle issue, in one run, variants interleaved, medians of
``--repeats`` runs (short runs: ``--batches`` batches of 128 each, start-up included):

- **remote**: an ArrayRecord dataset 4x the chunk cache, read from the local object server
  (``tests.sources.remote.range_server``, its own process) at ``--latency-ms`` per request,
  ``worker_count="auto"``, with ``BlockShuffle.of_source`` (a window fits in half the cache),
  against the same pipeline on local disk with a full shuffle (group_size 1, the native
  reader). Also the bytes fetched per record read, against the record's own bytes.
- **local**: the file written with array_record's default group size (65536) read with a
  BlockShuffle through the chunk cache (the default reader at this group size, byte ranges on
  the local path), and with a full shuffle through array_record's native reader (2 batches in
  process only: each record decodes its whole 64 MiB group), against group_size 1 with a full
  shuffle.

The records are ``--record-bytes`` random bytes (incompressible); the pipeline decodes them
with ``np.frombuffer`` and a float32 sum of 64 bytes, then ``Batch(128)``. The machine is
shared with other work: read the ratios, not the absolute rates.

    python -m benchmarks.block_shuffle_throughput                 # ~5 min on 2 busy cores
    python -m benchmarks.block_shuffle_throughput --local-only --epoch --local-workers 0,2:thread,2:process,auto
    python -m benchmarks.block_shuffle_throughput --records 20000 --batches 20 --repeats 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import numpy as np

import thresher as th
from thresher.sources.remote import RemoteReadOptions

BATCH = 128


def decode(record: bytes) -> np.ndarray:
    return np.frombuffer(record, np.uint8)[:64].astype(np.float32)


def write(directory: str, records: int, record_bytes: int, group_size: int) -> str:
    path = os.path.join(directory, "bkt", f"r{records}-{record_bytes}-g{group_size}.array_record")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        rng = np.random.default_rng(0)
        th.sources.write_array_record(path, (rng.bytes(record_bytes) for _ in range(records)),
                                      group_size=group_size)
    return path


def rate(src: Any, shuffle: Any, batches: int | None, workers: Any) -> tuple[float, Any]:
    """Records per second over ``batches`` batches from a fresh loader (start-up included);
    ``batches`` None: one whole epoch. ``workers``: a worker count, "auto", or "2:thread"."""
    sampler = th.IndexSampler(len(src), shuffle=shuffle, seed=0, num_epochs=None if batches else 1)
    count, _, mode = str(workers).partition(":")
    loader = th.DataLoader(src, sampler, [decode, th.Batch(BATCH, drop_remainder=True)],
                           worker_count=count if count == "auto" else int(count), worker_mode=mode or None)
    started = time.perf_counter()
    n = 0
    with iter(loader) as it:
        for batch in it:
            n += len(batch)
            if batches and n >= batches * BATCH:
                break
    return n / (time.perf_counter() - started), loader


def block_shuffle_for(src: Any, cache_bytes: int, record_bytes: int, block_size: int) -> th.BlockShuffle:
    """of_source with as many blocks per window as fit in half the cache (at least 1)."""
    first = th.BlockShuffle.of_source(src, block_size=block_size, window_blocks=1)
    b = first.boundaries
    block = int(np.diff(b).max()) if b is not None and b.size > 1 else block_size
    window = max(1, (cache_bytes // 2) // (block * (record_bytes + 8)))
    return th.BlockShuffle(first.block_size, window, first.boundaries)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--remote-groups", default="1,4096",
                        help="group sizes read remotely (65536 needs a cache of 2 chunks of 64 MiB: a dataset "
                             "4x that is over 512 MiB)")
    parser.add_argument("--local-only", action="store_true", help="only the local variants (longer runs)")
    parser.add_argument("--epoch", action="store_true",
                        help="the local variants read one whole epoch each (--batches is for the remote ones)")
    parser.add_argument("--local-workers", default="auto",
                        help="worker settings of the local variants, e.g. 0,2:thread,2:process,auto")
    parser.add_argument("--out", default="benchmarks/results/block_shuffle")
    args = parser.parse_args(argv)
    from tests.sources.remote.range_server import RangeServer

    root = os.path.abspath(args.out)
    cache = args.records * (args.record_bytes + 8) // 4  # the dataset is 4x the cache
    groups = [int(g) for g in args.remote_groups.split(",")]
    paths = {g: write(root, args.records, args.record_bytes, g) for g in sorted({1, 65536, *groups})}
    rows: dict[str, list[float]] = {}
    fetched: dict[str, list[float]] = {}
    bases: dict[str, str] = {}  # a local g65536 row -> the g1 row with the same workers
    with RangeServer(root, latency_s=args.latency_ms / 1000, process=True) as server:
        for _ in range(args.repeats):
            local_batches = None if args.epoch else args.batches
            for workers in args.local_workers.split(","):
                tag = "" if workers == "auto" else f", workers {workers}"
                local = th.sources.ArrayRecordSource(paths[1])
                r, _ = rate(local, True, local_batches, workers)
                rows.setdefault(f"local g1 full (baseline{tag})", []).append(r)
                ranged = th.sources.ArrayRecordSource(  # the default reader: byte ranges at this group size
                    paths[65536], read_options=RemoteReadOptions(cache_bytes=max(cache, 256 << 20)))
                assert ranged.reader == "ranges", ranged.reader
                shuffle = block_shuffle_for(ranged, max(cache, 256 << 20), args.record_bytes, 65536)
                r, _ = rate(ranged, shuffle, local_batches, workers)
                name = f"local g65536 block {shuffle.block_size}x{shuffle.window_blocks} (ranges{tag})"
                rows.setdefault(name, []).append(r)
                bases[name] = f"local g1 full (baseline{tag})"
            if not args.local_only:
                local64k = th.sources.ArrayRecordSource(paths[65536], reader="native")
                r, _ = rate(local64k, True, 2, 0)  # a group decoded per record: 2 batches say enough
                rows.setdefault("local g65536 full (native)", []).append(r)
            for g in [] if args.local_only else groups:
                name = os.path.relpath(paths[g], root).replace(os.sep, "/")
                for shuffle_of in (None, g):
                    src = th.sources.ArrayRecordSource(f"s3://{name}", storage_options=server.s3_options(),
                                                       read_options=RemoteReadOptions(cache_bytes=cache))
                    s = True if shuffle_of is None else block_shuffle_for(src, cache, args.record_bytes,
                                                                          max(g, 4096))
                    what = "full" if s is True else f"block {s.block_size}x{s.window_blocks}"
                    if s is True and g > 1:
                        continue  # a full shuffle at group_size 65536 fetches a 64 MiB chunk per record
                    server.stats(reset=True)
                    r, _ = rate(src, s, args.batches, "auto")
                    key = f"remote g{g} {what}"
                    rows.setdefault(key, []).append(r)
                    fetched.setdefault(key, []).append(server.stats()["body_bytes"] / (args.batches * BATCH))
    main_base = "local g1 full (baseline)" if "local g1 full (baseline)" in rows else next(iter(rows))
    local_len = "one epoch" if args.epoch else f"{args.batches} batches"
    print(f"{args.records} records of {args.record_bytes} B, cache {cache / 2**20:.0f} MiB (dataset 4x), "
          f"{args.latency_ms:g} ms per request, {args.batches} batches of {BATCH} (local variants: {local_len}), "
          f"worker_count='auto' unless named, median of {args.repeats}")
    print(f"{'variant':56} {'records/s':>10} {'/ local full':>12} {'fetched B/record':>17}")
    for k, v in rows.items():
        f = f"{statistics.median(fetched[k]):17.0f}" if k in fetched else f"{'-':>17}"
        ratio = statistics.median(v) / statistics.median(rows[bases.get(k, main_base)])
        print(f"{k:56} {statistics.median(v):10.0f} {ratio:12.2f} {f}")
    print("(/ local full: against the local g1 full row with the same workers)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
