"""How good is a BlockShuffle? Shuffle quality against bytes fetched, on a class-sorted dataset.

The worst case for a locality-aware shuffle is a dataset sorted by class (an image folder
is). This script writes one: scikit-learn's 8x8 digits (the demo's data, no download):
``--records`` images drawn at random from the demo's training split, each with a seeded
one-level pixel jitter, sorted by label (in random order within a label, as files in an
image folder), in one ArrayRecord file with ``--group-size`` records per chunk. For each
shuffle (none, full, BlockShuffle at several settings) it trains the demo's NumPy MLP for
``--steps`` batches of 64 read through the byte-range reader with a chunk cache of a
quarter of the decoded records (the dataset is 4x the cache), and reports:

- **TV**: the mean, over batches, of the total-variation distance between the batch's
  label distribution and the dataset's (0: every batch has the dataset's class mix);
- **accuracy**: the demo model's test accuracy (297 held-out images) after the steps;
- **bytes/record** and **requests/record**: what the reader fetched per record read.

Medians over ``--seeds`` seeds; each seed runs every shuffle, interleaved. A PNG plots
quality against bytes fetched per record (``--plot``). The machine is shared with other
work: the figures here are counts and model quality, not timings, and do not depend on it.

    python -m benchmarks.shuffle_quality                      # ~15 min on 2 busy cores
    python -m benchmarks.shuffle_quality --records 40000 --steps 300 --seeds 1   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np

import thresher as th
from thresher.demo import IMAGE_BYTES, MLP, decode, normalise
from thresher.sources.remote import RemoteReadOptions

BATCH = 64
SHUFFLES: dict[str, Any] = {
    "none": False,
    "full": True,
    "block 4096x16": th.BlockShuffle(4096, 16),
    "block 4096x4": th.BlockShuffle(4096, 4),
    "block 1024x64": th.BlockShuffle(1024, 64),
    "block 512x128 (default)": th.BlockShuffle(512, 128),
    "block 256x256": th.BlockShuffle(256, 256),
}


def write_sorted(directory: str, records: int, group_size: int) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """The class-sorted training file, its labels, and the demo's test images and labels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images, labels = digits.images.astype(np.uint8), digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(labels))  # the demo's split
    test, train = order[:297], order[297:]
    rng = np.random.default_rng(1)
    pick = rng.integers(0, len(train), records)  # random images, in random order within each class:
    pick = train[pick[np.argsort(labels[train][pick], kind="stable")]]  # sorted by class, as an image folder
    jitter = rng.integers(-1, 2, size=(records, 8, 8))
    out = np.clip(images[pick].astype(np.int16) + jitter, 0, 16).astype(np.uint8)
    path = os.path.join(directory, f"by-class-{records}-{group_size}.array_record")
    if not os.path.exists(path):
        th.sources.write_array_record(path, (out[i].tobytes() + labels[pick[i]].tobytes() for i in range(records)),
                                      group_size=group_size)
    test_images = images[test].reshape(len(test), -1).astype(np.float32) / 16.0
    return path, labels[pick], test_images, labels[test]


def run(path: str, shuffle: Any, seed: int, steps: int, cache_bytes: int, dataset_mix: np.ndarray,
        test: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
    """Trains ``steps`` batches through one shuffle; returns its TV, accuracy and fetch counts."""
    src = th.sources.ArrayRecordSource(path, reader="ranges", read_options=RemoteReadOptions(
        cache_bytes=cache_bytes, fill_cache=False))
    sampler = th.IndexSampler(len(src), shuffle=shuffle, seed=seed if shuffle is not False else None,
                              num_epochs=None)
    loader = th.DataLoader(src, sampler, [decode, normalise, th.Batch(BATCH, drop_remainder=True)])
    model = MLP(seed=seed)
    tv = []
    started = time.perf_counter()
    it = iter(loader)
    for _ in range(steps):
        b = next(it)
        mix = np.bincount(b["label"], minlength=10) / BATCH
        tv.append(0.5 * float(np.abs(mix - dataset_mix).sum()))
        model.step(b["image"], b["label"], lr=0.3)
    seconds = time.perf_counter() - started
    it.close()
    images, labels = test
    accuracy = float((model.logits(images)[1].argmax(1) == labels).mean())
    r = src._ranges
    assert r is not None
    n = steps * BATCH
    return {"tv": float(np.mean(tv)), "accuracy": accuracy, "bytes_per_record": r.bytes_read / n,
            "requests_per_record": r.requests / n, "seconds": seconds}


def plot(results: dict[str, dict[str, float]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, r in results.items():
        x = max(r["bytes_per_record"], 1.0)
        axes[0].scatter(x, r["tv"])
        axes[0].annotate(name, (x, r["tv"]), fontsize=7, xytext=(4, 2), textcoords="offset points")
        axes[1].scatter(x, 100 * r["accuracy"])
        axes[1].annotate(name, (x, 100 * r["accuracy"]), fontsize=7, xytext=(4, 2), textcoords="offset points")
    axes[0].set_ylabel("mean per-batch label TV distance (lower: better)")
    axes[1].set_ylabel("test accuracy after the steps, % (higher: better)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("bytes fetched per record read (log)")
        ax.grid(True, alpha=0.3)
    fig.suptitle("Shuffle quality against bytes fetched, class-sorted digits (dataset = 4x cache)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=600_000)
    parser.add_argument("--group-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--only", default=None, help="comma-separated shuffle names (default: all)")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--plot", default=None, help="PNG path (default: OUT/shuffle_quality.png)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    data = os.path.join(args.out, "data")
    os.makedirs(data, exist_ok=True)
    path, labels, test_x, test_y = write_sorted(data, args.records, args.group_size)
    mix = np.bincount(labels, minlength=10) / len(labels)
    cache = args.records * (IMAGE_BYTES + 8 + 8) // 4  # the decoded dataset (records + 8 B per bound) is 4x the cache
    names = [n for n in SHUFFLES if args.only is None or n in args.only.split(",")]
    runs: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    for seed in range(args.seeds):
        for name in names:
            runs[name].append(run(path, SHUFFLES[name], seed, args.steps, cache, mix, (test_x, test_y)))
    medians = {n: {k: float(np.median([r[k] for r in rs])) for k in rs[0]} for n, rs in runs.items()}
    full = medians.get("full")
    print(f"{args.records} records sorted by class, {IMAGE_BYTES + 8} B each, group_size {args.group_size}, cache "
          f"{cache / 2**20:.1f} MiB (1/4 of the decoded records), {args.steps} steps of {BATCH}, "
          f"median of {args.seeds} seeds")
    print(f"{'shuffle':26} {'TV':>6} {'TV/full':>8} {'acc %':>6} {'acc-full':>8} {'B/record':>9} {'req/record':>10}")
    for n, m in medians.items():
        ratio = f"{m['tv'] / full['tv']:.2f}" if full else "-"
        delta = f"{100 * (m['accuracy'] - full['accuracy']):+.1f}" if full else "-"
        print(f"{n:26} {m['tv']:6.3f} {ratio:>8} {100 * m['accuracy']:6.1f} {delta:>8} {m['bytes_per_record']:9.0f} "
              f"{m['requests_per_record']:10.4f}")
    with open(os.path.join(args.out, "shuffle_quality.json"), "w") as f:
        json.dump({"args": vars(args), "runs": runs, "medians": medians}, f, indent=1)
    plot(medians, args.plot or os.path.join(args.out, "shuffle_quality.png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
