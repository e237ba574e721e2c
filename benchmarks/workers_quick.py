"""Quick figures for thresher's worker processes on workload W1 (self-contained).

W1: 60,000 records, each a 28x28 uint8 image and an int64 label, in one ArrayRecord
file written with group_size 1. Pipeline: decode with np.frombuffer, random
horizontal flip (RandomMapTransform), to float32 / 255, Batch(128,
drop_remainder=True); one epoch, global shuffle.

Measures (medians of ``--repeats`` runs):

- records/s over one epoch, for worker_count 0 and 2 (in this process, warm);
- time to first batch with worker_count=2, from DataLoader construction to the
  first batch: "cold" in a fresh Python process (includes starting the fork server),
  and "warm" for a later iterator in the same process (the next epoch).

Usage:
    python benchmarks/workers_quick.py [--records 60000] [--repeats 3] [--data DIR]

The full comparison with Grain and the PyTorch DataLoader lives elsewhere in
benchmarks/; this file needs only thresher and numpy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import thresher as th  # noqa: E402

SIDE = 28
BATCH = 128


def write_w1(path: str, n: int) -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(n, SIDE, SIDE), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n, dtype=np.int64)
    th.sources.write_array_record(
        path, (images[i].tobytes() + labels[i].tobytes() for i in range(n)), group_size=1)


def decode(record: bytes) -> dict[str, Any]:
    image = np.frombuffer(record, np.uint8, SIDE * SIDE).reshape(SIDE, SIDE)
    label = np.frombuffer(record, np.int64, 1, SIDE * SIDE)[0]
    return {"image": image, "label": label}


def flip(x: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    if rng.random() < 0.5:
        return {"image": x["image"][:, ::-1], "label": x["label"]}
    return x


def to_float(x: dict[str, Any]) -> dict[str, Any]:
    return {"image": x["image"].astype(np.float32) / 255.0, "label": x["label"]}


def make_loader(path: str, workers: int) -> th.DataLoader:
    source = th.sources.ArrayRecordSource(path)
    sampler = th.IndexSampler(len(source), shuffle=True, seed=0, num_epochs=1)
    ops = [decode, th.RandomMapTransform(flip), to_float, th.Batch(BATCH, drop_remainder=True)]
    return th.DataLoader(source, sampler, ops, worker_count=workers)


def epoch_rate(path: str, workers: int) -> float:
    loader = make_loader(path, workers)
    start = time.perf_counter()
    n = 0
    for batch in loader:
        n += len(batch["label"])
    return n / (time.perf_counter() - start)


def first_batch_s(path: str, workers: int) -> float:
    start = time.perf_counter()
    with iter(make_loader(path, workers)) as it:
        next(it)
        return time.perf_counter() - start


def cold_first_batch_s(path: str, workers: int) -> float:
    """Time to first batch in a fresh interpreter (measured inside it, after its imports)."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-first-batch", path,
                          str(workers)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "thresher-workers-quick"))
    parser.add_argument("--child-first-batch", nargs=2, metavar=("PATH", "WORKERS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_first_batch:
        print(first_batch_s(args.child_first_batch[0], int(args.child_first_batch[1])))
        return
    os.makedirs(args.data, exist_ok=True)
    path = os.path.join(args.data, f"w1-{args.records}.array_record")
    if not os.path.exists(path):
        write_w1(path, args.records)
    results: dict[str, Any] = {"records": args.records, "cpus": os.cpu_count(), "repeats": args.repeats}
    for workers in (0, 2):
        rates = [epoch_rate(path, workers) for _ in range(args.repeats)]
        results[f"records_per_s_w{workers}"] = round(statistics.median(rates))
        results[f"records_per_s_w{workers}_all"] = [round(r) for r in rates]
    cold = [cold_first_batch_s(path, 2) for _ in range(args.repeats)]
    warm = [first_batch_s(path, 2) for _ in range(args.repeats)]
    results["first_batch_s_w2_cold"] = round(statistics.median(cold), 3)
    results["first_batch_s_w2_cold_all"] = [round(t, 3) for t in cold]
    results["first_batch_s_w2_warm"] = round(statistics.median(warm), 3)
    results["first_batch_s_w2_warm_all"] = [round(t, 3) for t in warm]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
