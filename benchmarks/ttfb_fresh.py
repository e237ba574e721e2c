"""Time to first batch with 2 workers, in a fresh process that has imported jax and torch.

    python -m benchmarks.ttfb_fresh                 # 5 rounds
    python -m benchmarks.ttfb_fresh --rounds 7

Each measurement is a new interpreter (``python -c``) that imports jax, torch and the
loader, then times W1's pipeline (ArrayRecord, 60,000 MNIST-like records, shuffle,
decode, random flip, Batch(128)) from the DataLoader's construction to its first batch,
with 2 workers. Rows run interleaved: thresher, and the PyTorch DataLoader (fork and
spawn) with the same functions. Imports are not counted (they are the same for all).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

_CHILD = r"""
import sys, time, json
import jax, torch
sys.path.insert(0, {root!r})
from benchmarks.loaders import {module} as m
factory, count = m.pipeline("TTFB", {cfg!r}, {data!r})
t = time.perf_counter()
it = factory()
batch = next(it)
ttfb = time.perf_counter() - t
close = getattr(it, "close", None)
if close: close()
print(json.dumps({{"ttfb_s": ttfb, "records": count(batch)}}))
"""

ROWS = (("thresher w2", "thresher_loader", {"workers": 2}),
        ("thresher w2 warm_start=False", "thresher_loader", {"workers": 2, "warm_start": False}),
        ("torch w2 (fork)", "torch_loader", {"workers": 2}),
        ("torch w2 (spawn)", "torch_loader", {"workers": 2, "context": "spawn"}))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ttfb_fresh", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cache", default="benchmarks/results/data")
    ap.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    ap.add_argument("--out", default="benchmarks/results/results_ttfb_fresh.json")
    args = ap.parse_args(argv)
    from benchmarks import datasets, fresh

    data = datasets.ensure(args.cache, "mnist", 60_000)
    rows = [r for r in ROWS if not args.rows or r[0] in args.rows.split(",")]
    runs: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    for r, name, res in fresh.interleaved(_CHILD, rows, args.rounds, data, 300):
        runs[name].append(res["ttfb_s"])
        print(f"  [{r + 1}/{args.rounds}] {name:<28} TTFB {res['ttfb_s']:.3f} s", flush=True)
    print(f"\nTTFB, 2 workers, fresh process with jax + torch imported (median of {args.rounds}; machine shared)")
    for name, ts in runs.items():
        if ts:
            print(f"  {name:<28} {statistics.median(ts):.3f} s   (min {min(ts):.3f}, max {max(ts):.3f})")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        json.dump({"runs": runs, "medians": {k: statistics.median(v) for k, v in runs.items() if v}}, f, indent=1)
    os.replace(args.out + ".tmp", args.out)


if __name__ == "__main__":
    main()
