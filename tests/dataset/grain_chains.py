"""Chains written the same way for thresher and for Grain (the oracle), by name.

A fresh process builds them by name (``build_thresher``), which is how the tests
check resuming in a new process.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

import thresher as th

EPOCHS = 3


def draw(x: Any, rng: np.random.Generator) -> tuple[int, int]:
    """The record and one draw from a wide range (two draws agree by chance ~1e-6)."""
    return int(x), int(rng.integers(10**6))


def draw10(x: Any, rng: np.random.Generator) -> tuple[int, int]:
    """The record and one draw from 0..9 (for distribution checks)."""
    return int(x), int(rng.integers(10))


def epoch_length(name: str, n: int) -> int:
    return n - 2 if name == "slice" else n


def _chain(ds: Any, name: str, n: int, fn: Callable[..., Any], reseed: bool) -> Any:
    """The same chain on a thresher Dataset or a Grain MapDataset (their methods agree)."""
    ds = ds.random_map(fn, seed=3)
    if name == "shuffle":
        ds = ds.shuffle(seed=1)
    elif name == "slice":
        ds = ds.slice(slice(1, n - 1)) if not isinstance(ds, th.Dataset) else ds[1:n - 1]
    return ds.repeat(EPOCHS, reseed_each_epoch=reseed)


def build_thresher(name: str, n: int, *, fn: str = "draw", reseed: bool = True, workers: int = 0) -> th.Dataset:
    ds = _chain(th.Dataset.range(n), name, n, FNS[fn], reseed)
    return ds.prefetch(worker_count=workers) if workers else ds


def build_grain(name: str, n: int, *, fn: str = "draw", reseed: bool = True) -> Any:
    import grain

    return _chain(grain.MapDataset.range(n), name, n, FNS[fn], reseed)


FNS: dict[str, Callable[..., Any]] = {"draw": draw, "draw10": draw10}
CHAINS = ["shuffle", "slice", "plain"]
