"""The protocols a data source implements: random access by record key.

A source is anything with ``__len__`` and ``__getitem__(int)``. A source that can
read many records faster in one call also has ``__getitems__(keys) -> list``, the name
the PyTorch DataLoader uses too; the loader prefers it when it exists.

A source whose reads wait on I/O (a network filesystem, a bucket, a database, an
HTTP service) says so with an attribute ``suggested_reads_in_flight``: the number of
reads that may wait at once (see :class:`ConcurrentReadsSource`). The loader then
keeps that many reads in flight on threads, unless ``ReadOptions`` says otherwise.

Example:
    >>> import thresher as th
    >>> src = th.sources.RangeDataSource(0, 10, 2)
    >>> isinstance(src, th.sources.RandomAccessDataSource), len(src), src[3]
    (True, 5, 6)
    >>> th.sources.supports_batched_reads(src)
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from thresher._validate import check_count
from thresher.errors import ConfigError, ConfigTypeError, RecordKeyError

T_co = TypeVar("T_co", covariant=True)

__all__ = [
    "DEFAULT_READS_IN_FLIGHT",
    "BatchedDataSource",
    "BlockHintedSource",
    "BlockedSource",
    "ConcurrentReadsSource",
    "RandomAccessDataSource",
    "check_key",
    "check_keys",
    "check_source",
    "join_blocks",
    "natural_block_starts",
    "read_many",
    "record_locations",
    "suggested_reads_in_flight",
    "supports_batched_reads",
]


@runtime_checkable
class RandomAccessDataSource(Protocol[T_co]):
    """A sized collection of records, addressed by an integer key in ``[0, len)``."""

    def __len__(self) -> int: ...

    def __getitem__(self, record_key: int) -> T_co: ...


@runtime_checkable
class BatchedDataSource(RandomAccessDataSource[T_co], Protocol[T_co]):
    """A random-access source that reads many keys in one call (the faster path)."""

    def __getitems__(self, record_keys: Sequence[int]) -> Sequence[T_co]: ...


DEFAULT_READS_IN_FLIGHT = 16
"""Reads in flight for a source with only ``__getitem__`` that declares nothing (Grain's default)."""


@runtime_checkable
class ConcurrentReadsSource(RandomAccessDataSource[T_co], Protocol[T_co]):
    """A source that declares how many of its reads may wait at once.

    ``suggested_reads_in_flight``: 0 when reads are CPU work or already batched (local
    files: threads would only add overhead); N > 0 when each read mostly waits (on a
    disk far away, a server) and N of them can overlap. ``__getitem__`` (and
    ``__getitems__``, if any) must then be safe to call from several threads.

    Example:
        >>> import time
        >>> from thresher.sources import ConcurrentReadsSource, suggested_reads_in_flight
        >>> class Remote:
        ...     suggested_reads_in_flight = 32
        ...     def __len__(self): return 100
        ...     def __getitem__(self, key): time.sleep(0.001); return key
        >>> isinstance(Remote(), ConcurrentReadsSource), suggested_reads_in_flight(Remote())
        (True, 32)
    """

    suggested_reads_in_flight: int


def suggested_reads_in_flight(source: object) -> int:
    """The reads in flight that suit ``source`` when the user did not choose.

    What the source declares (``suggested_reads_in_flight``); else 0 for a source with
    ``__getitems__`` (it batches its own reads); else ``DEFAULT_READS_IN_FLIGHT`` (a
    source with only ``__getitem__`` reads one record per call: threads overlap them).

    Example:
        >>> import thresher as th
        >>> from thresher.sources import suggested_reads_in_flight
        >>> suggested_reads_in_flight(th.sources.RangeDataSource(0, 4)), suggested_reads_in_flight([1, 2])
        (0, 16)
    """
    declared = getattr(source, "suggested_reads_in_flight", None)
    if declared is not None:
        return check_count(declared, f"suggested_reads_in_flight (declared by {source!r})")
    return 0 if supports_batched_reads(source) else DEFAULT_READS_IN_FLIGHT


def supports_batched_reads(source: object) -> bool:
    """True if ``source`` has a callable ``__getitems__``."""
    return callable(getattr(source, "__getitems__", None))


def read_many(source: Any, keys: Sequence[int]) -> list[Any]:
    """Reads ``keys`` from ``source``, batched when the source supports it."""
    getitems = getattr(source, "__getitems__", None)
    if getitems is not None:
        out = getitems(keys)
        return out if isinstance(out, list) else list(out)
    return [source[k] for k in keys]


def record_locations(source: Any, keys: Sequence[int]) -> list[tuple[str, int]] | None:
    """The file and the index in it of each key, when ``source`` can tell (else None).

    A source tells by an optional method ``record_locations(keys) -> [(path, index)]``
    (ArrayRecordSource and prepared datasets have it); it must not read records.

    Example:
        >>> import thresher as th
        >>> record_locations(th.sources.RangeDataSource(0, 4), [1]) is None
        True
    """
    locate = getattr(source, "record_locations", None)
    if not callable(locate):
        return None
    return list(locate(keys))


_WRAP = "thresher.sources.HuggingFaceSource"
#: Types that look like sources but are not (by module and name: nothing is imported), and
#: the source class that reads them.
_NOT_SOURCES = {
    ("pyarrow.lib", "Table"): f"{_WRAP}(table)",
    ("pyarrow.lib", "RecordBatch"): f"{_WRAP}(pyarrow.Table.from_batches([batch]))",
    ("datasets.arrow_dataset", "Dataset"): f"{_WRAP}(dataset)",
    ("datasets.dataset_dict", "DatasetDict"): f"{_WRAP}(dataset_dict['train'])",
    ("datasets.iterable_dataset", "IterableDataset"):
        "thresher.sources.ParquetSource over its Parquet files (an IterableDataset has no random access)",
}


def check_source(source: object) -> None:
    """Raises if ``source`` cannot be a random-access source; names the source class to use
    for a ``pyarrow.Table`` (indexing it gives columns) or a Hugging Face dataset (its rows
    are Python objects and worker processes would each be sent the whole table).

    Example:
        >>> import pyarrow as pa
        >>> check_source(pa.table({"x": [1]}))
        Traceback (most recent call last):
        ...
        thresher.errors.ConfigTypeError: a pyarrow.lib.Table is not a random-access source ...
    """
    cls = type(source)
    use = _NOT_SOURCES.get((cls.__module__, cls.__name__))
    if use is not None:
        raise ConfigTypeError(f"a {cls.__module__}.{cls.__name__} is not a random-access source (it indexes "
                              f"columns, or would be copied to every worker as a whole); pass {use}")
    if not (hasattr(source, "__len__") and hasattr(source, "__getitem__")):
        raise ConfigError(f"data_source must have __len__ and __getitem__ (random access); got {source!r}")


def check_key(key: int, length: int, what: str = "source") -> int:
    """Returns ``key`` as an int, or raises RecordKeyError naming the key and the length.

    Negative keys are not wrapped: a loader never asks for them, so one is a bug.
    """
    k = int(key)
    if not 0 <= k < length:
        raise RecordKeyError(
            f"record key {k} is out of range for {what} of length {length}; "
            f"valid keys are 0..{length - 1}"
        )
    return k


def check_keys(keys: Sequence[int], length: int, what: str = "source") -> np.ndarray:
    """Returns ``keys`` as an int64 array, or raises RecordKeyError for the first bad one."""
    arr = np.asarray(keys, dtype=np.int64)
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= length:
            check_key(lo if lo < 0 else hi, length, what)
    return arr


@runtime_checkable
class BlockedSource(Protocol):
    """A source whose records are stored in units read whole (chunks, row groups, shards).

    ``block_boundaries(min_records)`` returns the first record key of each block (int64,
    strictly increasing, starting at 0): consecutive records, at least ``min_records`` per
    block where the source allows, cut only where one of its units ends, so that no unit is
    split between two blocks. :meth:`thresher.BlockShuffle.of_source` uses them. It must
    cost O(blocks), never O(records).

    Example:
        >>> import numpy as np
        >>> from thresher.sources.protocol import BlockedSource, natural_block_starts
        >>> class Chunked:   # 10 records in chunks of 3
        ...     def __len__(self): return 10
        ...     def __getitem__(self, key): return key
        ...     def block_boundaries(self, min_records):
        ...         step = -(-min_records // 3) * 3
        ...         return np.arange(0, 10, step)
        >>> isinstance(Chunked(), BlockedSource), natural_block_starts(Chunked(), 4).tolist()
        (True, [0, 6])
    """

    def block_boundaries(self, min_records: int) -> np.ndarray: ...


def natural_block_starts(source: object, min_records: int) -> np.ndarray | None:
    """The block starts ``source`` reports (see :class:`BlockedSource`), or None if it reports none.

    Example:
        >>> import thresher as th
        >>> natural_block_starts(th.sources.RangeDataSource(0, 4), 2) is None
        True
    """
    if not isinstance(source, BlockedSource):
        return None
    starts = np.asarray(source.block_boundaries(int(min_records)), dtype=np.int64).reshape(-1)
    return starts if starts.size else None


@runtime_checkable
class BlockHintedSource(Protocol):
    """A source that fetches better when told which blocks of keys are read together.

    The loader calls ``upcoming_blocks(starts, stops)`` with the key ranges
    ``[starts[i], stops[i])`` of the blocks a :class:`thresher.BlockShuffle` window reads
    (the windows of the positions being read), before reading them. A source with a chunk
    cache can then fetch a block's chunks in one go. A hint: what is read never depends
    on it. A source that also has ``prefetch_blocks(starts, stops)`` is told, in the same
    way, the blocks of the window its process reads next, so that it can fetch them while
    the current window is read (``ArrayRecordSource`` does, for group_size-1 files).

    Example:
        >>> class Counting:
        ...     def __len__(self): return 8
        ...     def __getitem__(self, key): return key
        ...     def upcoming_blocks(self, starts, stops): self.hint = list(zip(starts, stops))
        >>> isinstance(Counting(), BlockHintedSource)
        True
    """

    def upcoming_blocks(self, starts: np.ndarray, stops: np.ndarray) -> None: ...


def join_blocks(cuts: np.ndarray, min_records: int) -> np.ndarray:
    """Block starts from ascending cut points ``[0, ..., len]``: empty blocks dropped, then
    consecutive ones joined until each holds at least ``min_records`` (O(blocks)).

    Example:
        >>> import numpy as np
        >>> join_blocks(np.array([0, 3, 3, 5, 9, 10]), 4).tolist()
        [0, 5, 9]
    """
    edges = np.unique(np.asarray(cuts, dtype=np.int64))
    if edges.size < 2:
        return np.zeros(0, dtype=np.int64)
    if min_records <= 1:
        return edges[:-1]
    starts = [int(edges[0])]
    for e in edges[1:-1].tolist():
        if e - starts[-1] >= min_records:
            starts.append(e)
    return np.asarray(starts, dtype=np.int64)

