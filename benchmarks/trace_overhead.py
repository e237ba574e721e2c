"""What tracing costs: records/s of W1 and W2 with no trace open and inside thresher.trace().

W1: 60,000 28x28 uint8 records + int64 label in ArrayRecord (group_size 1), decode,
random flip, to float32, Batch(128, drop_remainder=True), global shuffle, at
worker_count 0 and 2 (see workers_quick.py). W2: RangeDataSource(0, 1_000_000), a
``x + 1`` map, Batch(256), in process.

Each measurement runs one epoch in a fresh process (after one warm-up epoch), the
modes interleaved (off, on, off, on, ...); the medians are printed. ``it.stats()`` is
always on (it cannot be switched off): its cost is inside every figure.

Usage:
    python -m benchmarks.trace_overhead [--rounds 5] [--data DIR]   (or python benchmarks/trace_overhead.py)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):  # run as a script (python benchmarks/trace_overhead.py), also the child
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import thresher as th  # noqa: E402
from benchmarks import workers_quick as wq  # noqa: E402

WORKLOADS = (("W1", 0), ("W1", 2), ("W2", 0))


def _plus_one(x: int) -> int:
    return x + 1


def make(work: str, workers: int, path: str) -> th.DataLoader:
    if work == "W2":
        return th.DataLoader(th.sources.RangeDataSource(0, 1_000_000), th.IndexSampler(1_000_000, num_epochs=1),
                             [_plus_one, th.Batch(256)], worker_count=workers)
    return wq.make_loader(path, workers)


def epoch(work: str, workers: int, path: str, trace: bool) -> float:
    """Records/s of one epoch (after a warm-up epoch)."""
    for measured in (False, True):
        ctx = th.trace() if trace and measured else contextlib.nullcontext()
        start = time.perf_counter()
        with ctx, iter(make(work, workers, path)) as it:
            for _ in it:
                pass
            records = it.stats().records
        took = time.perf_counter() - start
    return records / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "thresher-workers-quick"))
    parser.add_argument("--child", nargs=4, metavar=("WORK", "WORKERS", "PATH", "TRACE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        work, workers, path, trace = args.child
        print(epoch(work, int(workers), path, trace == "1"))
        return
    os.makedirs(args.data, exist_ok=True)
    path = os.path.join(args.data, "w1-60000.array_record")
    if not os.path.exists(path):
        wq.write_w1(path, 60_000)
    for work, workers in WORKLOADS:
        rates: dict[str, list[float]] = {"off": [], "on": []}
        for _ in range(args.rounds):
            for mode in ("off", "on"):
                out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", work, str(workers), path,
                                      "1" if mode == "on" else "0"], capture_output=True, text=True, check=True)
                rates[mode].append(float(out.stdout.strip().splitlines()[-1]))
        off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
        print(f"{work} worker_count={workers}: trace off {off:,.0f} records/s, on {on:,.0f} records/s "
              f"({on / off - 1:+.1%})")


if __name__ == "__main__":
    main()
