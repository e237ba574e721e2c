"""Caches of the elements before ``Dataset.cache()``: in memory, or on disk (ArrayRecord).

In memory (``cache()``): a view that computes element i the first time it is read
and keeps it. The expensive part before the cache then runs once per element per
*process*: with ``worker_count=0`` exactly once across all epochs; with W worker
processes each worker keeps its own cache (an element may be computed up to W
times, and the workers' caches end with the iterator). Use the on-disk cache to
compute each element once whatever the worker count.

On disk (``cache(path)``): the elements before the cache are computed once, in
order, by the engine (in parallel when the pipeline has workers), serialised
(pickle by default) and written to one ArrayRecord file atomically (a crash leaves
no half file), with a JSON sidecar holding the pipeline's fingerprint. Later runs,
in any process, read the file; a file built by another pipeline is refused. The
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

import json
import os
import pickle
import sys
from typing import Any, Iterable, Sequence

import numpy as np

from thresher.errors import CacheError, SourceError
from thresher.sources.array_record import ArrayRecordSource
from thresher.sources.array_record_writer import ArrayRecordWriter
from thresher.sources.protocol import read_many
from thresher.sources.remote.commit import exists, read_text, staging, write_text

__all__ = ["DiskCacheView", "MemoryCacheView", "build_disk_cache", "element_nbytes"]

_META_VERSION = 1


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
            for k, v in zip(missing, read_many(self._inner, missing)):
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


class DiskCacheView:
    """The records of an on-disk cache file, deserialised."""

    def __init__(self, path: str, loads: Any) -> None:
        self._source = ArrayRecordSource(path)
        self._loads = loads
        self.path = path

    def __len__(self) -> int:
        return len(self._source)

    def __getitem__(self, key: int) -> Any:
        return self._loads(self._source[key])

    def __getitems__(self, keys: Sequence[int]) -> list[Any]:
        loads = self._loads
        return [loads(b) for b in self._source.__getitems__(keys)]

    def __repr__(self) -> str:
        return f"DiskCacheView({self.path!r}, {len(self)} elements)"


def _meta_path(path: str) -> str:
    return path + ".json"


def build_disk_cache(path: str, fingerprint: str, elements: Iterable[Any], *, serializer: Any = None,
                     max_bytes: int | None = None) -> DiskCacheView:
    """Opens the cache at ``path``, building it from ``elements`` when it is not there.

    ``elements`` is only iterated when the cache has to be built. ``serializer`` has
    ``dumps``/``loads`` (default: pickle).

    Example:
        >>> import os, tempfile
        >>> from thresher.dataset.cache import build_disk_cache
        >>> path = os.path.join(tempfile.mkdtemp(), "cache.array_record")
        >>> view = build_disk_cache(path, "f00d", iter([{"a": 1}, {"a": 2}]))
        >>> len(view), view[1]
        (2, {'a': 2})
        >>> len(build_disk_cache(path, "f00d", iter([])))  # found: not rebuilt
        2
    """
    ser = serializer if serializer is not None else pickle
    path = os.fspath(path)
    meta_path = _meta_path(path)
    if exists(meta_path) and exists(path):
        try:
            meta = json.loads(read_text(meta_path))
        except (OSError, ValueError, SourceError) as e:
            raise CacheError(f"the cache sidecar {meta_path!r} is unreadable ({e}); delete {path!r} and it") from e
        if meta.get("fingerprint") != fingerprint:
            raise CacheError(
                f"the on-disk cache {path!r} was built by another pipeline (fingerprint {meta.get('fingerprint')}, "
                f"this one {fingerprint}); delete {path!r} and {meta_path!r} to rebuild it, or cache elsewhere")
        return DiskCacheView(path, ser.loads)
    total = 0
    with staging(path) as local, ArrayRecordWriter(local) as writer:  # a URL: uploaded after
        for i, element in enumerate(elements):
            record = ser.dumps(element)
            total += len(record)
            if max_bytes is not None and total > max_bytes:
                raise CacheError(
                    f"the on-disk cache {path!r} would pass max_bytes={max_bytes} at element {i} (serialised size "
                    f"so far {total} bytes); raise max_bytes or cache smaller elements. Nothing was written")
            writer.write(record)
        count = writer.count
    write_text(meta_path, json.dumps({"version": _META_VERSION, "fingerprint": fingerprint,
                                      "num_records": count, "bytes": total}))
    return DiskCacheView(path, ser.loads)
