"""BlockShuffle over Parquet row groups, against pyarrow's sequential ``iter_batches`` (issue 28).

The Parquet corpus of ``benchmarks.parquet_read`` (``--records`` short texts and an int64 label
in ``--files`` files, row groups of ``--row-group`` rows, snappy), a ``ParquetSource`` whose
row-group cache holds a quarter of the decoded data (the data is 4x the cache). Rows, one
process, rounds interleaved, medians of ``--repeats`` (each from a cold start: a new source):

- ``pyarrow iter_batches``: ``ParquetFile.iter_batches`` + ``RecordBatch.to_pylist`` over every
  file in order (the sequential rate; it cannot shuffle);
- ``block getitems``: ``ParquetSource.__getitems__`` over batches of ``--batch`` keys in the
  order of ``IndexSampler(shuffle=BlockShuffle.of_source(src, ...))``: blocks of whole row
  groups, windows of as many row groups as fit in half the cache (the sizing rule);
- ``block loader``: the same sampler through ``th.DataLoader`` (``Batch(--batch)``,
  ``worker_count=0``): what a training loop gets;
- ``full getitems``: a full shuffle with the same cache, on the first ``--full-records`` keys.

One-process rows are timed in this process's CPU time by default (``--clock cpu``: the machine
is shared; pyarrow's decoding threads count too); ``--clock wall`` for wall time. Each row also
says how many row groups were decoded per record.

    python -m benchmarks.block_shuffle_parquet --repeats 3
    python -m benchmarks.block_shuffle_parquet --records 200000 --repeats 2    # quicker
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.parquet_read import arrow_run, write_corpus


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--row-group", type=int, default=10_000)
    ap.add_argument("--text-bytes", type=int, default=200)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--full-records", type=int, default=20_000)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "thresher-parquet-bench"))
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    a = ap.parse_args(argv)
    import pyarrow as pa

    import thresher as th

    paths = write_corpus(a.dir, a.records, a.files, a.row_group, a.text_bytes)
    pa.array(["warm"]).to_pylist()  # pyarrow imports pandas on first use: not timed
    clock = time.process_time if a.clock == "cpu" else time.perf_counter
    probe = th.sources.ParquetSource(paths, cache_bytes=1 << 40)  # holds every row group: their cost
    probe.__getitems__(list(range(0, a.records, a.row_group)))  # one key of each row group
    decoded = probe.cache_info()["bytes"]
    cache = max(1, decoded // 4)
    groups = len(probe.block_boundaries())
    window = max(1, (cache // 2) // max(1, decoded // groups))
    shuffle = th.BlockShuffle.of_source(probe, block_size=a.row_group, window_blocks=window)
    block_keys = th.IndexSampler(a.records, shuffle=shuffle, seed=0).keys(np.arange(a.records))
    full_keys = np.random.default_rng(1).permutation(a.records)[:a.full_records]
    stats: dict[str, float] = {}

    def getitems(keys: np.ndarray, what: str) -> Callable[[], int]:
        def run() -> int:
            src = th.sources.ParquetSource(paths, cache_bytes=cache)
            for i in range(0, len(keys), a.batch):
                src.__getitems__(keys[i:i + a.batch])
            stats[what] = src.cache_info()["misses"] / len(keys)
            return len(keys)

        return run

    def loader() -> int:
        src = th.sources.ParquetSource(paths, cache_bytes=cache)
        sampler = th.IndexSampler(len(src), shuffle=shuffle, seed=0, num_epochs=1)
        n = 0
        with iter(th.DataLoader(src, sampler, [th.Batch(a.batch)], worker_count=0)) as it:
            for b in it:
                n += len(b["label"])
        stats["block loader"] = src.cache_info()["misses"] / n
        return n

    rows: dict[str, Callable[[], int]] = {
        "pyarrow iter_batches": arrow_run(paths, a.batch),
        "block getitems": getitems(block_keys, "block getitems"),
        "block loader": loader,
        "full getitems": getitems(full_keys, "full getitems"),
    }
    rates: dict[str, list[float]] = {k: [] for k in rows}
    loads = []
    for r in range(a.repeats):
        loads.append(os.getloadavg()[0])
        for name, fn in rows.items():
            t0 = clock()
            n = fn()
            rates[name].append(n / (clock() - t0))
            print(f"round {r}: {name:22s} {rates[name][-1]:12,.0f} rec/s", flush=True)
    base = statistics.median(rates["pyarrow iter_batches"])
    print(f"\n{a.records:,} records in {a.files} files, row groups of {a.row_group:,}, texts ~{a.text_bytes} B; "
          f"decoded {decoded / 2**20:,.0f} MiB, cache {cache / 2**20:,.0f} MiB (data 4x the cache); "
          f"{shuffle!r} ({window} row groups per window); {a.clock} time, median of {a.repeats}; load "
          f"{', '.join(f'{x:.1f}' for x in loads)}; python {sys.version.split()[0]}")
    print(f"{'row':22s} {'records/s':>12s} {'/ iter_batches':>15s} {'row groups decoded / record':>28s}")
    for name, v in rates.items():
        med = statistics.median(v)
        extra: Any = stats.get(name)
        print(f"{name:22s} {med:12,.0f} {med / base:15.2f} {'' if extra is None else f'{extra:28.5f}'}")


if __name__ == "__main__":
    main()
