"""Arrow columns as the NumPy values a record holds.

One column of a decoded row group (or of a batch's rows taken from it) becomes one value per
row (:func:`column_values`):

========================================  =============================================
Arrow type                                value
========================================  =============================================
int*, uint*, float*, bool                 a NumPy scalar (``np.int64(3)``, ``np.bool_``)
timestamp, date, duration                 ``np.datetime64`` / ``np.timedelta64``
string, large_string (also dictionary)    ``str``
binary, large_binary, fixed_size_binary   ``bytes``
decimal                                   ``decimal.Decimal``
list, large_list of numbers or bools      a 1-D NumPy array
list of anything else                     a Python list of the values above
fixed_size_list                           a NumPy array (2-D and more when nested)
struct                                    a ``dict`` of its fields
map                                       a ``dict`` of its keys' values to its items'
null (any type)                           ``None``
========================================  =============================================

Arrays are read-only views (the records of one batch share them: ``.copy()`` one
to modify it). A list whose elements may be null comes back as a Python list (``None`` where null),
never as an array with a made-up fill value. A map whose keys are not numbers, times,
strings or binaries, or a map value holding one key twice (which a dict cannot hold; as
``to_pylist(maps_as_pydicts="strict")`` refuses it), and other types (union, extension types,
``time32``/``time64``) raise :class:`~thresher.errors.FeatureError` naming the column and
its Arrow type when the source is opened (:func:`check_type`), never a wrong value.

Example:
    >>> import pyarrow as pa
    >>> column_values(pa.array([[1, 2], None, []]))
    [array([1, 2]), None, array([], dtype=int64)]
    >>> column_values(pa.array([{"a": 1, "b": "x"}]))
    [{'a': np.int64(1), 'b': 'x'}]
    >>> column_values(pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int32())))
    [{'k': np.int32(1)}, None]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from thresher.errors import FeatureError
from thresher.sources.formats.parquet.arrow import numpy_of, pyarrow, value_dtypes

__all__ = ["WIDE_BYTES", "check_type", "column_converter", "column_values", "has_map", "plain_batch", "wide_columns"]

WIDE_BYTES = 1024
"""Strings or binaries this long on average (in a file's footer) are *wide*: see :func:`wide_columns`."""


def _is_number(t: Any) -> bool:
    pa = pyarrow()
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t))


def _is_time(t: Any) -> bool:
    pa = pyarrow()
    return bool(pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_duration(t))


def _is_text(t: Any) -> bool:
    pa = pyarrow()
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
                or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
                or pa.types.is_decimal(t) or pa.types.is_null(t))


def _is_list(t: Any) -> bool:
    pa = pyarrow()
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t))


def check_type(column: str, t: Any, where: str = "") -> None:
    """Raises FeatureError if values of Arrow type ``t`` cannot be converted (see the table).

    Example:
        >>> import pyarrow as pa
        >>> check_type("m", pa.map_(pa.string(), pa.int32()), "in 'x.parquet'")  # a dict per row
        >>> check_type("t", pa.time64("us"), "in 'x.parquet'")
        Traceback (most recent call last):
        ...
        thresher.errors.FeatureError: column 't' in 'x.parquet' has Arrow type time64[us], which ...
    """
    pa = pyarrow()
    inner = t
    if pa.types.is_dictionary(inner):
        inner = inner.value_type
    if _is_number(inner) or _is_time(inner) or _is_text(inner):
        return
    if _is_list(inner) or pa.types.is_fixed_size_list(inner):
        check_type(column, inner.value_type, where)
        return
    if pa.types.is_struct(inner):
        for i in range(inner.num_fields):
            f = inner.field(i)
            check_type(f"{column}.{f.name}", f.type, where)
        return
    if pa.types.is_map(inner) and _is_key(inner.key_type):
        check_type(f"{column}.value", inner.item_type, where)
        return
    raise FeatureError(
        f"column {column!r}{' ' + where if where else ''} has Arrow type {t}, which thresher cannot "
        "convert to NumPy values (supported: numbers, bools, timestamps, dates, durations, strings, "
        "binary, decimals, lists, fixed-size lists, structs, maps keyed by numbers, times, strings or binary, "
        "dictionaries of these); read other columns with columns=[...] or cast this one when writing "
        "the file")


def _is_key(t: Any) -> bool:
    """Whether a map keyed by Arrow type ``t`` becomes a dict: its keys' values are hashable."""
    pa = pyarrow()
    if pa.types.is_dictionary(t):
        t = t.value_type
    return (_is_number(t) or _is_time(t) or _is_text(t)) and not pa.types.is_null(t)


def has_map(t: Any) -> bool:
    """Whether values of Arrow type ``t`` hold a map (whose conversion may refuse a value).

    Example:
        >>> import pyarrow as pa
        >>> has_map(pa.list_(pa.map_(pa.string(), pa.int8()))), has_map(pa.list_(pa.int8()))
        (True, False)
    """
    pa = pyarrow()
    if pa.types.is_map(t):
        return True
    if pa.types.is_dictionary(t):
        return has_map(t.value_type)
    if _is_list(t) or pa.types.is_fixed_size_list(t):
        return has_map(t.value_type)
    if pa.types.is_struct(t):
        return any(has_map(t.field(i).type) for i in range(t.num_fields))
    return False


def _dense(arr: Any) -> np.ndarray | None:
    """``arr`` as one NumPy array of shape (len, ...), or None when it has nulls or is not
    numbers (or fixed-size lists of numbers)."""
    pa = pyarrow()
    if arr.null_count:
        return None
    t = arr.type
    if _is_number(t) or _is_time(t):
        dense = np.array(numpy_of(arr))
        dense.flags.writeable = False  # rows are views, shared by the records of a cached row group
        return dense
    if pa.types.is_fixed_size_list(t):
        child = _dense(arr.flatten())
        return None if child is None else child.reshape((len(arr), t.list_size, *child.shape[1:]))
    return None


def _with_nulls(arr: Any, values: list[Any]) -> list[Any]:
    if arr.null_count:
        valid = numpy_of(arr.is_valid())
        return [v if ok else None for v, ok in zip(values, valid.tolist(), strict=True)]
    return values


def _lists(arr: Any) -> list[Any]:
    offsets = numpy_of(arr.offsets).astype(np.int64)
    child = arr.values
    lo, hi = int(offsets[0]), int(offsets[-1])
    dense = _dense(child.slice(lo, hi - lo))
    if dense is not None:
        out: list[Any] = [dense[a - lo:b - lo] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(),
                                                               strict=True)]
    else:
        items = column_values(child.slice(lo, hi - lo))
        out = [items[a - lo:b - lo] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]
    return _with_nulls(arr, out)


def _fixed_lists(arr: Any) -> list[Any]:
    size = arr.type.list_size
    child = arr.flatten() if not arr.null_count else arr.values.slice(arr.offset * size, len(arr) * size)
    dense = _dense(child)
    if dense is not None:
        rows = dense.reshape((len(arr), size, *dense.shape[1:]))
        return _with_nulls(arr, list(rows))
    items = column_values(child)
    return _with_nulls(arr, [items[i * size:(i + 1) * size] for i in range(len(arr))])


def _structs(arr: Any) -> list[Any]:
    t = arr.type
    names = [t.field(i).name for i in range(t.num_fields)]
    fields = [column_values(arr.field(i)) for i in range(t.num_fields)]
    rows = [dict(zip(names, vals, strict=True)) for vals in zip(*fields, strict=True)] if fields \
        else [{} for _ in range(len(arr))]
    return _with_nulls(arr, rows)


def _repeated(keys: list[Any]) -> Any:
    seen: set[Any] = set()
    for k in keys:
        if k in seen:
            return k
        seen.add(k)
    return None


def _maps(arr: Any) -> list[Any]:
    offsets = numpy_of(arr.offsets).astype(np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    keys = column_values(arr.keys.slice(lo, hi - lo))
    items = column_values(arr.items.slice(lo, hi - lo))
    out = []
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        made = dict(zip(keys[a - lo:b - lo], items[a - lo:b - lo], strict=True))
        if len(made) != b - a:
            twice = _repeated(keys[a - lo:b - lo])
            raise FeatureError(
                f"a map value holds the key {twice!r} more than once, which the dict thresher returns for a "
                "map cannot hold (it would keep one of the values); write the column without repeated "
                "keys, or as a list of structs")
        out.append(made)
    return _with_nulls(arr, out)


def wide_columns(layout: Any, columns: Sequence[str], types: Mapping[str, Any]) -> list[str]:
    """The string and binary columns of ``columns`` whose values are :data:`WIDE_BYTES` or more
    on average in the file ``layout`` describes (its footer's uncompressed sizes; images, audio,
    documents). A source keeps these per row group as Python values (``bytes`` or ``str``), read
    per key; the others as Arrow data, taken per batch and converted then. Copying a wide value
    out of Arrow at each read would cost more than its object's overhead saves.

    Example:
        >>> import io, pyarrow as pa, pyarrow.parquet as pq
        >>> from types import SimpleNamespace
        >>> buf = io.BytesIO()
        >>> pq.write_table(pa.table({"jpeg": [bytes(range(256)) * 8] * 4, "label": [0, 1, 2, 3]}), buf)
        >>> md = pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata
        >>> wide_columns(SimpleNamespace(metadata=md), ["jpeg", "label"], {"jpeg": pa.binary(), "label": pa.int64()})
        ['jpeg']
    """
    pa = pyarrow()
    md = layout.metadata
    if md is None:
        return []
    out = []
    for c in columns:
        t = types[c]
        if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
                or pa.types.is_large_binary(t)):
            continue
        size = rows = 0
        for i in range(min(md.num_row_groups, 16)):
            rg = md.row_group(i)
            rows += rg.num_rows
            for j in range(rg.num_columns):
                chunk = rg.column(j)
                if chunk.path_in_schema == c:
                    size += chunk.total_uncompressed_size
        if rows and size >= WIDE_BYTES * rows:
            out.append(c)
    return out


def plain_batch(table: Any, columns: Sequence[str], types: Sequence[Any]) -> Any:
    """``table``'s ``columns`` as a record batch that concatenates with any other row group's:
    each column one array, dictionaries decoded, a column of nulls only (type ``null``, as a writer
    infers for an empty chunk) given the column's type ``types[i]``; values unchanged.

    Example:
        >>> import pyarrow as pa
        >>> t = pa.table({"a": pa.array(["x", "y", "x"]).dictionary_encode(), "b": pa.nulls(3)})
        >>> plain_batch(t, ["a", "b"], [pa.string(), pa.int64()]).schema.types
        [DataType(string), DataType(int64)]
    """
    pa = pyarrow()
    arrays = []
    for c, t in zip(columns, types, strict=True):
        arr = one_array(table.column(c))
        if pa.types.is_dictionary(arr.type):  # each row group has its own dictionary
            arr = arr.dictionary_decode()
        if pa.types.is_null(arr.type) and not pa.types.is_null(t):
            arr = pa.nulls(len(arr), type=t)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, names=list(columns))


def one_array(column: Any) -> Any:
    """A chunked array as one array: its only chunk as it is (``combine_chunks`` copies even
    one chunk: a whole row group's bytes, into fresh memory), else the chunks joined.

    Example:
        >>> import pyarrow as pa
        >>> one_array(pa.chunked_array([[1, 2], [3]])).to_pylist(), one_array(pa.chunked_array([["a"]])).to_pylist()
        ([1, 2, 3], ['a'])
    """
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks()


def column_converter(t: Any) -> Callable[[Any], list[Any]]:
    """:func:`column_values` for arrays of Arrow type ``t``, with the dispatch on the type done
    once (a source converts every batch's columns with these).

    Example:
        >>> import pyarrow as pa
        >>> convert = column_converter(pa.int32())
        >>> convert(pa.array([7, 8], pa.int32())), convert(pa.array([1, None], pa.int32()))
        ([np.int32(7), np.int32(8)], [np.int32(1), None])
    """
    pa = pyarrow()
    if (_is_number(t) and not pa.types.is_boolean(t)) or _is_time(t):
        dtype, raw = value_dtypes(t)
        same = raw.itemsize == dtype.itemsize

        def numbers(arr: Any) -> list[Any]:
            if arr.null_count or not len(arr) or not isinstance(arr, pa.Array):
                return column_values(arr)
            data = np.frombuffer(arr.buffers()[1], dtype=raw, count=len(arr), offset=arr.offset * raw.itemsize)
            return list(data.view(dtype) if same else data.astype(dtype))

        return numbers
    if _is_text(t):
        return lambda arr: arr.to_pylist()
    return column_values


def column_values(arr: Any) -> list[Any]:
    """The values of an Arrow array (or chunked array), one per row (see the module's table).

    Example:
        >>> import pyarrow as pa
        >>> column_values(pa.array(["a", None])), column_values(pa.array([1.5, None]))
        (['a', None], [np.float64(1.5), None])
    """
    pa = pyarrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = one_array(arr)
    t = arr.type
    if pa.types.is_dictionary(t):
        return column_values(arr.dictionary_decode())
    if _is_number(t) or _is_time(t):
        # read from the buffers, so ints stay ints; a null slot's value is replaced by None
        return _with_nulls(arr, list(numpy_of(arr)))
    if _is_text(t):
        return arr.to_pylist()
    if _is_list(t):
        return _lists(arr)
    if pa.types.is_fixed_size_list(t):
        return _fixed_lists(arr)
    if pa.types.is_struct(t):
        return _structs(arr)
    if pa.types.is_map(t):
        return _maps(arr)
    check_type("<column>", t)
    raise AssertionError(t)  # check_type raised
