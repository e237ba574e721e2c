"""pyarrow, imported where used, through :func:`thresher._optional.require` (the error names
``pip install "thresher[parquet]"``).

Example:
    >>> from thresher.sources.formats.parquet.arrow import pyarrow
    >>> pyarrow().__name__
    'pyarrow'
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from thresher._optional import require

__all__ = ["numpy_of", "pyarrow", "pyarrow_parquet", "value_dtypes"]


def pyarrow(what: str = "reading Parquet") -> ModuleType:
    """The ``pyarrow`` module (MissingExtraError naming ``thresher[parquet]`` if it is missing)."""
    return require("pyarrow", what, extra="parquet")


def pyarrow_parquet(what: str = "reading Parquet") -> ModuleType:
    """The ``pyarrow.parquet`` module (ImportError naming ``thresher[parquet]`` if missing)."""
    return require("pyarrow.parquet", what, extra="parquet")


def value_dtypes(t: Any) -> tuple[np.dtype[Any], np.dtype[Any]]:
    """(the NumPy dtype of the values, the dtype of Arrow's data buffer) for a fixed-width type."""
    pa = pyarrow()
    if pa.types.is_date32(t):
        return np.dtype("datetime64[D]"), np.dtype(np.int32)
    if pa.types.is_date64(t):
        return np.dtype("datetime64[ms]"), np.dtype(np.int64)
    if pa.types.is_timestamp(t):
        return np.dtype(f"datetime64[{t.unit}]"), np.dtype(np.int64)
    if pa.types.is_duration(t):
        return np.dtype(f"timedelta64[{t.unit}]"), np.dtype(np.int64)
    kind = "i" if pa.types.is_signed_integer(t) else "u" if pa.types.is_unsigned_integer(t) else "f"
    dtype = np.dtype(f"{kind}{t.bit_width // 8}")
    return dtype, dtype


def numpy_of(arr: Any) -> np.ndarray:
    """The values of an Arrow array of numbers, bools, dates, timestamps or durations as one
    read-only NumPy array (what ``arr.to_numpy(zero_copy_only=False)`` gives where ``arr`` has
    no nulls; at null slots the values are unspecified), read from its buffers.

    pyarrow's ``to_numpy`` imports pandas when it is installed: about half a second and tens of
    MiB in every process (each worker) that decodes a row group. This reads the buffers instead.

    Example:
        >>> import pyarrow as pa
        >>> numpy_of(pa.array([1, 2, 3]).slice(1)), numpy_of(pa.array([True, False, True]))
        (array([2, 3]), array([ True, False,  True]))
    """
    pa = pyarrow()
    t, n, offset = arr.type, len(arr), arr.offset
    data = arr.buffers()[1]
    if pa.types.is_boolean(t):
        out = np.zeros(0, dtype=bool) if data is None or n == 0 else np.unpackbits(
            np.frombuffer(data, dtype=np.uint8), bitorder="little", count=offset + n)[offset:].astype(bool)
    else:
        dtype, raw = value_dtypes(t)
        if data is None or n == 0:
            out = np.zeros(0, dtype=dtype)
        else:
            values = np.frombuffer(data, dtype=raw, count=n, offset=offset * raw.itemsize)
            out = values.astype(dtype) if raw.itemsize != dtype.itemsize else values.view(dtype)
    out.flags.writeable = False
    return out
