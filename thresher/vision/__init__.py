"""ImageNet-style JPEG augmentation: random-resized crop and flip, with reduced-scale decode.

Training on ImageNet-like data spends most of its input time decoding JPEGs at full size
only to throw most pixels away: a random-resized crop keeps 8-100% of the area and
scales it to 224x224. A JPEG can be decoded directly at 1/2, 1/4 or 1/8 of its size (the
inverse DCT is simply computed at a lower resolution), which costs a fraction of a full
decode. :func:`decode_random_resized_crop` picks the crop on the full-size geometry
first (from the JPEG header, without decoding), then decodes at the smallest scale that
still gives the crop at least ``size`` pixels in both directions, so the final resize
only ever shrinks.

Determinism: the crop and flip are drawn from the ``rng`` argument in a fixed order (in
thresher, the per-record generator of a ``RandomMapTransform``, a function of the
record's global position), and decoding is deterministic for a given Pillow/libjpeg
build; so the output is a pure function of (record bytes, position, seed), whatever the
worker count. Reduced-scale pixels differ slightly from a full decode followed by the
same resize (the downscaling happens in the DCT instead of the bilinear filter): the
two modes are different, each reproducible.

Example:
    >>> import io
    >>> import numpy as np
    >>> from PIL import Image
    >>> from thresher.vision import decode_random_resized_crop
    >>> buf = io.BytesIO()
    >>> Image.fromarray(np.random.default_rng(0).integers(0, 255, (375, 500, 3), np.uint8)).save(buf, "JPEG")
    >>> out = decode_random_resized_crop(buf.getvalue(), np.random.default_rng(7), size=224)
    >>> out.shape, out.dtype.name
    ((224, 224, 3), 'uint8')
    >>> again = decode_random_resized_crop(buf.getvalue(), np.random.default_rng(7), size=224)
    >>> bool(np.array_equal(out, again))
    True
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np

from thresher._optional import require
from thresher._validate import check_count
from thresher.errors import ConfigError, TransformError

__all__ = ["decode_random_resized_crop", "open_jpeg", "random_resized_crop_box", "resized_crop_flip"]

SCALE = (0.08, 1.0)
RATIO = (3.0 / 4.0, 4.0 / 3.0)
_ATTEMPTS = 10


def _pil() -> Any:
    return require("PIL.Image", "thresher.vision")


def random_resized_crop_box(width: int, height: int, rng: np.random.Generator,
                            scale: tuple[float, float] = SCALE,
                            ratio: tuple[float, float] = RATIO) -> tuple[int, int, int, int]:
    """A random crop (left, top, crop_width, crop_height) of a ``width`` x ``height`` image.

    The Inception / torchvision ``RandomResizedCrop`` rule: an area fraction uniform in
    ``scale`` and a log-uniform aspect ratio in ``ratio``, up to 10 attempts, then a
    centre crop clamped to ``ratio``. Every attempt draws 4 numbers from ``rng``.

    Example:
        >>> import numpy as np
        >>> from thresher.vision import random_resized_crop_box
        >>> left, top, w, h = random_resized_crop_box(500, 375, np.random.default_rng(0))
        >>> 0 <= left and left + w <= 500 and 0 <= top and top + h <= 375
        True
    """
    if width < 1 or height < 1:
        raise ConfigError(f"random_resized_crop_box needs a non-empty image, got {width}x{height}")
    if not (0 < scale[0] <= scale[1] <= 1) or not (0 < ratio[0] <= ratio[1]):
        raise ConfigError(f"scale must satisfy 0 < lo <= hi <= 1 and ratio 0 < lo <= hi; got scale={scale}, "
                          f"ratio={ratio}")
    area = width * height
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(_ATTEMPTS):
        u = rng.random(4)
        target = area * (scale[0] + (scale[1] - scale[0]) * float(u[0]))
        aspect = math.exp(log_lo + (log_hi - log_lo) * float(u[1]))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            left = min(int(float(u[2]) * (width - w + 1)), width - w)
            top = min(int(float(u[3]) * (height - h + 1)), height - h)
            return left, top, w, h
    aspect = width / height
    if aspect < ratio[0]:
        w, h = width, round(width / ratio[0])
    elif aspect > ratio[1]:
        w, h = round(height * ratio[1]), height
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def open_jpeg(data: bytes) -> Any:
    """A lazily decoded Pillow image of ``data`` (only the header is read).

    Example:
        >>> import io
        >>> from PIL import Image
        >>> from thresher.vision import open_jpeg
        >>> buf = io.BytesIO()
        >>> Image.new("RGB", (40, 30)).save(buf, "JPEG")
        >>> open_jpeg(buf.getvalue()).size
        (40, 30)
    """
    image = _pil()
    try:
        return image.open(io.BytesIO(data))
    except Exception as e:  # Pillow raises UnidentifiedImageError, OSError, ValueError...
        raise TransformError(f"cannot read an image from {len(data)} bytes starting {bytes(data[:8])!r}: "
                             f"{type(e).__name__}: {e}") from e


def resized_crop_flip(img: Any, box: tuple[int, int, int, int], size: int, flip: bool) -> np.ndarray:
    """Crops ``box`` (left, top, w, h) of a Pillow image, resizes to ``size`` x ``size`` (bilinear), flips.

    Returns uint8 HWC RGB (a flipped view when ``flip``).

    Example:
        >>> from PIL import Image
        >>> from thresher.vision import resized_crop_flip
        >>> resized_crop_flip(Image.new("RGB", (64, 48)), (8, 8, 32, 32), 16, True).shape
        (16, 16, 3)
    """
    image = _pil()
    left, top, w, h = box
    if img.mode != "RGB":
        img = img.convert("RGB")
    out = np.asarray(img.resize((size, size), image.BILINEAR, box=(left, top, left + w, top + h)))
    return out[:, ::-1] if flip else out


def _reduction(width: int, height: int, w: int, h: int, size: int) -> int:
    """The largest k in (1, 2, 4, 8) with the crop still >= ``size`` pixels both ways at 1/k scale."""
    k = 1
    while k < 8 and min(w, h) >= 2 * k * size:
        k *= 2
    return k


def _decode_opencv(data: bytes, k: int) -> np.ndarray:
    cv2 = require("cv2", "backend='opencv'")
    flags = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4,
             8: cv2.IMREAD_REDUCED_COLOR_8}[k]
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    if bgr is None:
        raise TransformError(f"OpenCV cannot decode an image from {len(data)} bytes starting {bytes(data[:8])!r}")
    return bgr


def _crop_resize_opencv(bgr: np.ndarray, box: tuple[float, float, float, float], size: int) -> np.ndarray:
    import cv2

    left, top, w, h = (round(v) for v in box)
    crop = bgr[top:top + max(h, 1), left:left + max(w, 1)]
    out = cv2.resize(crop, (size, size), interpolation=cv2.INTER_LINEAR)
    return cv2.cvtColor(out, cv2.COLOR_BGR2RGB)


def decode_random_resized_crop(data: bytes, rng: np.random.Generator, size: int = 224,
                               scale: tuple[float, float] = SCALE, ratio: tuple[float, float] = RATIO,
                               flip_probability: float = 0.5, reduced: bool = True,
                               backend: str = "pillow") -> np.ndarray:
    """Decodes a JPEG, random-resized-crops it to ``size`` x ``size`` and flips it: uint8 HWC RGB.

    The crop is drawn on the full-size geometry (:func:`random_resized_crop_box`), then
    one more number for the flip. With ``reduced`` (the default) the JPEG is decoded at
    the smallest of 1/1, 1/2, 1/4, 1/8 scale that keeps at least ``size`` pixels of the
    crop in each direction (Pillow's ``draft``, OpenCV's ``IMREAD_REDUCED_COLOR_*``);
    ``reduced=False`` decodes at full size. ``backend`` is "pillow" (with
    ``reduced=False`` the result equals :func:`resized_crop_flip` on the fully decoded
    image with the same draws) or "opencv" (a faster decoder and bilinear resize; pixels
    differ from Pillow's by a few levels). Use it as a ``RandomMapTransform`` (thresher
    passes a per-record generator).

    Example:
        >>> import io
        >>> import numpy as np
        >>> from PIL import Image
        >>> import thresher as th
        >>> from thresher.vision import decode_random_resized_crop
        >>> def jpeg(i):
        ...     buf = io.BytesIO()
        ...     Image.new("RGB", (480, 360), (i, 100, 200)).save(buf, "JPEG", quality=90)
        ...     return buf.getvalue()
        >>> source = th.sources.InMemoryDataSource([jpeg(i) for i in range(8)])
        >>> loader = th.DataLoader(source, th.IndexSampler(8, shuffle=True, seed=0),
        ...                        [th.RandomMapTransform(decode_random_resized_crop), th.Batch(4)])
        >>> next(iter(loader)).shape
        (4, 224, 224, 3)
    """
    check_count(size, "size", minimum=1)
    if backend not in ("pillow", "opencv"):
        raise ConfigError(f"backend must be 'pillow' or 'opencv', got {backend!r}")
    img = open_jpeg(data)
    width, height = img.size
    left, top, w, h = random_resized_crop_box(width, height, rng, scale, ratio)
    flip = bool(rng.random() < flip_probability)
    k = _reduction(width, height, w, h, size) if reduced and img.format == "JPEG" else 1
    if backend == "opencv":
        bgr = _decode_opencv(data, k)
        sx, sy = bgr.shape[1] / width, bgr.shape[0] / height
        out = _crop_resize_opencv(bgr, (left * sx, top * sy, w * sx, h * sy), size)
        return out[:, ::-1] if flip else out
    if k > 1:
        img.draft("RGB", (math.ceil(width / k), math.ceil(height / k)))
        sx, sy = img.size[0] / width, img.size[1] / height
        img = img.convert("RGB")
        out = np.asarray(img.resize((size, size), _pil().BILINEAR,
                                    box=(left * sx, top * sy, (left + w) * sx, (top + h) * sy)))
        return out[:, ::-1] if flip else out
    return resized_crop_flip(img, (left, top, w, h), size, flip)
