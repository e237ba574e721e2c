"""A Parquet object in a bucket (or behind HTTP) as the seekable file pyarrow reads.

Each ``read`` is one range request through thresher's byte-range clients
(:mod:`thresher.sources.remote`: the lean HTTP client where it serves the URL, fsspec
otherwise). pyarrow reads the footer (the last 64 KiB, then the rest of the footer if it
is longer) and then, with ``pre_buffer``, only the column chunks of the row groups and
columns asked for, coalesced into few requests. ``RangeStats`` counts the requests and
bytes of one source in one process.

Example:
    >>> import os, tempfile
    >>> from thresher.sources.remote.fs import RemoteObject
    >>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"0123456789")
    >>> stats = RangeStats()
    >>> f = RangeFile(RemoteObject(path, 10), None, 10.0, stats)
    >>> _ = f.seek(4); f.read(3), stats.requests, stats.bytes
    (b'456', 1, 3)
"""

from __future__ import annotations

import io
import threading
from collections.abc import Mapping
from typing import Any

from thresher.errors import SourceError
from thresher.sources.remote.fs import RemoteObject, describe_error, filesystem, is_url, read_range
from thresher.sources.remote.lean import client_for

__all__ = ["RangeFile", "RangeStats", "open_ranges"]


class RangeStats:
    """Range requests and bytes fetched (thread-safe counters)."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.requests += 1
            self.bytes += n


def open_ranges(url: str, storage_options: Mapping[str, Any] | None, timeout: float,
                clients: dict[str, Any] | None = None) -> Any:
    """A function ``read(start, end) -> bytes`` for ``url`` (a local path reads with pread).

    ``clients`` keeps one lean HTTP client per scheme (making one costs milliseconds: its
    TLS context); pass the same dict for every file of a source in a process.
    """
    if not is_url(url):
        return lambda start, end: read_range(None, url, url, start, end)
    scheme = url.partition("://")[0]
    if clients is not None and scheme in clients:
        lean = clients[scheme]
    else:
        lean = client_for(url, storage_options, timeout)
        if clients is not None:
            clients[scheme] = lean
    if lean is not None:
        return lambda start, end: _checked(lean.cat_file(url, start, end), url, start, end)
    fs, path = filesystem(url, storage_options)
    return lambda start, end: read_range(fs, path, url, start, end)


def _checked(data: bytes, url: str, start: int, end: int) -> bytes:
    if len(data) != end - start:
        from thresher.errors import CorruptSourceError

        raise CorruptSourceError(
            f"{url!r} is shorter than expected: asked for bytes [{start}, {end}), got {len(data)} "
            "(the object was truncated or replaced after the source was opened)")
    return bytes(data)


class RangeFile(io.RawIOBase):
    """A read-only, seekable file over one object; every ``read`` is one range request."""

    def __init__(self, obj: RemoteObject, storage_options: Mapping[str, Any] | None,
                 timeout: float, stats: RangeStats, clients: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.obj, self._pos, self._stats = obj, 0, stats
        self._read = open_ranges(obj.url, storage_options, timeout, clients)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.obj.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def size(self) -> int:
        return self.obj.size

    def read(self, n: int = -1) -> bytes:
        end = self.obj.size if n is None or n < 0 else min(self.obj.size, self._pos + n)
        if end <= self._pos:
            return b""
        try:
            data = self._read(self._pos, end)
        except SourceError:
            raise
        except Exception as e:
            raise describe_error(e, self.obj.url, f"reading bytes [{self._pos}, {end})") from e
        self._stats.add(len(data))
        self._pos = end
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)
