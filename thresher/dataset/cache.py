"""Caches of the elements before ``Dataset.cache()``: in memory, or on disk (ArrayRecord).

In memory (``cache()``): a view that computes element i the first time it is read
and keeps it. The expensive part before the cache then runs once per element per
*process*: with ``worker_count=0`` exactly once across all epochs; with W worker
processes each worker keeps its own cache (an element may be computed up to W
times, and the workers' caches end with the iterator). Use the on-disk cache to
compute each element once whatever the worker count.

On disk (``cache(path)``, ``thresher.dataset.cache_files``): the elements before
the cache are computed once, in order, by the engine (in parallel when the pipeline
has workers; split over the processes of a JAX pod), serialised without pickle by
default (``thresher.dataset.cache_codec``) and written to ArrayRecord files
atomically (a crash leaves no half file), with a JSON sidecar holding the pipeline's
fingerprint and a digest of every file. Later runs, in any process, read the files;
files built by another pipeline or serializer, or changed since, are refused. The
cache is built when the dataset is first compiled (first ``iter``, ``len`` or
``ds[i]``). Because it is built in order and counted, it also restores random
access after a filter.

Both take ``max_bytes``: past it, CacheError says how much was cached and what to do.

Example:
    >>> from thresher.dataset.cache import MemoryCacheView
    >>> calls = []
    >>> class Square:
    ...     def __len__(self): return 4
    ...     def __getitem__(self, i): calls.append(i); return i * i
    >>> view = MemoryCacheView(Square())
    >>> [view[i] for i in (1, 2, 1, 2)], calls
    ([1, 4, 1, 4], [1, 2])
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from thresher.errors import CacheError
from thresher.sources.protocol import read_many

__all__ = ["MemoryCacheView", "element_nbytes"]


def element_nbytes(x: Any) -> int:
    """About how much memory an element holds (array bytes, bytes, else getsizeof).

    Example:
        >>> import numpy as np
        >>> from thresher.dataset.cache import element_nbytes
        >>> element_nbytes({"x": np.zeros(4), "y": b"abc"})
        35
    """
    if isinstance(x, np.ndarray):
        return int(x.nbytes)
    if isinstance(x, (bytes, bytearray, str)):
        return len(x)
    if isinstance(x, dict):
        return sum(element_nbytes(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return sum(element_nbytes(v) for v in x)
    return sys.getsizeof(x)


class MemoryCacheView:
    """Element i of ``inner``, computed on first read and kept (per process)."""

    def __init__(self, inner: Any, max_bytes: int | None = None, label: str = "cache()") -> None:
        self._inner = inner
        self._max = max_bytes
        self._label = label
        self._store: dict[int, Any] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._inner)

    @property
    def cached(self) -> int:
        """How many elements this process holds."""
        return len(self._store)

    def __getitem__(self, key: int) -> Any:
        return self.__getitems__([key])[0]

    def __getitems__(self, keys: Sequence[int]) -> list[Any]:
        store = self._store
        missing = list(dict.fromkeys(k for k in keys if k not in store))
        if missing:
            for k, v in zip(missing, read_many(self._inner, missing), strict=False):
                size = element_nbytes(v)
                if self._max is not None and self._bytes + size > self._max:
                    raise CacheError(
                        f"{self._label}: caching element {k} would take the in-memory cache past max_bytes="
                        f"{self._max} (it holds {len(store)} elements, {self._bytes} bytes). Raise max_bytes, "
                        "cache fewer or smaller elements, or use an on-disk cache: cache(path)")
                store[k] = v
                self._bytes += size
        return [store[k] for k in keys]

    def __repr__(self) -> str:
        return f"MemoryCacheView({len(self._store)} cached of {len(self)})"
