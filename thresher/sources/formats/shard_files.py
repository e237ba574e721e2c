"""Byte ranges of shard files, local or behind URLs, opened again in each process.

:class:`ShardFiles` is what the in-place formats (TFRecord, WebDataset tar) share: the
list of shards with their sizes and versions, byte-range reads (slices of a read-only
``mmap`` of each local file, mapped once per process on first use: no system call per
read; for URLs, thresher's lean HTTP client where it serves them (``s3://``,
``http(s)://``: :mod:`~thresher.sources.remote.lean`, the ranges of a batch in flight on
a pool of threads) and fsspec's ``cat_ranges`` otherwise), a sequential stream to build
an index from (8 MiB range requests), and a check that a local shard is still the file
that was listed (one ``stat`` per shard and batch, before its bytes are sliced). It
pickles to the shard list and the storage options: file handles, maps, clients and
filesystems are made again in the process that reads (and after a fork).

A shard replaced by a new file (written elsewhere and renamed over it) is detected on the
next batch, and until then the old map reads the old file, never a mix; one truncated in place while a
batch is being sliced out of it can end the process with SIGBUS (as with any reader that
maps files): write shards atomically.

Example:
    >>> import os, tempfile
    >>> from thresher.sources.formats.shards import list_shards
    >>> path = os.path.join(tempfile.mkdtemp(), "a.bin")
    >>> _ = open(path, "wb").write(b"0123456789")
    >>> files = ShardFiles(list_shards(path))
    >>> files.read_many([(0, 2, 5), (0, 8, 10)])
    [b'234', b'89']
"""

from __future__ import annotations

import io
import mmap
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, TypeVar

import numpy as np

from thresher.errors import CorruptSourceError, SourceError
from thresher.sources.formats.descriptors import descriptor_share, no_descriptor_error, out_of_descriptors
from thresher.sources.formats.shards import Shard
from thresher.sources.remote.fs import describe_error, filesystem, is_url
from thresher.sources.remote.lean import LeanClient, client_for

__all__ = ["MAX_MAPS_KEPT", "ShardFiles", "in_shard_groups", "maps_kept"]

T = TypeVar("T")

_TIMEOUT_S = 60.0  # a range request that gets no answer in this time fails (RemoteReadOptions' default)
_READS_IN_FLIGHT = 16
_STREAM_BLOCK = 8 << 20
MAX_MAPS_KEPT = 4096
"""The most shard maps a process keeps (see :func:`maps_kept`)."""
_UNSET: Any = object()


def maps_kept() -> int:
    """How many shard maps this process keeps: a quarter of its descriptor limit (``ulimit -n``;
    Python's mmap holds a descriptor for each), at least 16 and at most ``MAX_MAPS_KEPT``.

    A shuffle over more shards than that maps most shards again for every batch (an open, a
    stat and a map each): with 1,024 TFRecord shards, keeping them all read 2.2-2.4x as fast
    as keeping 256 (``benchmarks.many_shards``). Raise ``ulimit -n`` for sources of many shards.

    Example:
        >>> 16 <= maps_kept() <= MAX_MAPS_KEPT
        True
    """
    return descriptor_share(MAX_MAPS_KEPT)


def in_shard_groups(keys: np.ndarray, shards: np.ndarray, read: Callable[[Any], list[T]]) -> list[T] | None:
    """``read(keys)`` a group of keys at a time when the keys' ``shards`` (one per key) number more
    than :func:`maps_kept`, in key order; None when they fit (the caller reads them at once).

    A batch holds the maps of all its shards until it ends: a batch over more shards than the
    descriptor limit allows would fail to map the last ones, so it is read in groups of at most
    ``maps_kept()`` shards, each group's maps let go before the next.

    Example:
        >>> import numpy as np
        >>> in_shard_groups(np.arange(3), np.array([0, 1, 0]), lambda k: [int(x) for x in k]) is None
        True
    """
    most = maps_kept()
    if len(shards) <= most:  # no more shards than keys: the usual batch costs no np.unique
        return None
    distinct, group_of = np.unique(shards, return_inverse=True)
    if len(distinct) <= most:
        return None
    group_of = group_of.reshape(-1) // most  # distinct shards in order: blocks of `most` of them
    order = np.argsort(group_of, kind="stable")
    out: list[Any] = [None] * len(keys)
    for group in np.split(order, np.flatnonzero(np.diff(group_of[order])) + 1):
        for i, value in zip(group.tolist(), read(keys[group]), strict=True):
            out[i] = value
    return out


class ShardFiles:
    """The shards of a source, read by byte ranges (see the module doc)."""

    def __init__(self, shards: Sequence[Shard], storage_options: Mapping[str, Any] | None = None) -> None:
        self.shards = list(shards)
        self.storage_options = dict(storage_options or {})
        self.remote = bool(self.shards) and is_url(self.shards[0].url)
        self._maps: dict[int, mmap.mmap | bytes] = {}
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._fs: Any = None
        self._lean: LeanClient | None = _UNSET
        self._pool: ThreadPoolExecutor | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"shards": self.shards, "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["shards"], state["storage_options"])  # type: ignore[misc]

    def __len__(self) -> int:
        return len(self.shards)

    def name(self, i: int) -> str:
        return self.shards[i].url

    def check_unchanged(self) -> None:
        """SourceError naming the first local shard whose size or mtime is not what was listed."""
        if self.remote:
            return  # objects are checked by size on every read, and by the format's checks
        for s in self.shards:
            try:
                st = os.stat(s.url)
            except OSError as e:
                raise SourceError(f"shard {s.url!r} can no longer be read: {e}") from None
            if st.st_size != s.size or str(st.st_mtime_ns) != s.version:
                raise SourceError(f"shard {s.url!r} changed after the source was made (size {s.size} -> "
                                  f"{st.st_size}); make the source again (its index is rebuilt)")

    def _filesystem(self) -> tuple[Any, list[str]]:
        """The fsspec filesystem of the shards and each shard's path in it (made once per process)."""
        if self._fs is None:
            fs, _ = filesystem(self.shards[0].url, self.storage_options)
            self._fs = (fs, [filesystem(s.url, self.storage_options)[1] for s in self.shards])
        return self._fs

    def _forked(self) -> None:
        """After a fork: descriptors, maps, connections and threads are the parent's; make new ones."""
        if self._pid != os.getpid():
            self._maps, self._pid, self._lock = {}, os.getpid(), threading.Lock()
            self._lean, self._pool = _UNSET, None

    def _lean_client(self) -> LeanClient | None:
        """The lean HTTP client for these URLs and options in this process (None: fsspec reads)."""
        self._forked()
        if self._lean is _UNSET:
            with self._lock:
                if self._lean is _UNSET:
                    self._lean = client_for(self.shards[0].url, self.storage_options, _TIMEOUT_S, _READS_IN_FLIGHT)
        return self._lean

    def _read_lean(self, lean: LeanClient, ranges: Sequence[tuple[int, int, int]]) -> list[bytes]:
        """The ranges through the lean client, all in flight at once (one pool of threads per process)."""
        urls = [self.shards[i].url for i, _, _ in ranges]
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(_READS_IN_FLIGHT, thread_name_prefix="thresher-shards")
        pending = [self._pool.submit(lean.cat_file, url, start, end)
                   for url, (_, start, end) in zip(urls, ranges, strict=True)]
        out = []
        for future, url, (_, start, end) in zip(pending, urls, ranges, strict=True):
            try:
                out.append(future.result())
            except Exception as e:
                raise describe_error(e, url, f"reading bytes [{start}, {end})") from e
        return out

    def _check(self, i: int, st: os.stat_result | None = None) -> None:
        """CorruptSourceError if local shard ``i`` is not the file that was listed (one stat)."""
        s = self.shards[i]
        if st is None:
            try:
                st = os.stat(s.url)
            except OSError as e:
                raise SourceError(f"shard {s.url!r} can no longer be read: {e}") from None
        if st.st_size != s.size or str(st.st_mtime_ns) != s.version:
            raise CorruptSourceError(
                f"shard {s.url!r} changed after its index was built (size {s.size} -> {st.st_size}, or "
                "its modification time); make the source again (the index is rebuilt)")

    def _map(self, i: int) -> mmap.mmap | bytes:
        """The read-only map of local shard ``i``, made on first use in this process.

        At most :func:`maps_kept` are kept (the least recently used is let go: it is unmapped, and
        the descriptor Python's mmap keeps is closed, when the last batch slicing it is done),
        so a source of many thousands of shards does not run out of descriptors.
        """
        self._forked()
        with self._lock:
            m = self._maps.pop(i, None)
            if m is None:
                m = self._open_map(i)
                kept = maps_kept()
                while len(self._maps) >= kept:
                    del self._maps[next(iter(self._maps))]
            self._maps[i] = m  # the most recently used last
        return m

    def _open_map(self, i: int) -> mmap.mmap | bytes:
        url = self.shards[i].url
        try:
            fd = os.open(url, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except OSError as e:
            if out_of_descriptors(e):
                raise no_descriptor_error(url, e) from None
            raise SourceError(f"shard {url!r} cannot be opened: {e}") from None
        try:
            st = os.fstat(fd)
            self._check(i, st)
            return mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ) if st.st_size else b""
        except OSError as e:
            raise SourceError(f"shard {url!r} cannot be mapped: {e}") from None
        finally:
            os.close(fd)

    def local_buffers(self, shards: Sequence[int] | set[int]) -> dict[int, mmap.mmap | bytes]:
        """The map of each local shard in ``shards`` (the ones of a batch), each checked unchanged first.

        Formats slice their records out of these themselves (no copy but the record's).
        """
        out = {}
        for i in shards:
            self._check(i)
            out[i] = self._map(i)
        return out

    def read_many(self, ranges: Sequence[tuple[int, int, int]]) -> list[bytes]:
        """The bytes ``[start, end)`` of shard ``i`` for each ``(i, start, end)``."""
        if not ranges:
            return []
        lean = self._lean_client() if self.remote else None
        if lean is not None:
            out: list[Any] = self._read_lean(lean, ranges)
        elif self.remote:
            fs, all_paths = self._filesystem()
            paths = [all_paths[i] for i, _, _ in ranges]
            try:
                out = fs.cat_ranges(paths, [s for _, s, _ in ranges], [e for _, _, e in ranges],
                                    on_error="raise")
            except Exception as e:
                raise describe_error(e, self.shards[ranges[0][0]].url,
                                     f"reading {len(ranges)} byte ranges") from e
        else:
            grouped = in_shard_groups(np.arange(len(ranges)), np.array([i for i, _, _ in ranges], dtype=np.int64),
                                      lambda k: self.read_many([ranges[j] for j in k.tolist()]))
            if grouped is not None:
                return grouped
            maps = self.local_buffers({i for i, _, _ in ranges})
            out = [maps[i][start:end] for i, start, end in ranges]
        for (i, start, end), data in zip(ranges, out, strict=True):
            if isinstance(data, BaseException):
                raise describe_error(data, self.shards[i].url, f"reading bytes [{start}, {end})")
            if len(data) != end - start:
                raise CorruptSourceError(
                    f"shard {self.shards[i].url!r} is shorter than its index says: bytes [{start}, {end}) "
                    f"gave {len(data)} (the file was truncated or replaced); make the source again")
        return [bytes(d) for d in out]

    def open_stream(self, i: int) -> IO[bytes]:
        """A sequential reader of shard ``i`` (to build its index)."""
        url = self.shards[i].url
        try:
            lean = self._lean_client() if self.remote else None
            if lean is not None:  # whole blocks of the object, one range request each
                from thresher.sources.formats.parquet.remote import RangeFile, RangeStats

                raw = RangeFile(self.shards[i], self.storage_options, _TIMEOUT_S, RangeStats(),
                                {url.partition("://")[0]: lean})
                return io.BufferedReader(raw, buffer_size=_STREAM_BLOCK)
            if self.remote:
                fs, paths = self._filesystem()
                return fs.open(paths[i], "rb", block_size=_STREAM_BLOCK)
            return open(url, "rb", buffering=0)
        except Exception as e:
            raise describe_error(e, url, "opening it") from e

    def close(self) -> None:
        """Lets go of maps, connections and threads (reads make them again)."""
        if self._pid == os.getpid():
            for m in self._maps.values():
                if isinstance(m, mmap.mmap):
                    m.close()
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            if isinstance(self._lean, LeanClient):
                self._lean.close()
        self._maps, self._lean, self._pool = {}, _UNSET, None

    def __del__(self) -> None:
        try:  # noqa: SIM105 - not contextlib: at interpreter exit its module global may be None
            self.close()
        except Exception:
            pass

