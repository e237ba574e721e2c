"""The Feature base class and the array helpers the tensor-like features share.

A feature describes one field of an example and turns a value into the bytes of one
*leaf* of a record (``encode_payload``) and back (``decode_payload``). A
:class:`~thresher.features.FeaturesDict` is the only non-leaf feature.

Example:
    >>> import numpy as np
    >>> from thresher.features import Tensor
    >>> t = Tensor((2,), "int16")
    >>> payload = t.encode_payload([1, -2])
    >>> payload, t.decode_payload(payload, 0, len(payload))
    (b'\\x01\\x00\\xfe\\xff', array([ 1, -2], dtype=int16))
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from thresher._validate import is_int
from thresher.errors import CorruptSourceError, FeatureError

__all__ = ["DTYPES", "ArrayView", "Feature", "Shape", "check_dtype", "check_shape", "to_array"]

Shape = tuple[int | None, ...]
# (shape, little-endian dtype, scalar?) of a fixed-size leaf decoded as a view.
ArrayView = tuple[tuple[int, ...], np.dtype, bool]

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128")


def check_dtype(dtype: Any, what: str) -> str:
    """The canonical name (``'uint8'``) of a supported numeric dtype, or FeatureError."""
    try:
        name = np.dtype(dtype).name
    except (TypeError, ValueError, SyntaxError):  # np.dtype parses strings and dicts, loudly
        raise FeatureError(f"{what}: {dtype!r} is not a dtype; use one of {DTYPES}") from None
    if name not in DTYPES:
        raise FeatureError(f"{what}: dtype {name!r} is not supported; use one of {DTYPES} "
                           "(strings are features.Text())")
    return name


def check_shape(shape: Any, what: str) -> Shape:
    """``shape`` as a tuple of non-negative ints and None (unknown), or FeatureError."""
    if is_int(shape):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise FeatureError(
            f"{what}: shape must be a tuple of ints or None, got {shape!r}") from None
    for d in dims:
        if d is not None and not is_int(d, minimum=0):
            raise FeatureError(f"{what}: bad dimension {d!r} in shape {shape!r}; dimensions "
                               "are ints >= 0, or None for any size")
    return tuple(None if d is None else int(d) for d in dims)


def to_array(value: Any, dtype: np.dtype, shape: Shape, where: str) -> np.ndarray:
    """``value`` as a C-contiguous little-endian array of ``dtype`` and ``shape``.

    Casts are allowed when nothing is lost beyond float precision: ints to any int type
    that holds the values, ints and floats to floats, bools to bool.
    """
    arr = np.asarray(value)
    if arr.dtype != dtype:
        src, dst = arr.dtype.kind, dtype.kind
        ok = ((dst in "fc" and src in "biuf" + ("c" if dst == "c" else ""))
              or (dst in "iu" and src in "biu") or (dst == "b" and src == "b"))
        if not ok:
            raise FeatureError(f"{where}: expected {dtype.name} values, got {arr.dtype.name} "
                               f"(cast explicitly if that is intended)")
        cast = arr.astype(dtype)
        if dst in "iu" and not np.array_equal(cast, arr):
            raise FeatureError(f"{where}: values out of range for {dtype.name} "
                               f"(min {arr.min()}, max {arr.max()})")
        arr = cast
    if len(arr.shape) != len(shape) or any(
            d is not None and d != a for d, a in zip(shape, arr.shape, strict=False)):
        want = "(" + ", ".join("None" if d is None else str(d) for d in shape) + (
            ",)" if len(shape) == 1 else ")")
        raise FeatureError(f"{where}: expected shape {want}, got {arr.shape}")
    return np.ascontiguousarray(arr, dtype=dtype.newbyteorder("<"))


class Feature(abc.ABC):
    """One field of an example: how its values are encoded in a record and decoded."""

    type_name: ClassVar[str]

    @abc.abstractmethod
    def to_json(self) -> dict[str, Any]:
        """The JSON form stored in ``dataset_info.json`` (``{"type": ..., ...}``)."""

    @property
    def fixed_size(self) -> int | None:
        """The payload size in bytes if every value has the same, else None."""
        return None

    @property
    def array_view(self) -> ArrayView | None:
        """For fixed-size leaves decoded as a zero-copy array view: (shape, dtype, scalar)."""
        return None

    @abc.abstractmethod
    def encode_payload(self, value: Any, where: str = "value") -> bytes:
        """The payload bytes of ``value``; FeatureError (naming ``where``) if it does not fit."""

    @abc.abstractmethod
    def decode_payload(self, buf: bytes, offset: int, length: int) -> Any:
        """Decodes the payload ``buf[offset:offset + length]``."""

    def _bad_payload(self, length: int, why: str) -> CorruptSourceError:
        return CorruptSourceError(f"{self!r}: corrupt payload of {length} bytes: {why}")


def fixed_view_decode(view: ArrayView, feature: Feature, buf: bytes, offset: int,
                      length: int) -> np.ndarray | np.generic:
    """Decodes a fixed-size leaf as a read-only view over ``buf``."""
    shape, dtype, scalar = view
    size = feature.fixed_size
    if length != size:
        raise feature._bad_payload(length, f"expected {size} bytes")
    arr = np.ndarray(shape, dtype, buf, offset)
    return arr[()] if scalar else arr


def shape_repr(shape: Sequence[int | None]) -> str:
    inner = ", ".join("None" if d is None else str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"
