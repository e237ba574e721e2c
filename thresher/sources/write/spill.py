"""Spill runs: the files through which ``thresher.beam`` exchanges records between its steps.

A distributed prepare must move every record from the worker that encoded it to the worker
that writes its shard. Instead of handing the records to the runner's shuffle, each encoder
writes them into *runs*, the way MapReduce's map tasks do: a run is a file of records sorted
by sort key (at most ``RUN_BYTES`` of them, so an encoder holds one run), with a small
``.keys`` file beside it (the sort keys and where each record starts). What goes through the
runner is then only metadata: a run's path and counts (``Run``), its records per bucket
(``RunIndex``, from ``index_run``), and byte ranges of runs (``read_range``). A shard
writer reads, from each run, the one contiguous byte range that holds its buckets.

Paths are local paths or fsspec URLs (``s3://``, ``gs://``, ...; ``storage_options`` are
passed to fsspec). A run is referenced only after it was written whole, so a worker that
dies mid-write leaves an unreferenced file, removed with the spill directory.

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> run = write_run(os.path.join(d, "r0"), [(b"b", b"rec-b"), (b"a", b"rec-a"), (b"c", b"")])
    >>> run.count, run.nbytes
    (3, 10)
    >>> idx = index_run(run, bucket=lambda sk: 0 if sk < b"c" else 1)
    >>> idx.buckets.tolist(), idx.counts.tolist()
    ([0, 1], [2, 1])
    >>> list(read_range(run.path, int(idx.offsets[0]), int(idx.offsets[1]), 2))
    [(b'a', b'rec-a'), (b'b', b'rec-b')]
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import shutil
import struct
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any

import numpy as np

from thresher.errors import CorruptSourceError
from thresher.sources.remote.fs import describe_error, filesystem, is_url
from thresher.sources.remote.fs import read_range as _read_bytes

__all__ = ["RUN_BYTES", "Run", "RunIndex", "index_run", "read_range", "remove_tree", "write_run"]

RUN_BYTES = 32 << 20  # records per run (an encoder holds one run), in bytes
_FRAME = struct.Struct("<II")  # sort key length, record length; then the two
_KEYS = ".keys"

StorageOptions = Mapping[str, Any] | None


@dataclasses.dataclass(frozen=True)
class Run:
    """A written run: its path, number of records and bytes of records (frames not counted)."""

    path: str
    count: int
    nbytes: int


@dataclasses.dataclass(frozen=True)
class RunIndex:
    """Where each bucket's records lie in a run: ``buckets`` (increasing), ``counts``, and
    ``offsets`` (``len(buckets) + 1`` byte offsets; bucket ``buckets[i]`` is
    ``[offsets[i], offsets[i + 1])``). Its size is bounded by the number of buckets."""

    run: Run
    buckets: np.ndarray
    counts: np.ndarray
    offsets: np.ndarray


@contextlib.contextmanager
def _open_write(path: str, storage_options: StorageOptions) -> Iterator[IO[bytes]]:
    """A file to write ``path`` through (streamed: fsspec uploads it in parts for a URL)."""
    if not is_url(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            yield f
        return
    fs, inner = filesystem(path, storage_options)
    try:
        with fs.open(inner, "wb") as f:
            yield f
    except (OSError, ValueError, RuntimeError) as e:
        raise describe_error(e, path, "writing a spill run") from e


def _read_all(path: str, storage_options: StorageOptions) -> bytes:
    if is_url(path):
        fs, inner = filesystem(path, storage_options)
        try:
            return bytes(fs.cat_file(inner))
        except Exception as e:
            raise describe_error(e, path, "reading a spill run's keys") from e
    with open(path, "rb") as f:
        return f.read()


def write_run(path: str, items: list[tuple[bytes, bytes]], storage_options: StorageOptions = None) -> Run:
    """Sorts ``(sort key, record)`` pairs in place and writes them as a run at ``path``."""
    items.sort(key=lambda kv: kv[0])
    starts = np.empty(len(items) + 1, np.int64)
    pos = nbytes = 0
    with _open_write(path, storage_options) as f:
        for i, (sk, rec) in enumerate(items):
            starts[i] = pos
            f.write(_FRAME.pack(len(sk), len(rec)))
            f.write(sk)
            f.write(rec)
            pos += _FRAME.size + len(sk) + len(rec)
            nbytes += len(rec)
    starts[-1] = pos
    keys = io.BytesIO()
    np.savez(keys, starts=starts, key_ends=np.cumsum([len(sk) for sk, _ in items], dtype=np.int64),
             keys=np.frombuffer(b"".join(sk for sk, _ in items), np.uint8))
    with _open_write(path + _KEYS, storage_options) as f:
        f.write(keys.getbuffer())
    return Run(path, len(items), nbytes)


def index_run(run: Run, bucket: Callable[[bytes], int], storage_options: StorageOptions = None) -> RunIndex:
    """Reads a run's keys and counts its records per bucket (``bucket`` must not decrease
    with the sort key, which both of ``plan``'s bucket functions satisfy)."""
    try:
        with np.load(io.BytesIO(_read_all(run.path + _KEYS, storage_options)), allow_pickle=False) as z:
            starts, key_ends, blob = z["starts"], z["key_ends"], z["keys"].tobytes()
    except (OSError, ValueError, KeyError) as e:
        raise CorruptSourceError(f"spill run {run.path + _KEYS!r} cannot be read ({e}); was the spill "
                                 "directory changed while the pipeline ran?") from e
    if len(starts) != run.count + 1 or len(key_ends) != run.count:
        raise CorruptSourceError(f"spill run {run.path!r} has {len(key_ends)} keys, {run.count} were written")
    lo = np.concatenate([[0], key_ends[:-1]]) if run.count else key_ends
    ids = np.fromiter((bucket(blob[a:b]) for a, b in zip(lo.tolist(), key_ends.tolist(), strict=True)),
                      np.int64, run.count)
    if run.count and np.any(np.diff(ids) < 0):
        raise CorruptSourceError(f"spill run {run.path!r} is not in sort-key order")
    buckets, first, counts = np.unique(ids, return_index=True, return_counts=True)
    offsets = np.append(starts[first], starts[-1]).astype(np.int64)
    return RunIndex(run, buckets, counts.astype(np.int64), offsets)


def read_range(path: str, start: int, end: int, count: int,
               storage_options: StorageOptions = None) -> Iterator[tuple[bytes, bytes]]:
    """The ``count`` ``(sort key, record)`` pairs in bytes ``[start, end)`` of a run, in order."""
    if is_url(path):
        fs, inner = filesystem(path, storage_options)
        try:
            data = _read_bytes(fs, inner, path, start, end)
        except CorruptSourceError:
            raise
        except Exception as e:
            raise describe_error(e, path, f"reading bytes [{start}, {end}) of a spill run") from e
    else:
        data = _read_bytes(None, path, path, start, end)
    pos = n = 0
    while pos + _FRAME.size <= len(data):
        klen, rlen = _FRAME.unpack_from(data, pos)
        body = pos + _FRAME.size
        if body + klen + rlen > len(data):
            break
        yield data[body:body + klen], data[body + klen:body + klen + rlen]
        pos, n = body + klen + rlen, n + 1
    if pos != len(data) or n != count:
        raise CorruptSourceError(f"spill run {path!r}: bytes [{start}, {end}) hold {n} whole records, "
                                 f"the index says {count}")


def remove_tree(path: str, storage_options: StorageOptions = None) -> None:
    """Removes a spill directory (or prefix) and everything under it; missing is fine."""
    if not is_url(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    fs, inner = filesystem(path, storage_options)
    try:
        if fs.exists(inner):
            fs.rm(inner, recursive=True)
    except FileNotFoundError:
        return
    except Exception as e:
        raise describe_error(e, path, "removing the spill directory") from e
