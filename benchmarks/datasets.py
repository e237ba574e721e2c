"""Deterministic benchmark datasets, written once and cached.

Each dataset is one ArrayRecord file (group_size 1, written with thresher's writer)
plus a ``<name>.json`` describing it. Content depends only on the name and size, so
every loader reads the same bytes. A cached file is reused when its description
matches; delete the cache directory to rebuild.

Record layouts:
    W1 ("mnist"):  784 bytes of a 28x28 uint8 image, then an int64 label (792 bytes).
    W3 ("images"): 128*128*3 uint8 bytes (49,152 bytes).
    W6 ("tokens"): a variable number (16..512) of int32 tokens in [1, 32000).
    W8 ("jpeg"):   a JPEG (quality 90) of a natural photograph at ImageNet's typical size:
                   a random crop of one of scikit-learn's sample photos (no download),
                   rescaled to 400-500 x 300-375 pixels.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterator

import numpy as np

__all__ = ["ensure", "W1_IMAGE_BYTES", "W1_RECORD_BYTES", "W3_SHAPE", "W6_MAX_LEN", "FORMAT_VERSION"]

FORMAT_VERSION = 1
W1_SHAPE = (28, 28)
W1_IMAGE_BYTES = 28 * 28
W1_RECORD_BYTES = W1_IMAGE_BYTES + 8
W3_SHAPE = (128, 128, 3)
W6_MIN_LEN, W6_MAX_LEN = 16, 512


def _mnist_records(n: int) -> Iterator[bytes]:
    rng = np.random.default_rng(1)
    yy, xx = np.mgrid[0:28, 0:28]
    for start in range(0, n, 1000):
        m = min(1000, n - start)
        # Sparse "strokes": a few bright blobs on black, like digits (compressible, not constant).
        cy = rng.integers(6, 22, size=(m, 3, 1, 1))
        cx = rng.integers(6, 22, size=(m, 3, 1, 1))
        d = (yy - cy) ** 2 + (xx - cx) ** 2
        img = np.clip(255 - 40 * d.min(axis=1), 0, 255).astype(np.uint8)
        labels = rng.integers(0, 10, size=m, dtype=np.int64)
        for i in range(m):
            yield img[i].tobytes() + labels[i].tobytes()


def _image_records(n: int) -> Iterator[bytes]:
    rng = np.random.default_rng(3)
    for _ in range(n):
        yield rng.integers(0, 256, size=W3_SHAPE, dtype=np.uint8).tobytes()


def _token_lengths(n: int) -> np.ndarray:
    return np.random.default_rng(6).integers(W6_MIN_LEN, W6_MAX_LEN + 1, size=n)


def _token_records(n: int) -> Iterator[bytes]:
    lengths = _token_lengths(n)
    rng = np.random.default_rng(7)
    for start in range(0, n, 10_000):
        ls = lengths[start:start + 10_000]
        tokens = rng.integers(1, 32000, size=int(ls.sum()), dtype=np.int32)
        ends = np.cumsum(ls)
        for i, end in enumerate(ends.tolist()):
            yield tokens[end - int(ls[i]):end].tobytes()


def _jpeg_records(n: int) -> Iterator[bytes]:
    import io

    from PIL import Image
    from sklearn.datasets import load_sample_images

    photos = load_sample_images().images  # two 427x640 RGB photographs
    rng = np.random.default_rng(8)
    for i in range(n):
        photo = photos[i % len(photos)]
        ph, pw = photo.shape[:2]
        width, height = int(rng.integers(400, 501)), int(rng.integers(300, 376))
        # A crop with the target's aspect, 55-100% of the photo's largest such crop, rescaled.
        fit = min(pw / width, ph / height) * float(rng.uniform(0.55, 1.0))
        cw, ch = int(width * fit), int(height * fit)
        x, y = int(rng.integers(0, pw - cw + 1)), int(rng.integers(0, ph - ch + 1))
        img = Image.fromarray(photo[y:y + ch, x:x + cw]).resize((width, height), Image.BICUBIC)
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=90)
        yield buf.getvalue()


_KINDS = {
    "mnist": (_mnist_records, lambda n: n * W1_RECORD_BYTES),
    "images": (_image_records, lambda n: n * int(np.prod(W3_SHAPE))),
    "tokens": (_token_records, lambda n: int(_token_lengths(n).sum()) * 4),
    "jpeg": (_jpeg_records, lambda n: 0),  # payload_bytes: the file's size, set in ensure()
}


def ensure(cache_dir: str, kind: str, num_records: int) -> dict[str, Any]:
    """Returns the description of dataset ``kind`` with ``num_records`` records, writing it if needed.

    The description has ``path``, ``num_records``, ``payload_bytes`` (the sum of the
    record sizes) and ``kind``.
    """
    from thresher.sources import write_array_record

    records, payload = _KINDS[kind]
    os.makedirs(cache_dir, exist_ok=True)
    stem = os.path.join(os.path.abspath(cache_dir), f"{kind}_{num_records}")
    path, meta_path = stem + ".array_record", stem + ".json"
    meta = {"kind": kind, "num_records": int(num_records), "path": path, "format": FORMAT_VERSION}
    if os.path.exists(meta_path) and os.path.exists(path):
        with open(meta_path) as f:
            old = json.load(f)
        if all(old.get(k) == v for k, v in meta.items()):
            return old  # type: ignore[no-any-return]
    written = write_array_record(path, records(num_records), group_size=1)
    assert written == num_records, (written, num_records)
    meta["file_bytes"] = os.path.getsize(path)
    meta["payload_bytes"] = payload(num_records) or meta["file_bytes"]
    with open(meta_path + ".tmp", "w") as f:
        json.dump(meta, f)
    os.replace(meta_path + ".tmp", meta_path)
    return meta
