"""Which reader for local ArrayRecord files: array_record's native reader against byte ranges and
the chunk cache, per group size (what ``ArrayRecordSource(reader="auto")`` chooses from).

For each ``--groups`` size, a file of ``--records`` random records of ``--record-bytes`` bytes
(incompressible: zstd stores them), read through ``th.DataLoader`` in one process
(``worker_count=0``; a pipeline of ``np.frombuffer`` and ``Batch(128)``) for ``--seconds`` of
wall time from a new source, readers interleaved, medians of ``--repeats``:

- ``full``: a full shuffle, the chunk cache holding a sixth of the data (``--cache-share``), as
  data much larger than memory would be;
- ``block``: ``BlockShuffle.of_source(src)`` (its default setting), the default chunk cache.

The native reader decodes a whole chunk for every record it reads out of order; the chunk cache
decodes a chunk once while it is held. Start-up is included (short runs of a fresh source).

    python -m benchmarks.array_record_readers
    python -m benchmarks.array_record_readers --groups 64,1024 --repeats 1 --seconds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

import numpy as np

import thresher as th
from thresher.sources.remote import RemoteReadOptions


def decode(record: bytes) -> np.ndarray:
    return np.frombuffer(record, np.uint8)[:64]


def write(directory: str, records: int, record_bytes: int, group: int) -> str:
    from array_record.python import array_record_module

    path = os.path.join(directory, f"readers-r{records}-b{record_bytes}-g{group}.array_record")
    if not os.path.exists(path):
        rng = np.random.default_rng(0)
        tmp = f"{path}.tmp"
        w = array_record_module.ArrayRecordWriter(tmp, f"group_size:{group}")
        for _ in range(records):
            w.write(rng.bytes(record_bytes))
        w.close()
        os.replace(tmp, path)
    return path


def rate(src: Any, shuffle: Any, seconds: float) -> float:
    sampler = th.IndexSampler(len(src), shuffle=shuffle, seed=0, num_epochs=1)
    loader = th.DataLoader(src, sampler, [decode, th.Batch(128)], worker_count=0)
    started = time.perf_counter()
    n = 0
    with iter(loader) as it:
        for batch in it:
            n += len(batch)
            if time.perf_counter() - started > seconds:
                break
    return n / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--record-bytes", type=int, default=1000)
    ap.add_argument("--groups", default="1,8,64,256,1024,4096")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache-share", type=float, default=1 / 6)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "thresher-reader-bench"))
    a = ap.parse_args(argv)
    os.makedirs(a.dir, exist_ok=True)
    small_cache = int(a.records * a.record_bytes * a.cache_share)
    groups = [int(g) for g in a.groups.split(",")]
    paths = {g: write(a.dir, a.records, a.record_bytes, g) for g in groups}
    rates: dict[tuple[int, str, str], list[float]] = {}
    for _ in range(a.repeats):
        for g in groups:
            for reader in ("native", "ranges"):
                small = RemoteReadOptions(cache_bytes=small_cache) if reader == "ranges" else None
                src = th.sources.ArrayRecordSource(paths[g], reader=reader, read_options=small)
                rates.setdefault((g, "full", reader), []).append(rate(src, True, a.seconds))
                src = th.sources.ArrayRecordSource(paths[g], reader=reader)
                block = th.BlockShuffle.of_source(src)
                rates.setdefault((g, "block", reader), []).append(rate(src, block, a.seconds))
    auto = {g: th.sources.ArrayRecordSource(paths[g]).reader for g in groups}
    print(f"{a.records:,} records of {a.record_bytes} B, worker_count=0, {a.seconds:g} s runs from a new source, "
          f"median of {a.repeats}; full shuffle with a cache of {small_cache / 2**20:.0f} MiB")
    print(f"{'group_size':>10} {'order':>6} {'native':>10} {'ranges':>10} {'ranges/native':>14} {'auto picks':>11}")
    for g in groups:
        for order in ("full", "block"):
            n = statistics.median(rates[(g, order, "native")])
            r = statistics.median(rates[(g, order, "ranges")])
            print(f"{g:>10} {order:>6} {n:10,.0f} {r:10,.0f} {r / n:14.2f} {auto[g]:>11}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
