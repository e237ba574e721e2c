"""thresher.Dataset against Grain's MapDataset: the tf.data guide's fast_benchmark, and W6 packing.

    python benchmarks/dataset_bench.py            # 5 rounds, medians
    python benchmarks/dataset_bench.py --rounds 3

fast_benchmark (the tf.data performance guide): ``range(10_000)``, map ``x + 1``,
batch 256, two epochs, in both orders (map-then-batch: a Python call per element;
batch-then-map: one call per batch). thresher is also run with the map marked
``batchable=True``, which its optimiser turns into batch-then-map.

W6 (token packing): variable-length int32 token records (16-512 tokens, uniform),
packed into rows of 512 (tokens, segment ids, positions), batches of 64 rows; Grain
with ``grain.experimental.FirstFitPackIterDataset`` (64 bins, no bin shuffling),
thresher with ``Dataset.pack(512)`` (best-fit decreasing over windows of 256
records). Padding is reported for both.

Grain is timed two ways where it has two (iterating the MapDataset, which goes
through its prefetching IterDataset, and indexing it directly); ratios are against
the faster. Everything runs in this process (no workers), on the same data.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import thresher as th


def increment(x: Any) -> Any:
    return x + 1


def timed(fn: Callable[[], int], rounds: int) -> tuple[float, int]:
    """Median seconds of ``rounds`` runs (after one warm-up run) and what one run produced."""
    out = fn()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def epochs(ds: Any, num_epochs: int = 2) -> Callable[[], int]:
    def run() -> int:
        n = 0
        for _ in range(num_epochs):
            for _ in ds:
                n += 1
        return n
    return run


def indexed(ds: Any, num_epochs: int = 2) -> Callable[[], int]:
    def run() -> int:
        n = 0
        for _ in range(num_epochs):
            for i in range(len(ds)):
                ds[i]
                n += 1
        return n
    return run


def fast_benchmark(rounds: int) -> list[tuple[str, float, float]]:
    import grain

    rows = []
    cases = [
        ("map-then-batch", th.Dataset.range(10_000).map(increment).batch(256),
         grain.MapDataset.range(10_000).map(increment).batch(256)),
        ("batch-then-map", th.Dataset.range(10_000).batch(256).map(increment),
         grain.MapDataset.range(10_000).batch(256).map(increment)),
        ("map(batchable=True)-then-batch", th.Dataset.range(10_000).map(increment, batchable=True).batch(256),
         grain.MapDataset.range(10_000).map(increment).batch(256)),
    ]
    for name, ours, theirs in cases:
        t_ours, n_ours = timed(epochs(ours), rounds)
        t_iter, n_iter = timed(epochs(theirs), rounds)
        t_idx, n_idx = timed(indexed(theirs), rounds)
        assert n_ours == n_iter == n_idx == 80, (n_ours, n_iter, n_idx)
        a = [b.tolist() for b in ours]
        assert a == [np.asarray(b).tolist() for b in theirs], "thresher and Grain disagree"
        best = min(t_iter, t_idx)
        rows.append((name, t_ours, best))
        print(f"fast_benchmark {name:32s} thresher {t_ours * 1e3:8.2f} ms   Grain iter {t_iter * 1e3:8.2f} ms, "
              f"Grain [i] {t_idx * 1e3:8.2f} ms   ratio {best / t_ours:6.1f}x")
    return rows


def token_records(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(1, 32_000, size=int(k), dtype=np.int32) for k in rng.integers(16, 513, size=n)]


def w6(rounds: int, n: int) -> tuple[str, float, float]:
    import grain

    records = token_records(n)
    total_tokens = sum(len(r) for r in records)
    ours = th.Dataset.source(records).pack(512).batch(64)

    def run_ours() -> int:
        tokens = rows = 0
        for b in ours:
            tokens += int((b["segment_ids"] > 0).sum())
            rows += b["tokens"].shape[0]
        assert tokens == total_tokens
        return rows

    theirs_src = grain.MapDataset.source(records).map(lambda t: {"tokens": t})

    def run_theirs() -> int:
        ds = grain.experimental.FirstFitPackIterDataset(
            theirs_src.to_iter_dataset(), length_struct={"tokens": 512}, num_packing_bins=64, shuffle_bins=False)
        tokens = rows = 0
        for b in ds.batch(64):
            tokens += int((b["tokens_segment_ids"] > 0).sum())
            rows += b["tokens"].shape[0]
        assert tokens == total_tokens
        return rows

    t_ours, rows_ours = timed(run_ours, rounds)
    t_theirs, rows_theirs = timed(run_theirs, rounds)
    pad = lambda rows: 100 * (1 - total_tokens / (rows * 512))
    print(f"W6 packing ({n} records, {total_tokens} tokens)   thresher {t_ours:7.3f} s ({n / t_ours:9.0f} records/s, "
          f"{rows_ours} rows, {pad(rows_ours):.2f}% padding)   Grain {t_theirs:7.3f} s ({n / t_theirs:9.0f} records/s, "
          f"{rows_theirs} rows, {pad(rows_theirs):.2f}% padding)   ratio {t_theirs / t_ours:6.1f}x")
    return ("W6 packing", t_ours, t_theirs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="timed runs per case (medians; >= 3)")
    parser.add_argument("--records", type=int, default=5000, help="token records for W6")
    args = parser.parse_args()
    rounds = max(3, args.rounds)
    import grain

    print(f"thresher {th.__version__}, grain {getattr(grain, '__version__', '?')}, medians of {rounds} runs")
    rows = fast_benchmark(rounds)
    rows.append(w6(rounds, args.records))
    print("\nsummary (Grain time / thresher time; target >= 2x):")
    for name, ours, theirs in rows:
        print(f"  {name:34s} {theirs / ours:6.1f}x")


if __name__ == "__main__":
    main()
