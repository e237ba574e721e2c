"""InMemoryDataSource: a Python sequence (list, tuple, array) as a source."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thresher.sources.protocol import check_key, check_keys

__all__ = ["InMemoryDataSource"]


class InMemoryDataSource:
    """Serves the elements of an in-memory sequence by key.

    The sequence is held by reference; with worker processes it is pickled once
    per worker, so keep it to what fits comfortably in memory.

    Example:
        >>> from thresher.sources import InMemoryDataSource
        >>> src = InMemoryDataSource([b"a", b"b", b"c"])
        >>> len(src), src[2], src.__getitems__([0, 2])
        (3, b'c', [b'a', b'c'])
    """

    def __init__(self, elements: Sequence[Any]) -> None:
        self._elements = elements

    def __len__(self) -> int:
        return len(self._elements)

    def __getitem__(self, record_key: int) -> Any:
        return self._elements[check_key(record_key, len(self._elements), repr(self))]

    def __getitems__(self, record_keys: Sequence[int]) -> list[Any]:
        els = self._elements
        return [els[k] for k in check_keys(record_keys, len(els), repr(self)).tolist()]

    def __repr__(self) -> str:
        return f"InMemoryDataSource(<{len(self._elements)} elements>)"
