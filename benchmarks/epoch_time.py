"""Whole-epoch time with 2 workers, start-up included, in a fresh process that has imported jax and torch.

    python -m benchmarks.epoch_time                          # W8, 3,072 JPEGs (12 batches), 3 rounds
    python -m benchmarks.epoch_time --images 6144 --rounds 5
    python -m benchmarks.epoch_time --setup-s 0.5              # the model built between construction and iter()

Steady-state throughput (``benchmarks.run``) starts its clock at the first batch, so it
cannot see what happens while workers start: with heavy chunks (W8's 256 JPEG decodes
are about 0.6 s of CPU) the first batches decide a short run. This measures what a
user waits for: from the loader's construction to each batch of one epoch of W8
(ArrayRecord of ImageNet-sized JPEGs, shuffle, decode, random-resized crop to 224, flip,
Batch(256)), in a new interpreter per run that has imported jax and torch (imports are
not counted: ``import torch`` imports torch's DataLoader, and thresher's lazily imported
DataLoader modules are imported before the clock starts too, by ``import_now``). Rows run
interleaved, each with the same functions: thresher (every chunk in a worker, the default;
``warm_start=True``; worker threads) and the PyTorch DataLoader (fork).

Reported per row (medians): time to the first batch, to the third, to the whole epoch,
images/s over the epoch, and images per CPU-second (this process and its workers).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

_CHILD = r"""
import sys, time, json, resource
import jax, torch
import psutil
sys.path.insert(0, {root!r})
from benchmarks.loaders import {module} as m
getattr(m, 'import_now', lambda: None)()  # imports are not counted (thresher's are lazy)
factory, count = m.pipeline("W8", {cfg!r}, {data!r})
me = psutil.Process()
def cpu():
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total
seen = {{}}
c0 = cpu()
t = time.perf_counter()
setup_s = {setup_s!r}
if setup_s:  # the loader built, then the model: this process busy (one core) before iter()
    loader = m._loader("W8", {cfg!r}, {data!r})
    x = 0
    while time.perf_counter() - t < setup_s:
        for i in range(10_000):
            x += i * i
    t_iter = time.perf_counter()
    it = iter(loader)
else:
    it = factory()
    t_iter = t
arrivals, images = [], 0
for batch in it:
    images += count(batch)
    arrivals.append(time.perf_counter() - t)
    for p in me.children(recursive=True):  # workers exit at the epoch's end: keep their last CPU time
        try:
            ct = p.cpu_times()
            seen[p.pid] = ct.user + ct.system
        except psutil.Error:
            pass
cpu_s = time.process_time() + sum(seen.values()) - c0
close = getattr(it, "close", None)
if close: close()
print(json.dumps({{"arrivals": arrivals, "images": images, "cpu_s": cpu_s, "from_iter_s": arrivals[0] - (t_iter - t)}}))
"""

ROWS = (("thresher w2", "thresher_loader", {"workers": 2}),
        ("thresher w2 warm_start=True", "thresher_loader", {"workers": 2, "warm_start": True}),
        ("thresher w2 (worker threads)", "thresher_loader", {"workers": 2, "mode": "thread"}),
        ("torch w2 (fork)", "torch_loader", {"workers": 2}))


def _summary(res: dict[str, float | list[float]]) -> dict[str, float]:
    arrivals = res["arrivals"]
    assert isinstance(arrivals, list)
    images, cpu_s = float(res["images"]), float(res["cpu_s"])  # type: ignore[arg-type]
    return {"ttfb_s": arrivals[0], "ttfb_iter_s": float(res.get("from_iter_s", arrivals[0])),  # type: ignore[arg-type]
             "third_s": arrivals[min(2, len(arrivals) - 1)], "epoch_s": arrivals[-1],
            "images_per_s": images / arrivals[-1], "images_per_cpu_s": images / max(cpu_s, 1e-9)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.epoch_time", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--images", type=int, default=3072, help="images in the epoch (a multiple of 256)")
    ap.add_argument("--cache", default="benchmarks/results/data")
    ap.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    ap.add_argument("--setup-s", type=float, default=0.0,
                    help="seconds this process stays busy (one core, a stand-in for building and compiling "
                         "the model) between the DataLoader's construction and iter(); counted in the epoch")
    ap.add_argument("--out", default="", help="default: benchmarks/results/results_epoch_time[_setup].json")
    args = ap.parse_args(argv)
    from benchmarks import datasets, fresh

    data = datasets.ensure(args.cache, "jpeg", args.images)
    rows = [r for r in ROWS if not args.rows or r[0] in args.rows.split(",")]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in rows}
    child = _CHILD.replace("{setup_s!r}", repr(args.setup_s))
    for r, name, res in fresh.interleaved(child, rows, args.rounds, data, 900):
        s = _summary(res)
        runs[name].append(s)
        print(f"  [{r + 1}/{args.rounds}] {name:<30} first {s['ttfb_s']:.2f} s  third {s['third_s']:.2f} s  "
              f"epoch {s['epoch_s']:.2f} s  {s['images_per_s']:.0f} img/s  "
              f"{s['images_per_cpu_s']:.0f} img/CPU-s", flush=True)
    medians = {name: {k: statistics.median(s[k] for s in ss) for k in ss[0]} for name, ss in runs.items() if ss}
    ref = medians.get("torch w2 (fork)")
    setup = f", {args.setup_s:g} s of model set-up between construction and iter()" if args.setup_s else ""
    print(f"\nW8, {args.images} images, 2 workers, fresh process with jax + torch imported{setup} "
          f"(median of {args.rounds}; the machine may be shared; times from the DataLoader's construction)")
    print(f"  {'row':<30} {'first':>7} {'(iter)':>7} {'third':>7} {'epoch':>7} {'img/s':>7} {'img/CPU-s':>10} "
          f"{'÷ torch':>8}")
    for name, m in medians.items():
        ratio = f"{m['images_per_s'] / ref['images_per_s']:.2f}x" if ref else "-"
        print(f"  {name:<30} {m['ttfb_s']:>6.2f}s {m['ttfb_iter_s']:>6.2f}s {m['third_s']:>6.2f}s "
              f"{m['epoch_s']:>6.2f}s {m['images_per_s']:>7.0f} {m['images_per_cpu_s']:>10.0f} {ratio:>8}")
    out = args.out or f"benchmarks/results/results_epoch_time{'_setup' if args.setup_s else ''}.json"
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".tmp", "w") as f:
        json.dump({"images": args.images, "setup_s": args.setup_s, "runs": runs, "medians": medians}, f, indent=1)
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
