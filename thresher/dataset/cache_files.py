"""On-disk caches: part files, a checked JSON sidecar, and one build for a whole pod.

A cache at ``path`` is one or more ArrayRecord *part* files and a sidecar
``path + ".json"`` that lists them with the pipeline's fingerprint, the serializer's
name, and each part's record count, size and BLAKE2b digest. Opening a cache checks
all of it: a cache of another pipeline or serializer, or a part file that was
truncated, replaced or edited, is refused with CacheError (nothing of it is decoded).

One process writes one part, ``path`` itself. P processes (a JAX pod: P is
``jax.process_count()`` when jax is imported) build one cache together: process p
writes ``{path}-{p:05d}-of-{P:05d}`` (its part of the elements; possibly empty) and a
small ``.done.json`` beside it; process 0 waits for every part, then writes the
sidecar; the others wait for the sidecar. Only files are used to meet, so this works
on any filesystem that all processes share; a process that waits longer than
``timeout_s`` raises CacheError naming the parts that are missing. Every process then
reads the same files: no process ever holds or writes the whole cache alone.

``path`` may be a URL (``s3://bucket/cache/c.array_record``, any fsspec URL, with
``storage_options``): parts are built on local disk and uploaded whole, the sidecar is
uploaded last, so a reader never sees a cache whose sidecar is there but a part is not
(``thresher.dataset.cache_store``). Parts in a bucket are read by byte ranges.

Example:
    >>> import os, tempfile
    >>> from thresher.dataset.cache_files import build_disk_cache
    >>> path = os.path.join(tempfile.mkdtemp(), "cache.array_record")
    >>> view = build_disk_cache(path, "f00d", iter([{"a": 1}, {"a": 2}]))
    >>> len(view), view[1]
    (2, {'a': 2})
    >>> len(build_disk_cache(path, "f00d", iter([])))  # found: not rebuilt
    2
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from thresher._validate import user_path
from thresher.dataset.cache_codec import PLAIN
from thresher.dataset.cache_store import CacheStore, file_digest
from thresher.errors import CacheError
from thresher.sources.formats.array_record.source import ArrayRecordSource
from thresher.sources.formats.array_record.writer import ArrayRecordWriter

__all__ = ["DiskCacheView", "build_disk_cache", "file_digest", "pod_process", "serializer_name"]

META_VERSION = 2
DEFAULT_TIMEOUT_S = 3600.0
_POLL_S = (0.02, 1.0)


def serializer_name(ser: Any) -> str:
    """The name a sidecar records for a serializer (``pickle`` for the pickle module).

    Example:
        >>> import pickle
        >>> from thresher.dataset.cache_codec import PLAIN
        >>> serializer_name(PLAIN), serializer_name(pickle)
        ('thresher.plain.v1', 'pickle')
    """
    name = getattr(ser, "name", None)
    if isinstance(name, str):
        return name
    if hasattr(ser, "__name__"):
        return str(ser.__name__)
    return f"{type(ser).__module__}.{type(ser).__qualname__}"


def pod_process() -> tuple[int, int]:
    """``(process index, process count)`` of this JAX job, ``(0, 1)`` when jax is not imported.

    Example:
        >>> pod_process()[1] >= 1
        True
    """
    jax = sys.modules.get("jax")
    if jax is None:
        return 0, 1
    return int(jax.process_index()), int(jax.process_count())


class DiskCacheView:
    """The records of an on-disk cache's part files, one after the other, deserialised."""

    def __init__(self, paths: Sequence[str], loads: Any, storage_options: Any = None) -> None:
        self.paths = list(paths)
        self._sources = [ArrayRecordSource(p, storage_options=storage_options) for p in self.paths]
        self._starts = np.cumsum([0] + [len(s) for s in self._sources])
        self._loads = loads
        self.path = self.paths[0]

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __getitem__(self, key: int) -> Any:
        return self.__getitems__([key])[0]

    def __getitems__(self, keys: Sequence[int]) -> list[Any]:
        loads = self._loads
        if len(self._sources) == 1:
            return [loads(b) for b in self._sources[0].__getitems__(keys)]
        idx = np.asarray(keys, dtype=np.int64)
        parts = np.searchsorted(self._starts, idx, side="right") - 1
        out: list[Any] = [None] * len(idx)
        for p in np.unique(parts):
            where = np.nonzero(parts == p)[0]
            local = (idx[where] - self._starts[p]).tolist()
            for i, rec in zip(where.tolist(), self._sources[p].__getitems__(local), strict=False):
                out[i] = loads(rec)
        return out

    def __repr__(self) -> str:
        return f"DiskCacheView({self.path!r}, {len(self)} elements in {len(self.paths)} part(s))"


def _part_path(path: str, index: int, count: int) -> str:
    return path if count == 1 else f"{path}-{index:05d}-of-{count:05d}"


def _open(store: CacheStore, path: str, meta: dict[str, Any], fingerprint: str, ser: Any) -> DiskCacheView:
    meta_path = path + ".json"
    if meta.get("version") != META_VERSION:
        raise CacheError(f"the cache {path!r} was written by another thresher (sidecar version "
                         f"{meta.get('version')}, this one reads {META_VERSION}); delete "
                         f"{meta_path!r} and its part files to rebuild")
    if meta.get("fingerprint") != fingerprint:
        raise CacheError(
            f"the on-disk cache {path!r} was built by another pipeline (fingerprint "
            f"{meta.get('fingerprint')}, this one {fingerprint}); delete {path!r} and "
            f"{meta_path!r} to rebuild it, or cache elsewhere")
    if meta.get("serializer") != serializer_name(ser):
        raise CacheError(
            f"the on-disk cache {path!r} was written with serializer {meta.get('serializer')!r} "
            f"but this pipeline reads with {serializer_name(ser)!r}; it is not read (a pickle "
            "written by someone else could run code). Delete it to rebuild, or pass the same "
            "serializer to cache() if you trust the file")
    parts = meta.get("parts")
    if not isinstance(parts, list) or not parts:
        raise CacheError(f"the cache sidecar {meta_path!r} lists no part files; delete it")
    paths = []
    for part in parts:
        name = part.get("file") if isinstance(part, dict) else None
        if not isinstance(name, str) or name in ("", ".", "..") or os.path.basename(name) != name \
                or "/" in name:
            raise CacheError(f"the cache sidecar {meta_path!r} names a bad part {part!r}")
        p = store.sibling(path, name)
        store.check_part(p, part)
        paths.append(p)
    return DiskCacheView(paths, ser.loads, store.storage_options)


def _write_part(store: CacheStore, part: str, elements: Iterable[Any], ser: Any,
                max_bytes: int | None) -> dict[str, Any]:
    with store.writing(part) as local:
        info = _write_local_part(local, part, elements, ser, max_bytes)
    return dict(info, version=store.version(part))


def _write_local_part(local: str, part: str, elements: Iterable[Any], ser: Any,
                      max_bytes: int | None) -> dict[str, Any]:
    """Writes the part at the local path ``local`` (``part`` is where it goes, for messages)."""
    total = 0
    with ArrayRecordWriter(local) as writer:
        for i, element in enumerate(elements):
            record = ser.dumps(element)
            total += len(record)
            if max_bytes is not None and total > max_bytes:
                raise CacheError(
                    f"the on-disk cache {part!r} would pass max_bytes={max_bytes} at element {i} "
                    f"(serialised size so far {total} bytes); raise max_bytes or cache smaller "
                    "elements. Nothing was written")
            writer.write(record)
        count = writer.count
    return {"file": os.path.basename(local), "num_records": count, "bytes": total,
            "file_bytes": os.path.getsize(local), "blake2b": file_digest(local)}


def _wait_for(store: CacheStore, paths: Sequence[str], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    sleep = _POLL_S[0]
    while True:
        missing = [p for p in paths if not store.exists(p)]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise CacheError(f"waited {timeout_s:.0f} s for {what}; still missing {missing[:4]}"
                             f"{' ...' if len(missing) > 4 else ''}. A process of the pod failed "
                             "or is slower than cache(timeout_s=...); see its log")
        time.sleep(sleep)
        sleep = min(sleep * 1.5, _POLL_S[1])


def build_disk_cache(path: str, fingerprint: str, elements: Iterable[Any], *, serializer: Any = None,
                     max_bytes: int | None = None, process: tuple[int, int] = (0, 1),
                     timeout_s: float = DEFAULT_TIMEOUT_S, storage_options: Any = None) -> DiskCacheView:
    """Opens the cache at ``path``, building it when it is not there.

    ``elements`` (this process's part, in order) is only iterated when the cache has to
    be built. ``serializer`` has ``dumps``/``loads`` and defaults to
    :data:`~thresher.dataset.cache_codec.PLAIN` (no pickle). ``process`` is
    ``(index, count)`` of this process among those that build the cache together.
    ``path`` may be a URL; ``storage_options`` then go to fsspec.
    """
    ser = serializer if serializer is not None else PLAIN
    path = user_path(path)
    store = CacheStore(storage_options)
    meta_path = path + ".json"
    if store.exists(meta_path):
        return _open(store, path, store.read_json(meta_path), fingerprint, ser)
    index, count = process
    part = _part_path(path, index, count)
    info = _write_part(store, part, elements, ser, max_bytes)
    meta: dict[str, Any] = {"version": META_VERSION, "fingerprint": fingerprint,
                            "serializer": serializer_name(ser)}
    if count == 1:
        store.write_json(meta_path, dict(meta, parts=[info]))
        return _open(store, path, store.read_json(meta_path), fingerprint, ser)
    store.write_json(part + ".done.json", dict(meta, part=info))
    if index == 0:
        done = [_part_path(path, i, count) + ".done.json" for i in range(count)]
        _wait_for(store, done, timeout_s, f"the {count} parts of the cache {path!r}")
        parts = []
        for d in done:
            got = store.read_json(d)
            if got.get("fingerprint") != fingerprint or got.get("serializer") != meta["serializer"]:
                raise CacheError(f"{d!r} was written by another pipeline; delete the parts of "
                                 f"{path!r} and rebuild")
            parts.append(got["part"])
        store.write_json(meta_path, dict(meta, parts=parts))
        for d in done:
            store.remove(d)
    else:
        _wait_for(store, [meta_path], timeout_s, f"process 0 to finish the cache {path!r}")
    return _open(store, path, store.read_json(meta_path), fingerprint, ser)
