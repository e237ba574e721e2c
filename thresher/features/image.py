"""Image: an ``(height, width, channels)`` uint8 array, stored raw or as PNG/JPEG.

- ``encoding='none'``: raw pixels, like ``Tensor(shape, 'uint8')``: decodes without
  copying (a read-only view over the record).
- ``encoding='png'`` / ``'jpeg'``: the payload is the encoded file; decoding uses
  OpenCV if installed, else Pillow (see :mod:`thresher.features.image_codecs`).
- ``encoding='original'``: an encoded file is stored as given, whatever its format (a
  JPEG stays the same JPEG bytes, a PNG the same PNG); an array is encoded as PNG.

Values to write: a uint8 array (``(h, w)`` is accepted for one channel), or the bytes
of a PNG/JPEG file, or a path to one. Encoded input in the feature's own encoding is
stored as is (after checking that it decodes to the declared shape).

Example:
    >>> import numpy as np
    >>> from thresher.features import Image
    >>> im = Image((2, 3, 1), encoding="none")
    >>> p = im.encode_payload(np.zeros((2, 3), np.uint8))
    >>> im.decode_payload(p, 0, len(p)).shape
    (2, 3, 1)
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from thresher.errors import FeatureError
from thresher.features.base import ArrayView, Feature, Shape, check_shape, shape_repr
from thresher.features.image_codecs import decode_image, encode_image
from thresher.features.tensor import Tensor

__all__ = ["ENCODINGS", "Image"]

ENCODINGS = ("png", "jpeg", "none", "original")
_U8 = np.dtype("uint8")
_MAGIC = {b"\x89PNG": "png", b"\xff\xd8\xff": "jpeg"}


def _sniff(data: bytes) -> str | None:
    for magic, fmt in _MAGIC.items():
        if data.startswith(magic):
            return fmt
    return None


class Image(Feature):
    """An image feature.

    Args:
        shape: ``(height, width, channels)``; height and width may be None (any size);
            channels must be 1, 3 or 4 (1 or 3 for JPEG).
        encoding: ``'png'`` (lossless, the default), ``'jpeg'`` (lossy, smaller),
            ``'none'`` (raw pixels: largest files, fastest decode) or ``'original'``
            (encoded files kept byte for byte, arrays stored as PNG).

    Example:
        >>> from thresher.features import Image
        >>> Image((28, 28, 1), encoding="none")
        Image(shape=(28, 28, 1), encoding='none')
    """

    type_name = "Image"

    def __init__(self, shape: Any = (None, None, 3), encoding: str = "png") -> None:
        dims = check_shape(shape, "Image")
        if len(dims) != 3 or dims[2] not in (1, 3, 4):
            raise FeatureError(f"Image: shape must be (height, width, channels) with 1, 3 or "
                               f"4 channels, got {shape!r}")
        if encoding not in ENCODINGS:
            raise FeatureError(f"Image: encoding must be one of {ENCODINGS}, got {encoding!r}")
        if encoding == "jpeg" and dims[2] == 4:
            raise FeatureError("Image: JPEG has no alpha channel; use encoding='png' for 4 "
                               "channels")
        self.shape: Shape = dims
        self.encoding: str = encoding
        self.dtype: str = "uint8"
        self._raw = Tensor(dims, "uint8")

    @property
    def channels(self) -> int:
        return int(self.shape[2])  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"Image(shape={shape_repr(self.shape)}, encoding={self.encoding!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Image) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash((self.type_name, self.shape, self.encoding))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type_name, "shape": list(self.shape), "dtype": self.dtype,
                "encoding": self.encoding}

    @property
    def fixed_size(self) -> int | None:
        return self._raw.fixed_size if self.encoding == "none" else None

    @property
    def array_view(self) -> ArrayView | None:
        return self._raw.array_view if self.encoding == "none" else None

    def _check(self, arr: np.ndarray, where: str) -> np.ndarray:
        if arr.ndim == 2 and self.channels == 1:
            arr = arr[:, :, None]
        if arr.dtype != _U8:
            raise FeatureError(f"{where}: images are uint8, got {arr.dtype} (convert with "
                               ".astype(np.uint8) after scaling)")
        if arr.ndim != 3 or any(d is not None and d != a for d, a in zip(self.shape, arr.shape, strict=False)):
            raise FeatureError(f"{where}: expected an image of shape {shape_repr(self.shape)}, "
                               f"got {arr.shape}")
        return arr

    def encode_payload(self, value: Any, where: str = "value") -> bytes:
        encoded: bytes | None = None
        if isinstance(value, (str, os.PathLike)):
            where = f"{where} (image file {os.fspath(value)!r})"
            try:
                with open(value, "rb") as f:
                    value = f.read()
            except OSError as e:
                raise FeatureError(f"{where}: cannot read image file {os.fspath(value)!r}: "
                                   f"{e}") from None
        if isinstance(value, (bytes, bytearray, memoryview)):
            encoded = bytes(value)
            try:
                arr = decode_image(encoded, self.channels)
            except FeatureError as e:
                raise FeatureError(f"{where}: {e}") from None
            fmt = _sniff(encoded)
        else:
            arr, fmt = np.asarray(value), None
        arr = self._check(arr, where)
        if self.encoding == "none":
            return self._raw.encode_payload(arr, where)
        if encoded is not None and (fmt == self.encoding or self.encoding == "original"):
            return encoded
        return encode_image(np.ascontiguousarray(arr), "png" if self.encoding == "original" else self.encoding)

    def decode_payload(self, buf: bytes, offset: int, length: int) -> Any:
        if self.encoding == "none":
            return self._raw.decode_payload(buf, offset, length)
        data = memoryview(buf)[offset:offset + length]
        try:
            arr = decode_image(data, self.channels)  # type: ignore[arg-type]
        except FeatureError as e:
            raise self._bad_payload(length, str(e)) from None
        if any(d is not None and d != a for d, a in zip(self.shape, arr.shape, strict=False)):
            raise self._bad_payload(length, f"decoded shape {arr.shape} is not "
                                            f"{shape_repr(self.shape)}")
        return arr
