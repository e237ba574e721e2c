"""The protocols a data source implements: random access by record key.

A source is anything with ``__len__`` and ``__getitem__(int)``. A source that can
read many records faster in one call also has ``__getitems__(keys) -> list``, the name
the PyTorch DataLoader uses too; the loader prefers it when it exists.

Example:
    >>> import thresher as th
    >>> src = th.sources.RangeDataSource(0, 10, 2)
    >>> isinstance(src, th.sources.RandomAccessDataSource), len(src), src[3]
    (True, 5, 6)
    >>> th.sources.supports_batched_reads(src)
    True
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, TypeVar, runtime_checkable

import numpy as np

from thresher.errors import RecordKeyError

T_co = TypeVar("T_co", covariant=True)

__all__ = [
    "RandomAccessDataSource",
    "BatchedDataSource",
    "supports_batched_reads",
    "read_many",
    "check_key",
    "check_keys",
    "record_locations",
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
