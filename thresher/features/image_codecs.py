"""PNG/JPEG encode and decode through OpenCV or Pillow, imported on first use.

Decoding prefers OpenCV (faster) and falls back to Pillow; encoding prefers Pillow, so
that datasets written on machines with and without OpenCV have the same bytes. Both
give RGB(A) channel order. PNG is lossless, so both decoders give the same pixels; JPEG
pixels may differ by a few levels between decoder libraries.

Example:
    >>> import numpy as np
    >>> from thresher.features.image_codecs import decode_image, encode_image
    >>> img = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    >>> np.array_equal(decode_image(encode_image(img, "png"), 3), img)
    True
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from thresher._optional import available, require
from thresher.errors import ConfigError, FeatureError

__all__ = ["available_backends", "decode_image", "encode_image"]

BACKENDS = ("cv2", "pil")
JPEG_QUALITY = 95
_PIL_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def _import(name: str) -> Any:
    module = "cv2" if name == "cv2" else "PIL.Image"
    return require(module, "encoded images") if available(module) else None


def available_backends() -> list[str]:
    """The image libraries that can be imported here, in preference order for decoding."""
    return [b for b in BACKENDS if _import(b) is not None]


def _pick(backend: str | None, order: tuple[str, ...]) -> str:
    if backend is not None:
        if backend not in BACKENDS:
            raise ConfigError(f"image backend must be one of {BACKENDS}, got {backend!r}")
        require("cv2" if backend == "cv2" else "PIL.Image", f"image backend {backend!r}")
        return backend
    for b in order:
        if _import(b) is not None:
            return b
    require("PIL.Image", "encoded images (OpenCV or Pillow)")  # raises: Pillow is missing
    raise AssertionError("unreachable")  # pragma: no cover


def decode_image(data: bytes, channels: int, backend: str | None = None) -> np.ndarray:
    """Decodes PNG/JPEG bytes to a ``(height, width, channels)`` uint8 RGB(A) array."""
    b = _pick(backend, ("cv2", "pil"))
    if b == "cv2":
        cv2 = _import("cv2")
        flag = {1: cv2.IMREAD_GRAYSCALE, 3: cv2.IMREAD_COLOR, 4: cv2.IMREAD_UNCHANGED}[channels]
        img = cv2.imdecode(np.frombuffer(data, np.uint8), flag | cv2.IMREAD_IGNORE_ORIENTATION)
        if img is None:
            raise FeatureError(f"cannot decode {len(data)} bytes as an image (OpenCV)")
        if img.dtype != np.uint8:
            raise FeatureError(f"image has {img.dtype} pixels; only 8-bit images are supported")
        if channels == 1:
            return img[:, :, None]
        if channels == 3:
            return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        if img.ndim == 2:
            code = cv2.COLOR_GRAY2RGBA
        else:
            code = cv2.COLOR_BGR2RGBA if img.shape[2] == 3 else cv2.COLOR_BGRA2RGBA
        return cv2.cvtColor(img, code)
    image_mod = _import("pil")
    try:
        with image_mod.open(io.BytesIO(data)) as im:
            mode = _PIL_MODES[channels]
            arr = np.asarray(im if im.mode == mode else im.convert(mode))
    except (OSError, ValueError, SyntaxError) as e:
        raise FeatureError(f"cannot decode {len(data)} bytes as an image (Pillow: {e})") from None
    return arr[:, :, None] if channels == 1 else arr


def encode_image(array: np.ndarray, encoding: str, backend: str | None = None) -> bytes:
    """Encodes a ``(height, width, channels)`` uint8 array as PNG or JPEG bytes."""
    b = _pick(backend, ("pil", "cv2"))
    channels = array.shape[2]
    if b == "pil":
        image_mod = _import("pil")
        img = image_mod.fromarray(array[:, :, 0] if channels == 1 else array, _PIL_MODES[channels])
        out = io.BytesIO()
        if encoding == "png":
            img.save(out, format="PNG", compress_level=6)
        else:
            img.save(out, format="JPEG", quality=JPEG_QUALITY)
        return out.getvalue()
    cv2 = _import("cv2")
    bgr = array if channels == 1 else cv2.cvtColor(
        array, cv2.COLOR_RGB2BGR if channels == 3 else cv2.COLOR_RGBA2BGRA)
    params = [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY] if encoding == "jpeg" else []
    ok, buf = cv2.imencode(".png" if encoding == "png" else ".jpg", bgr, params)
    if not ok:
        raise FeatureError(f"OpenCV could not encode a {array.shape} image as {encoding}")
    return buf.tobytes()
