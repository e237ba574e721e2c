"""A batch's values read straight from the decoded row groups' Arrow buffers, in C.

A shuffled batch wants a few rows of many row groups. Arrow's ``take`` costs a call per
table, so without this a store copies the row groups it holds into a few large tables
first (:mod:`~thresher.sources.formats.parquet.store`), and the rows taken are converted to
Python values afterwards. Where thresher's C module is there (``_highway``, built at install
or on first use) and every column read per batch is a number, bool, timestamp, date,
duration, string or binary, the values are made in one pass over the keys from each table's
buffers instead: no take, no merged copy, no conversion afterwards. Each table's buffers are
described once, when it is decoded (:meth:`Gatherer.spec`); every position is checked against
its buffer in C.

Example:
    >>> import numpy as np, pyarrow as pa
    >>> g = Gatherer.of([pa.string(), pa.int64()])
    >>> if g is not None:   # the C module is there
    ...     a = pa.record_batch({"s": ["a", None, "cc"], "n": [1, 2, 3]})
    ...     b = pa.record_batch({"s": ["x"], "n": [9]})
    ...     specs = (g.spec(a), g.spec(b))
    ...     values = g.gather(specs, np.array([1, 0, 0]), np.array([0, 2, 1]))
    ...     assert values == [["x", "cc", None], [9, 3, 2]], values
"""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np

from thresher.sources.formats.parquet.arrow import pyarrow, value_dtypes

__all__ = ["NATIVE_GATHER", "Gatherer"]

_COLUMN = struct.Struct("@PnPnPnn")
"""A column's ColSpec in ``_highway.c``: validity, offsets or values, data (address and length
each; 0 and 0 where absent), and the array's offset."""

NATIVE_GATHER = os.environ.get("THRESHER_PARQUET_GATHER", "native") != "arrow"
"""Whether sources gather with the C module where they can (``THRESHER_PARQUET_GATHER=arrow``:
never; for comparing the two paths). Read when a process's first store is made."""


def _kind(t: Any) -> tuple[str, Any, Any] | None:
    """How a column of Arrow type ``t`` is gathered: ("text" | "bytes", wide offsets, None),
    ("fixed", dtype, raw dtype), ("bits", bool, None); None if it is not."""
    pa = pyarrow()
    if pa.types.is_dictionary(t):  # a store holds it decoded (convert.plain_batch)
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text", pa.types.is_large_string(t), None
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bytes", pa.types.is_large_binary(t), None
    if pa.types.is_boolean(t):
        return "bits", np.dtype(bool), None
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t) or pa.types.is_date(t) \
            or pa.types.is_duration(t):
        if pa.types.is_float16(t):
            return None
        dtype, raw = value_dtypes(t)
        return "fixed", dtype, raw
    return None


class Gatherer:
    """Gathers the rows of the columns of types ``types`` (in order) from many tables.

    Make one with :meth:`of` (None where the C module is missing or a type is not gathered).
    """

    def __init__(self, module: Any, kinds: list[tuple[str, Any, Any]]) -> None:
        self._module = module
        self._kinds = kinds

    @classmethod
    def of(cls, types: list[Any]) -> Gatherer | None:
        """A gatherer for columns of Arrow types ``types``, or None where it cannot be used."""
        if not NATIVE_GATHER or not types:
            return None
        kinds = [_kind(t) for t in types]
        if any(k is None for k in kinds):
            return None
        from thresher.sources.remote.highway import native_module

        module = native_module(warn=False)  # Arrow's take serves without it
        if module is None or not hasattr(module, "gather_fixed"):
            return None
        return cls(module, [k for k in kinds if k is not None])

    def spec(self, table: Any) -> tuple[Any, ...]:
        """What :meth:`gather` reads of ``table`` (a record batch with the columns in order,
        dictionaries decoded): per column where its validity bitmap, offsets or values and data
        are and how long, and its offset (packed for the C module), then the buffers' owners."""
        pa = pyarrow()
        out: list[Any] = []
        owners: list[Any] = []
        for j in range(len(self._kinds)):
            arr = table.column(j)
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks()
            bufs = list(arr.buffers())[:3]
            if not arr.null_count:
                bufs[0] = None
            elif bufs[0] is None:  # every value null, with no bitmap: one of zeros
                bufs[0] = pa.py_buffer(bytes((arr.offset + len(arr) + 7) // 8))
            while len(bufs) < 3:
                bufs.append(None)
            owners.append(bufs)
            where: list[int] = []
            for b in bufs:
                where += [0, 0] if b is None else [b.address, b.size]
            out.append(_COLUMN.pack(*where, arr.offset))
        return (*out, owners)

    def objects(self, lists: tuple[list[Any], ...], slots: np.ndarray, rows: np.ndarray) -> list[Any]:
        """``lists[slots[i]][rows[i]]`` for every ``i`` (int64 arrays): the values a source holds
        as Python objects (its wide columns), taken in C where the module has it."""
        take = getattr(self._module, "gather_objects", None)
        if take is None:  # a module built before it was added
            return [lists[s][r] for s, r in zip(slots.tolist(), rows.tolist(), strict=True)]
        return take(lists, slots, rows)

    def gather(self, specs: tuple[Any, ...], slots: np.ndarray, rows: np.ndarray) -> list[list[Any]]:
        """Per column, the values of row ``rows[i]`` of table ``specs[slots[i]]`` for every ``i``
        (as :mod:`~thresher.sources.formats.parquet.convert` makes them: NumPy scalars,
        ``str``, ``bytes``, None where null)."""
        slots = np.ascontiguousarray(slots, dtype=np.int64)
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        m = self._module
        out: list[list[Any]] = []
        for j, (kind, a, b) in enumerate(self._kinds):
            if kind in ("text", "bytes"):
                out.append(m.gather_binary(specs, j, slots, rows, kind == "text", a))
                continue
            raw = np.dtype(np.uint8) if kind == "bits" else b
            data, nulls = m.gather_fixed(specs, j, slots, rows, 0 if kind == "bits" else raw.itemsize)
            values = np.frombuffer(data, dtype=raw)
            values = values.view(a) if raw.itemsize == a.itemsize else values.astype(a)
            column: list[Any] = list(values)
            if nulls is not None:
                for i in nulls:
                    column[i] = None
            out.append(column)
        return out
