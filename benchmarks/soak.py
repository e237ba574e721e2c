"""Soak test (not run in CI): W1 with 2 workers for a time limit, watching for leaks.

``python benchmarks/soak.py --minutes 10`` iterates the W1 pipeline (60,000 MNIST-sized
records from ArrayRecord, decode, random flip, Batch(128)) endlessly with ``worker_count=2``
and a simulated train step, and every ``--interval`` seconds records the RSS of every process
(the training process, the fork server, each worker), the open descriptors of each, the
entries of /dev/shm and the shared-memory mappings of the training process. It writes
``soak_w1.json`` and a plot ``soak_w1.png`` (into ``--out``, default benchmarks/snapshots/)
and prints whether each series is flat after the warm-up (the first 20% of the run): the
growth from the median of the second fifth to the median of the last fifth.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run as a script from anywhere in the repository


def _sample(t: float, batches: int) -> dict[str, Any]:
    import psutil

    me = psutil.Process()
    procs: dict[str, dict[str, float]] = {}
    for p in [me] + me.children(recursive=True):
        try:
            with p.oneshot():
                if p.pid == me.pid:
                    name = "train loop"
                elif "forkserver" in " ".join(p.cmdline()) and p.ppid() == me.pid:
                    name = "fork server"  # the workers are its forks: same command line, its children
                elif "resource_tracker" in " ".join(p.cmdline()):
                    name = "resource tracker"
                else:
                    name = f"worker pid {p.pid}"
                procs[name] = {"rss_mib": p.memory_info().rss / 2**20, "fds": p.num_fds()}
        except psutil.Error:
            pass
    shm = os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []
    with open("/proc/self/maps") as f:
        mappings = sum("thresher-result" in line for line in f)
    return {"t": t, "batches": batches, "procs": procs, "dev_shm": len(shm),
            "dev_shm_thresher": sum("thresher" in n for n in shm), "mappings": mappings}


def _series(samples: list[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    workers = sorted({n for s in samples for n in s["procs"] if n.startswith("worker")})
    labels = {w: f"worker {i}" for i, w in enumerate(workers)}
    for s in samples:
        for name, v in s["procs"].items():
            label = labels.get(name, name)
            out.setdefault(f"RSS {label} (MiB)", []).append((s["t"], v["rss_mib"]))
            out.setdefault(f"fds {label}", []).append((s["t"], v["fds"]))
        out.setdefault("/dev/shm entries (all users)", []).append((s["t"], s["dev_shm"]))
        out.setdefault("/dev/shm entries named thresher", []).append((s["t"], s["dev_shm_thresher"]))
        out.setdefault("shared-memory mappings of the train loop", []).append((s["t"], s["mappings"]))
    return out


def flatness(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(median of the second fifth, median of the last fifth) of a series's values."""
    values = [v for _, v in points]
    n = len(values)
    a = values[n // 5: max(n // 5 + 1, 2 * n // 5)]
    b = values[4 * n // 5:] or values[-1:]
    return statistics.median(a), statistics.median(b)


def _plot(samples: list[dict[str, Any]], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = _series(samples)
    fig, axes = plt.subplots(3, 1, figsize=(10, 10), sharex=True)
    for name, pts in series.items():
        ax = axes[0] if name.startswith("RSS") else axes[1] if name.startswith("fds") else axes[2]
        ax.plot([p[0] / 60 for p in pts], [p[1] for p in pts], label=name)
    axes[0].set_ylabel("RSS (MiB)")
    axes[1].set_ylabel("open descriptors")
    axes[2].set_ylabel("count")
    axes[2].set_xlabel("minutes")
    for ax in axes:
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/soak.py", description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="how long to run (default 10)")
    ap.add_argument("--batches", type=int, default=10**6, help="stop after this many batches (default 10**6)")
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between samples (default 10)")
    ap.add_argument("--records", type=int, default=60_000, help="W1 dataset size (default 60,000)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--step-ms", type=float, default=2.0, help="simulated train step per batch (default 2 ms)")
    ap.add_argument("--out", default=os.path.join(HERE, "snapshots"))
    ap.add_argument("--cache", default=os.path.join(HERE, "results", "data"))
    args = ap.parse_args(argv)

    import thresher as th
    from benchmarks import datasets, work

    data = datasets.ensure(args.cache, "mnist", args.records)
    source = th.sources.ArrayRecordSource(data["path"])
    sampler = th.IndexSampler(len(source), shuffle=True, seed=work.SEED, num_epochs=None)
    ops = [work.w1_decode, th.RandomMapTransform(work.w1_augment), th.Batch(work.W1_BATCH, drop_remainder=True)]
    loader = th.DataLoader(source, sampler, ops, worker_count=args.workers)
    samples: list[dict[str, Any]] = []
    start = time.monotonic()
    deadline = start + args.minutes * 60
    next_sample, batches = start, 0
    with iter(loader) as it:
        for batch in it:
            batches += 1
            if args.step_ms:
                time.sleep(args.step_ms / 1000)
            now = time.monotonic()
            if now >= next_sample:
                samples.append(_sample(now - start, batches))
                next_sample += args.interval
            if now >= deadline or batches >= args.batches:
                break
    samples.append(_sample(time.monotonic() - start, batches))
    os.makedirs(args.out, exist_ok=True)
    title = (f"soak: W1, worker_count={args.workers}, {batches:,} batches in "
             f"{samples[-1]['t'] / 60:.1f} min (sampled every {args.interval:g} s)")
    with open(os.path.join(args.out, "soak_w1.json"), "w") as f:
        json.dump({"title": title, "args": vars(args), "samples": samples}, f, indent=1)
    _plot(samples, os.path.join(args.out, "soak_w1.png"), title)
    print(title)
    print(f"{'series':45} {'after warm-up':>14} {'at the end':>11} {'growth':>9}")
    for name, pts in _series(samples).items():
        a, b = flatness(pts)
        print(f"{name:45} {a:14.1f} {b:11.1f} {b - a:+9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
