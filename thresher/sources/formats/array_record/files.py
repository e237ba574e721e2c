"""Many ArrayRecord files: record counts read in parallel (and cached), a bounded set of open readers.

A source over 100,000 files cannot keep a reader open per file (a process may have
1,024 descriptors), nor open them one after the other to learn their lengths.

- ``record_counts(paths)`` opens the files on a thread pool to read their lengths.
  With ``index=True`` it keeps them in a small JSON file next to the data
  (``INDEX_NAME`` in each file's directory: name -> records, bytes, mtime), written
  atomically and believed only for files whose size and mtime still match.
- ``ReaderCache`` keeps at most ``max_open`` readers open per process, least recently
  used first out. An evicted reader is closed when the last read using it returns
  (its descriptor goes with the object), so threads reading it are never cut off.

Example:
    >>> import os, tempfile
    >>> from thresher.sources import write_array_record
    >>> from thresher.sources.formats.array_record.files import INDEX_NAME, ReaderCache, record_counts
    >>> d = tempfile.mkdtemp()
    >>> paths = [os.path.join(d, f"{i}.array_record") for i in (1, 2, 3)]
    >>> for i, p in zip((1, 2, 3), paths):
    ...     _ = write_array_record(p, [b"x"] * i)
    >>> record_counts(paths, index=True)[0], os.path.exists(os.path.join(d, INDEX_NAME))
    ([1, 2, 3], True)
    >>> cache = ReaderCache(lambda i: f"reader {i}", max_open=2)
    >>> [cache.get(i) for i in (0, 1, 0, 2)], sorted(cache.open_keys())
    (['reader 0', 'reader 1', 'reader 0', 'reader 2'], [0, 2])
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from thresher.errors import CorruptSourceError, SourceError, SourceNotFoundError
from thresher.sources.formats.descriptors import descriptor_share, no_descriptor_error, out_of_descriptors

__all__ = ["DEFAULT_MAX_OPEN", "INDEX_BUDGET", "INDEX_NAME", "ReaderCache", "default_max_open", "record_counts"]

INDEX_NAME = ".thresher_record_counts.json"
DEFAULT_MAX_OPEN = 256
"""Readers one source keeps open per process at least, where the descriptor limit allows
(see :func:`default_max_open`; the rest reopen when read)."""
INDEX_BUDGET = 256 << 20
"""Bytes the open readers' chunk indexes may take beyond ``DEFAULT_MAX_OPEN`` readers."""
_COUNT_THREADS = 32


_READER_OPTIONS = "readahead_buffer_size:0,max_parallelism:0"


def _reader_class() -> Any:
    from array_record.python import array_record_module

    return array_record_module.ArrayRecordReader


def _check_openable(path: str) -> None:
    """Raises the error that says why ``path`` cannot be opened at all (no descriptor left, no
    permission), where array_record's reader only says it failed: never "corrupt" for that."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        if out_of_descriptors(e):
            raise no_descriptor_error(path, e) from e
        raise SourceError(f"ArrayRecord file {path!r} cannot be opened: {e}") from e
    os.close(fd)


def open_reader(path: str) -> Any:
    """array_record's reader of the local file ``path``, with thresher's errors if it is missing or unreadable."""
    if not os.path.isfile(path):
        raise SourceNotFoundError(f"ArrayRecord file {path!r} does not exist (was it moved or deleted?)")
    try:
        reader = _reader_class()(path, _READER_OPTIONS)
    except Exception as e:  # array_record raises RuntimeError/ValueError with Riegeli text
        _check_openable(path)
        raise CorruptSourceError(f"cannot open {path!r} as an ArrayRecord file: {e}") from e
    if not reader.ok():
        _check_openable(path)
        size = os.path.getsize(path)
        raise CorruptSourceError(
            f"{path!r} ({size} bytes) is not a readable ArrayRecord file: it is another format, "
            "truncated or corrupt (its footer could not be read). Rewrite it with "
            "thresher.sources.write_array_record"
        )
    return reader


def default_max_open(records_per_file: Sequence[int]) -> int:
    """Readers an ArrayRecordSource keeps open per process when its ``max_open`` is not given.

    array_record's reader holds a descriptor and its file's chunk index (8 bytes a chunk, and a
    chunk a record at group_size 1, thresher's default). A source keeps a quarter of the
    descriptor limit of them (``descriptor_share``: at most 4,096), but more than
    ``DEFAULT_MAX_OPEN`` only as far as the indexes of files of this size fit in
    ``INDEX_BUDGET`` (counted at group_size 1). A shuffle over more files than are kept reopens
    most of them for every batch: over 1,024 files of 200 records, keeping them all read 3.1-4.1x
    as fast as keeping 256 (``benchmarks.many_shards``).

    Example:
        >>> 16 <= default_max_open([200] * 1024) <= 4096
        True
    """
    mean = max(1, sum(records_per_file) // max(1, len(records_per_file)))
    return min(descriptor_share(), max(DEFAULT_MAX_OPEN, INDEX_BUDGET // (8 * mean)))


class ReaderCache:
    """At most ``max_open`` values of ``opener(key)`` kept, least recently used evicted; thread-safe."""

    def __init__(self, opener: Callable[[int], Any], max_open: int = DEFAULT_MAX_OPEN,
                 closer: Callable[[Any], None] | None = None) -> None:
        self._opener, self._closer = opener, closer
        self.max_open = max(1, max_open)
        self._open: OrderedDict[int, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: int) -> Any:
        with self._lock:
            value = self._open.get(key)
            if value is not None:
                self._open.move_to_end(key)
                return value
        value = self._opener(key)  # outside the lock: opening a remote file may take a while
        with self._lock:
            existing = self._open.get(key)
            if existing is not None:  # another thread opened it meanwhile: keep one
                self._open.move_to_end(key)
                return existing
            self._open[key] = value
            while len(self._open) > self.max_open:
                self._open.popitem(last=False)  # closed when its last user drops it
        return value

    def open_keys(self) -> list[int]:
        """The keys whose values are held now."""
        with self._lock:
            return list(self._open)

    def close(self) -> None:
        """Drops every value (calling ``closer`` on each, when given)."""
        with self._lock:
            values, self._open = list(self._open.values()), OrderedDict()
        if self._closer is not None:
            for v in values:
                self._closer(v)


def _load_index(directory: str) -> dict[str, Any]:
    try:
        with open(os.path.join(directory, INDEX_NAME)) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_index(directory: str, entries: dict[str, Any]) -> None:
    """Writes the index atomically; a directory we may not write to just gets none."""
    path = os.path.join(directory, INDEX_NAME)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(entries, f, separators=(",", ":"), sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(tmp)


def record_counts(paths: Sequence[str], count: Callable[[str], int] | None = None,
                  index: bool = False) -> tuple[list[int], list[int]]:
    """The record count and byte size of each file, read on threads (and cached with ``index``).

    ``count(path)`` reads one file's record count (default: open it with array_record);
    its exceptions (SourceNotFoundError, CorruptSourceError) are raised as they are.
    """
    if count is None:
        def count(path: str) -> int:
            reader = open_reader(path)
            try:
                return int(reader.num_records())
            finally:
                reader.close()

    stats = [os.stat(p) for p in paths]
    known: dict[str, dict[str, Any]] = {}
    if index:
        for d in {os.path.dirname(os.path.abspath(p)) for p in paths}:
            known[d] = _load_index(d)
    counts: list[int | None] = [None] * len(paths)
    for i, (p, st) in enumerate(zip(paths, stats, strict=False)):
        d, name = os.path.split(os.path.abspath(p))
        entry = known.get(d, {}).get(name)
        if isinstance(entry, list) and entry[1:] == [st.st_size, st.st_mtime_ns]:
            counts[i] = int(entry[0])
    missing = [i for i, c in enumerate(counts) if c is None]
    if len(missing) > 1:
        with ThreadPoolExecutor(min(_COUNT_THREADS, len(missing)), thread_name_prefix="thresher-count") as pool:
            for i, c in zip(missing, pool.map(lambda j: count(paths[j]), missing), strict=False):
                counts[i] = c
    else:
        for i in missing:
            counts[i] = count(paths[i])
    if index and missing:
        for i, (p, st) in enumerate(zip(paths, stats, strict=False)):
            d, name = os.path.split(os.path.abspath(p))
            known.setdefault(d, {})[name] = [counts[i], st.st_size, st.st_mtime_ns]
        for d, entries in known.items():
            _save_index(d, entries)
    return [int(c or 0) for c in counts], [st.st_size for st in stats]
