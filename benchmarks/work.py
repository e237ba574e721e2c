"""The functional work of each workload, shared by every loader and bare loop.

Every loader calls these same functions (decode, augment, pad), so the numbers
compare frameworks, not user code. Random operations take an
``np.random.Generator``: thresher and Grain pass their own per-record generator;
PyTorch and the bare loops, which have none, use :class:`RecordRng` (one generator
reseeded per record from a hash of (seed, index), about 1 us per record).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.datasets import W1_IMAGE_BYTES, W3_SHAPE, W6_MAX_LEN

SEED = 0
W1_BATCH, W2_BATCH, W3_BATCH, W6_BATCH, W8_BATCH = 128, 256, 64, 64, 256
W8_SIZE = 224
W3_CROP = 112

_M64 = (1 << 64) - 1


# -- W1: 28x28 uint8 image + int64 label ------------------------------------------------
def w1_decode(record: bytes) -> tuple[np.ndarray, np.int64]:
    image = np.frombuffer(record, np.uint8, W1_IMAGE_BYTES).reshape(28, 28)
    label = np.frombuffer(record, np.int64, 1, W1_IMAGE_BYTES)[0]
    return image, label


def w1_augment(element: tuple[np.ndarray, np.int64], rng: np.random.Generator) -> dict[str, Any]:
    image, label = element
    if rng.random() < 0.5:
        image = image[:, ::-1]
    return {"image": image.astype(np.float32) / np.float32(255), "label": label}


# -- W2: per-record overhead ------------------------------------------------------------
def w2_map(x: int) -> int:
    return x + 1


# -- W3: 128x128x3 images, random crop + flip ---------------------------------------------
def w3_decode(record: bytes) -> np.ndarray:
    return np.frombuffer(record, np.uint8).reshape(W3_SHAPE)


def w3_augment(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    limit = W3_SHAPE[0] - W3_CROP + 1
    y, x = rng.integers(0, limit, size=2).tolist()
    out = image[y:y + W3_CROP, x:x + W3_CROP]
    if rng.random() < 0.5:
        out = out[:, ::-1]
    return out


# -- W6: variable-length int32 tokens, padded to 512 ----------------------------------------
def w6_decode(record: bytes) -> np.ndarray:
    return np.frombuffer(record, np.int32)


def w6_decode_pad(record: bytes) -> np.ndarray:
    tokens = np.frombuffer(record, np.int32)
    out = np.zeros(W6_MAX_LEN, np.int32)
    out[:tokens.size] = tokens
    return out


def w6_pad_batch(token_arrays: list[np.ndarray]) -> np.ndarray:
    out = np.zeros((len(token_arrays), W6_MAX_LEN), np.int32)
    for i, t in enumerate(token_arrays):
        out[i, :t.size] = t
    return out


# -- W8: ImageNet-style JPEG: decode, random-resized crop to 224, flip, uint8 HWC -----------
# The torchvision recipe on Pillow (decode to a PIL image; RandomResizedCrop with bilinear
# resize; horizontal flip), written with thresher.vision's pure functions so every loader
# draws the same crop for the same record rng.
def w8_decode(record: bytes) -> Any:
    from thresher.vision import open_jpeg

    img = open_jpeg(record)
    img.load()  # decode here (full size), as torchvision's PIL loader does
    return img


def w8_augment(img: Any, rng: np.random.Generator) -> np.ndarray:
    from thresher.vision import random_resized_crop_box, resized_crop_flip

    box = random_resized_crop_box(img.size[0], img.size[1], rng)
    return resized_crop_flip(img, box, W8_SIZE, bool(rng.random() < 0.5))


def w8_reduced(record: bytes, rng: np.random.Generator) -> np.ndarray:
    """thresher.vision's one-step helper: reduced-scale decode where the crop allows it, OpenCV."""
    from thresher.vision import decode_random_resized_crop

    return decode_random_resized_crop(record, rng, W8_SIZE, backend="opencv")


def w8_stack(images: list[np.ndarray]) -> np.ndarray:
    return np.stack(images)


# -- per-record seeding for loaders without their own --------------------------------------
def _mix64(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


class RecordRng:
    """One PCG64 generator reseeded per record from (seed, index): cheap and deterministic."""

    def __init__(self, seed: int = SEED) -> None:
        self._key = _mix64(seed)
        self._bitgen = np.random.PCG64(0)
        self._gen = np.random.Generator(self._bitgen)

    def for_record(self, index: int) -> np.random.Generator:
        a = _mix64(self._key ^ index)
        b = _mix64(a)
        self._bitgen.state = {"bit_generator": "PCG64", "state": {"state": (a << 64) | b, "inc": (b << 1) | 1},
                              "has_uint32": 0, "uinteger": 0}
        return self._gen
