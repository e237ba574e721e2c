"""The end-to-end demo: a real dataset in ArrayRecord, training through thresher, exact resume.

Run it with ``python -m thresher.demo`` (or ``thresher demo``). It

1. writes scikit-learn's bundled 8x8 digits (1,797 images, no download) to ArrayRecord,
2. trains a small NumPy MLP on them through ``thresher.DataLoader`` for a few epochs
   (global shuffle, a seeded random-noise augmentation, batches of 64),
3. saves the iterator state mid-epoch as JSON, restores it in a fresh iterator and
   checks that the next batches are bit-identical to the uninterrupted run,
4. prints test accuracy and records/s.

``--jax`` trains a JAX MLP through ``thresher.jax`` instead, with Orbax checkpoints;
``--processes 2`` runs it as two JAX processes on localhost (see ``thresher.demo.jax_demo``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from thresher.demo.digits import IMAGE_BYTES, decode, make_loader, normalise, random_noise, write_digits

__all__ = ["IMAGE_BYTES", "MLP", "decode", "main", "make_loader", "normalise", "random_noise", "write_digits"]


class MLP:
    """A two-layer perceptron trained with plain SGD in NumPy."""

    def __init__(self, hidden: int = 64, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.w1 = rng.normal(0, np.sqrt(2 / 64), (64, hidden)).astype(np.float32)
        self.b1 = np.zeros(hidden, np.float32)
        self.w2 = rng.normal(0, np.sqrt(1 / hidden), (hidden, 10)).astype(np.float32)
        self.b2 = np.zeros(10, np.float32)

    def logits(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        h = np.maximum(x @ self.w1 + self.b1, 0)
        return h, h @ self.w2 + self.b2

    def step(self, x: np.ndarray, y: np.ndarray, lr: float) -> float:
        h, z = self.logits(x)
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        n = len(y)
        loss = float(-np.log(p[np.arange(n), y] + 1e-9).mean())
        dz = p
        dz[np.arange(n), y] -= 1
        dz /= n
        dh = (dz @ self.w2.T) * (h > 0)
        self.w2 -= lr * h.T @ dz
        self.b2 -= lr * dz.sum(0)
        self.w1 -= lr * x.T @ dh
        self.b1 -= lr * dh.sum(0)
        return loss

    def accuracy(self, batches: Any) -> float:
        right = total = 0
        for b in batches:
            right += int((self.logits(b["image"])[1].argmax(1) == b["label"]).sum())
            total += len(b["label"])
        return right / max(total, 1)


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return all(np.array_equal(a[k], b[k]) for k in a)


def main(argv: Sequence[str] | None = None, prog: str = "thresher demo") -> int:
    """Runs the demo with command-line arguments ``argv``; ``prog`` is the command its help names."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None,
                        help="where to write the ArrayRecord files and checkpoints (kept); default: a "
                             "temporary directory, removed at the end")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary directory and print where it is")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=0, help="worker processes (0: in process)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--lr", type=float, default=0.3)
    parser.add_argument("--jax", action="store_true",
                        help="train a JAX MLP through thresher.jax (global batches, device prefetch, Orbax)")
    parser.add_argument("--processes", type=int, default=1,
                        help="run the JAX demo as this many JAX processes on localhost (implies --jax)")
    parser.add_argument("--restore-processes", type=int, default=None,
                        help="restore the JAX demo's checkpoint on this many processes (default: --processes)")
    args = parser.parse_args(argv)
    temporary = args.data_dir is None
    args.data_dir = args.data_dir or tempfile.mkdtemp(prefix="thresher-demo-")
    os.makedirs(args.data_dir, exist_ok=True)
    try:
        if args.jax or args.processes > 1 or args.restore_processes:
            from thresher.demo.jax_demo import run

            return run(args)
        return _run_numpy(args)
    finally:
        if temporary and not args.keep:
            shutil.rmtree(args.data_dir, ignore_errors=True)
            print(f"removed {args.data_dir} (--keep keeps it)")
        else:
            print(f"the dataset and checkpoints are in {args.data_dir}")


def _run_numpy(args: argparse.Namespace) -> int:
    data_dir = args.data_dir
    train_path, test_path = write_digits(data_dir)
    print(f"wrote the digits dataset to {data_dir} (1500 train / 297 test records, ArrayRecord)")

    loader = make_loader(train_path, epochs=args.epochs, seed=args.seed, batch_size=args.batch_size,
                         workers=args.workers)
    steps_per_epoch = len(loader) // args.epochs
    checkpoint_step = steps_per_epoch * (args.epochs // 2) + steps_per_epoch // 2  # mid-epoch
    model = MLP(seed=args.seed)
    saved: dict[str, Any] | None = None
    reference: list[dict[str, np.ndarray]] = []
    records, t0 = 0, time.perf_counter()
    with iter(loader) as it:
        for step, batch in enumerate(it, start=1):
            loss = model.step(batch["image"], batch["label"], args.lr)
            records += len(batch["label"])
            if step % steps_per_epoch == 0:
                print(f"epoch {step // steps_per_epoch}: loss {loss:.3f}")
            if step == checkpoint_step:
                saved = json.loads(json.dumps(it.get_state()))
                print(f"step {step}: saved the iterator state mid-epoch ({len(json.dumps(saved))} bytes of JSON, "
                      f"position {saved['position']})")
            elif saved is not None and len(reference) < 5:
                reference.append(batch)
    elapsed = time.perf_counter() - t0
    test_loader = make_loader(test_path, epochs=1, seed=args.seed, batch_size=args.batch_size, workers=0,
                              train=False)
    accuracy = model.accuracy(test_loader)

    assert saved is not None
    with iter(make_loader(train_path, epochs=args.epochs, seed=args.seed, batch_size=args.batch_size,
                          workers=args.workers)) as resumed:
        resumed.set_state(saved)
        same = all(_same(next(resumed), want) for want in reference)
    print(f"restored the state in a fresh iterator: the next {len(reference)} batches are "
          f"{'bit-identical' if same else 'DIFFERENT'}")
    print(f"test accuracy {accuracy:.3f}; {records / elapsed:,.0f} records/s through thresher "
          f"(worker_count={args.workers}, training included)")
    return 0 if same else 1

