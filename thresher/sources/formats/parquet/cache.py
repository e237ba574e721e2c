"""Decoded row groups kept per process, up to a budget in bytes (least recently used out).

An entry is a row group's requested columns, converted to the values records hold
(per column a NumPy array of numbers or a Python list, see
:func:`~thresher.sources.formats.parquet.convert.column_store`; a read puts values in new
dicts). Its cost is an estimate: an array's bytes, and for a list its column's Arrow bytes
plus 64 bytes per value (the Python objects).

Example:
    >>> cache = RowGroupCache(100)
    >>> cache.put(0, ["a"], 60); cache.put(1, ["b"], 60)
    >>> cache.get(0), cache.get(1), cache.size
    (None, ['b'], 60)
    >>> cache.get_many([0, 1]), cache.hits, cache.misses
    ({1: ['b']}, 2, 2)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

__all__ = ["VALUE_OVERHEAD", "RowGroupCache"]

VALUE_OVERHEAD = 64
"""Bytes counted per converted value, over its Arrow bytes."""


class RowGroupCache:
    """Values by key, evicted least recently used first once their costs pass ``budget``;
    thread-safe. An entry costing more than the budget is not kept."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.size = 0
        self.hits = self.misses = 0
        self._entries: OrderedDict[int, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: int, count: bool = True) -> Any:
        """The value of ``key`` or None; ``count``: count the hit or miss."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += count
                return None
            self.hits += count
            self._entries.move_to_end(key)
            return entry[0]

    def get_many(self, keys: list[int]) -> dict[int, Any]:
        """The values of those of ``keys`` held (each counted as a hit or a miss, and marked
        used), under one acquisition of the lock."""
        found = {}
        with self._lock:
            entries = self._entries
            for key in keys:
                entry = entries.get(key)
                if entry is not None:
                    entries.move_to_end(key)
                    found[key] = entry[0]
            self.hits += len(found)
            self.misses += len(keys) - len(found)
        return found

    def put(self, key: int, value: Any, cost: int) -> None:
        if cost > self.budget:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.size -= old[1]
            self._entries[key] = (value, cost)
            self.size += cost
            while self.size > self.budget:
                _, (_, c) = self._entries.popitem(last=False)
                self.size -= c

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.size = 0
