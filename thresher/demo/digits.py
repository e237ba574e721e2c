"""The demo's dataset: scikit-learn's bundled 8x8 digits written to ArrayRecord, and its operations.

Shared by the NumPy demo (:mod:`thresher.demo`) and the JAX demo (:mod:`thresher.demo.jax_demo`).

Example:
    >>> import numpy as np
    >>> from thresher.demo.digits import decode, normalise
    >>> x = normalise(decode(bytes(range(64)) + np.int64(3).tobytes()))
    >>> x["image"].shape, int(x["label"])
    ((64,), 3)
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

import thresher as th
from thresher._optional import require

IMAGE_BYTES = 64


def write_digits(directory: str) -> tuple[str, str]:
    """Writes the digits dataset as train/test ArrayRecord files; returns their paths."""
    digits = require("sklearn.datasets", "the demo (its bundled digits)", extra="demo").load_digits()
    images = digits.images.astype(np.uint8)  # values 0..16
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(labels))  # fixed split
    test, train = order[:297], order[297:]
    paths = []
    for name, idx in (("train", train), ("test", test)):
        path = os.path.join(directory, f"digits-{name}.array_record")
        th.sources.write_array_record(path, (images[i].tobytes() + labels[i].tobytes() for i in idx))
        paths.append(path)
    return paths[0], paths[1]


def decode(record: bytes) -> dict[str, Any]:
    raw = np.frombuffer(record, dtype=np.uint8)
    return {"image": raw[:IMAGE_BYTES].reshape(8, 8), "label": raw[IMAGE_BYTES:].view(np.int64)[0]}


def random_noise(example: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """Jitters every pixel's intensity by -1, 0 or +1 (seeded per record)."""
    noise = rng.integers(-1, 2, size=example["image"].shape)
    image = np.clip(example["image"].astype(np.int16) + noise, 0, 16).astype(np.uint8)
    return {"image": image, "label": example["label"]}


def normalise(example: dict[str, Any]) -> dict[str, Any]:
    return {"image": example["image"].reshape(-1).astype(np.float32) / 16.0, "label": example["label"]}


def make_loader(path: str, *, epochs: int | None, seed: int, batch_size: int, workers: int,
                train: bool = True) -> th.DataLoader:
    source = th.sources.ArrayRecordSource(path)
    sampler = th.IndexSampler(len(source), shuffle=train, seed=seed, num_epochs=epochs)
    ops: list[Any] = [decode] + ([th.RandomMapTransform(random_noise)] if train else [])
    ops += [normalise, th.Batch(batch_size, drop_remainder=train)]
    return th.DataLoader(source, sampler, ops, worker_count=workers)
