"""Tensor and Scalar: n-dimensional numeric arrays, stored raw and decoded without copying.

Payload (little-endian): for each unknown (None) dimension, its size as uint64, then
the elements in C order. Fixed shapes have no prefix, so every record of a dataset with
fixed-shape features has the same size and decodes as views at fixed offsets.

Example:
    >>> import numpy as np
    >>> from thresher.features import Tensor, Scalar
    >>> t = Tensor((None, 2), "float32")
    >>> p = t.encode_payload(np.ones((3, 2)))
    >>> len(p), t.decode_payload(p, 0, len(p)).shape
    (32, (3, 2))
    >>> s = Scalar("int64")
    >>> s.decode_payload(s.encode_payload(7), 0, 8)
    np.int64(7)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from thresher.features.base import (
    ArrayView,
    Feature,
    Shape,
    check_dtype,
    check_shape,
    fixed_view_decode,
    shape_repr,
    to_array,
)

__all__ = ["Scalar", "Tensor", "decode_array", "encode_array"]

_DIM = np.dtype("<u8")


def encode_array(value: Any, dtype: np.dtype, shape: Shape, where: str) -> bytes:
    """The payload of an array: uint64 sizes of the unknown dimensions, then the data."""
    arr = to_array(value, dtype, shape, where)
    unknown = [arr.shape[i] for i, d in enumerate(shape) if d is None]
    if not unknown:
        return arr.tobytes()
    return np.asarray(unknown, dtype=_DIM).tobytes() + arr.tobytes()


def decode_array(feature: Feature, dtype: np.dtype, shape: Shape, buf: bytes, offset: int,
                 length: int) -> np.ndarray:
    """Decodes an :func:`encode_array` payload as a read-only view over ``buf``."""
    k = sum(d is None for d in shape)
    if length < 8 * k:
        raise feature._bad_payload(length, f"too short for {k} dimension sizes")
    sizes = iter(np.frombuffer(buf, _DIM, k, offset).tolist()) if k else iter(())
    full = tuple(next(sizes) if d is None else d for d in shape)
    nbytes = math.prod(full) * dtype.itemsize
    if length != 8 * k + nbytes:
        raise feature._bad_payload(length, f"shape {full} needs {8 * k + nbytes} bytes")
    return np.ndarray(full, dtype, buf, offset + 8 * k)


class Tensor(Feature):
    """A numeric array of a given shape (None = any size along that axis) and dtype.

    Decodes to a read-only ``np.ndarray`` that is a view over the record bytes (call
    ``.copy()`` to modify it).

    Example:
        >>> from thresher.features import Tensor
        >>> Tensor((28, 28), "uint8")
        Tensor(shape=(28, 28), dtype=uint8)
    """

    type_name = "Tensor"

    def __init__(self, shape: Any, dtype: Any) -> None:
        self.shape: Shape = check_shape(shape, "Tensor")
        self.dtype: str = check_dtype(dtype, "Tensor")
        self._np_dtype = np.dtype(self.dtype).newbyteorder("<")

    def __repr__(self) -> str:
        return f"Tensor(shape={shape_repr(self.shape)}, dtype={self.dtype})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash((self.type_name, self.shape, self.dtype))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type_name, "shape": list(self.shape), "dtype": self.dtype}

    @property
    def fixed_size(self) -> int | None:
        if any(d is None for d in self.shape):
            return None
        return math.prod(self.shape) * self._np_dtype.itemsize  # type: ignore[arg-type]

    @property
    def array_view(self) -> ArrayView | None:
        if self.fixed_size is None:
            return None
        return (tuple(self.shape), self._np_dtype, False)  # type: ignore[arg-type]

    def encode_payload(self, value: Any, where: str = "value") -> bytes:
        return encode_array(value, self._np_dtype, self.shape, where)

    def decode_payload(self, buf: bytes, offset: int, length: int) -> Any:
        view = self.array_view
        if view is not None:
            return fixed_view_decode(view, self, buf, offset, length)
        return decode_array(self, self._np_dtype, self.shape, buf, offset, length)


class Scalar(Tensor):
    """A single number; decodes to a NumPy scalar (``np.int64(3)``), as TFDS does.

    Example:
        >>> from thresher.features import Scalar
        >>> Scalar("float32").fixed_size
        4
    """

    type_name = "Scalar"

    def __init__(self, dtype: Any) -> None:
        super().__init__((), dtype)

    def __repr__(self) -> str:
        return f"Scalar(dtype={self.dtype})"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type_name, "dtype": self.dtype}

    @property
    def array_view(self) -> ArrayView | None:
        return ((), self._np_dtype, True)
