"""ArrayRecordSource: one index space over one or more ArrayRecord files.

Files are opened lazily, in the process that reads them, so a source pickles to a
list of paths and lengths and can be sent to worker processes cheaply.

URLs (``s3://``, ``gs://``, ``memory://``, any fsspec URL) are read with thresher's own
reader of the format over byte ranges (:mod:`thresher.sources.remote`); local paths use
array_record's native reader unless ``reader="ranges"`` is asked for.

Native reads use array_record's range read, ``reader.read(start, stop)``: one call for a run of
consecutive keys, one call per key otherwise. Its other two read paths cost time that
grows with the size of the file: ``read([k])`` about 60 us per record at 60,000 records,
and the batched ``read(keys)`` 12x slower per record than range reads at 1,000,000
records (measured with array_record 0.8; see benchmarks/README.md).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from thresher._validate import user_path
from thresher.errors import ConfigError, CorruptSourceError, SourceError, SourceNotFoundError
from thresher.sources.formats.array_record.files import ReaderCache, default_max_open, open_reader, record_counts
from thresher.sources.protocol import check_key, check_keys
from thresher.sources.remote.fs import RemoteObject, expand, is_url, local_path
from thresher.sources.remote.options import RemoteReadOptions

if TYPE_CHECKING:
    from thresher.sources.remote.reader import RangeReader

__all__ = ["ARRAY_RECORD_DEFAULT_GROUP_SIZE", "AUTO_RANGES_GROUP_SIZE", "ArrayRecordSource", "group_size_of",
           "resolve_paths", "writer_options"]

PathLike = Union[str, "os.PathLike[str]"]
_GLOB_CHARS = frozenset("*?[")
#: Reads in flight a source of URLs suggests to the loader: one thread reads the next
#: batches, each whole (its requests concurrent), while this one is transformed. More
#: threads would cut a batch into slices that coalesce fewer neighbouring chunks (in
#: benchmarks/remote_read.py, group_size 64: 2x slower with 2 or 4).
REMOTE_READS_IN_FLIGHT = 1
#: ``reader="auto"`` reads local files of chunks this large or larger through byte ranges and the
#: chunk cache. array_record's native reader decodes a whole chunk for every record read out of
#: order (``python -m benchmarks.array_record_readers``; benchmarks/README.md has the figures):
#: in a full shuffle over data 6x the cache the native reader wins at group_size 256 and below,
#: the chunk cache from 1,024 on; in a block shuffle the chunk cache wins from 64 on.
AUTO_RANGES_GROUP_SIZE = 1024
#: array_record's group size where a file's writer options do not name one.
ARRAY_RECORD_DEFAULT_GROUP_SIZE = 65536


def resolve_paths(paths: PathLike | Sequence[PathLike]) -> list[str]:
    """Expands a path, a glob, or a list of them into a sorted-per-glob list of files.

    Raises SourceNotFoundError naming the path or pattern that matched nothing, and
    ConfigError (a ValueError, as in Grain) when no path is given at all.
    """
    items = _items(paths)
    out: list[str] = []
    for item in items:
        p = local_path(os.fspath(item))
        if _GLOB_CHARS & set(p):
            matches = sorted(glob.glob(p))
            if not matches:
                raise SourceNotFoundError(f"the pattern {p!r} matches no file")
            out.extend(matches)
        elif os.path.isfile(p):
            out.append(p)
        elif os.path.isdir(p):
            raise SourceNotFoundError(
                f"{p!r} is a directory; pass the ArrayRecord files in it (e.g. {p}/*.array_record*)"
                " or use thresher.data_source() for a prepared dataset directory"
            )
        else:
            raise SourceNotFoundError(f"ArrayRecord file {p!r} does not exist")
    return out


def _items(paths: PathLike | Sequence[PathLike]) -> list[str]:
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise ConfigError("ArrayRecordSource: no paths given: pass a file path, a glob or a list of them")
    return [user_path(p) for p in items]


def _objects(items: list[str], storage_options: Mapping[str, Any] | None) -> list[RemoteObject]:
    """URLs and local paths (globs expanded) with their sizes, in order."""
    out: list[RemoteObject] = []
    urls: list[str] = []  # a run of URLs, looked up together (one listing, or requests at once)
    for p in items:
        if is_url(p):
            urls.append(p)
            continue
        if urls:
            out.extend(expand(urls, storage_options))
            urls = []
        out.extend(RemoteObject(q, os.path.getsize(q)) for q in resolve_paths(p))
    if urls:
        out.extend(expand(urls, storage_options))
    return out


def writer_options(path: str) -> dict[str, str]:
    """The options a local ArrayRecord file was written with, from its footer (e.g.
    ``{"group_size": "1", "zstd": "3", "transpose": "false", ...}``)."""
    reader = open_reader(path)
    try:
        text = str(reader.writer_options_string())
    finally:
        reader.close()
    out = {}
    for option in text.split(","):
        name, _, value = option.partition(":")
        if name.strip():
            out[name.strip()] = value.strip()
    return out


def group_size_of(options: Mapping[str, str]) -> int:
    """The records per chunk in :func:`writer_options` (array_record's default where not named)."""
    value = options.get("group_size", "")
    return int(value) if value.isdigit() else ARRAY_RECORD_DEFAULT_GROUP_SIZE


def _importable(name: str) -> bool:
    """Whether ``import name`` would find a module (without importing it)."""
    if name in sys.modules:
        return sys.modules[name] is not None  # None: imports of it are blocked
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _auto_reader(paths: list[str]) -> str:
    """``reader="auto"`` for local files: "ranges" when the first file's chunks hold
    ``AUTO_RANGES_GROUP_SIZE`` records or more and the byte-range reader can decode them here
    (not transposed; the library of its compression installed), else "native" (also when the
    file cannot be opened: the native reader's own checks then name the problem)."""
    if not paths:
        return "native"
    try:
        options = writer_options(paths[0])
    except SourceError:
        return "native"
    if group_size_of(options) < AUTO_RANGES_GROUP_SIZE or options.get("transpose") == "true":
        return "native"
    library = ("zstandard" if "zstd" in options or not {"brotli", "snappy", "uncompressed"} & options.keys()
               else "cramjam" if {"brotli", "snappy"} & options.keys() else None)
    if library is not None and not _importable(library):
        return "native"  # the chunk cache would need the `remote` extra: the native reader reads it
    return "ranges"


def _is_run(keys: list[int]) -> bool:
    """True if ``keys`` are consecutive increasing integers."""
    return bool(np.all(np.diff(np.asarray(keys, dtype=np.int64)) == 1))


class ArrayRecordSource:
    """Random access over the records of ArrayRecord files, as ``bytes``.

    Args:
        paths: a file path, a glob pattern (``"data/train.array_record*"``), or a list
            of them; URLs (``s3://bucket/part-*.array_record``) and URL globs too. Files
            are taken in the given order, globs sorted; together they form one index
            space ``[0, sum of lengths)``.
        storage_options: fsspec options for URLs (credentials, endpoint, ...), e.g.
            ``{"anon": True}`` or ``{"client_kwargs": {"endpoint_url": ...}}``.
        reader: ``"auto"`` (byte ranges for URLs; for local files array_record's native
            reader, or byte ranges with the chunk cache when the first file was written with
            ``group_size`` >= ``AUTO_RANGES_GROUP_SIZE``, 1,024: array_record's C++ writer
            defaults to 65,536, and its native reader decodes a whole chunk for every record
            read at random), ``"native"`` or ``"ranges"`` (byte ranges for local files too). The
            records are the same with every reader; :attr:`reader` says which one is used.
        read_options: a :class:`~thresher.sources.remote.RemoteReadOptions` for byte-range
            reads (request coalescing, concurrency, timeout, footer cache directory).

        index: keep the files' record counts in a small JSON file next to them
            (see ``array_record_files``), so the next source over them opens fast.
        max_open: readers kept open per process (least recently used closed first); by
            default a quarter of the descriptor limit (``ulimit -n``), at most 4,096, fewer for
            files of many records (their indexes; see ``files.default_max_open``).

    Each file is opened once here to learn its length (on threads), then closed;
    readers are reopened lazily on first read in each process.

    Example:
        >>> import tempfile, os
        >>> from thresher.sources import ArrayRecordSource, write_array_record
        >>> d = tempfile.mkdtemp()
        >>> _ = write_array_record(os.path.join(d, "a.array_record"), [b"x", b"y"])
        >>> _ = write_array_record(os.path.join(d, "b.array_record"), [b"z"])
        >>> src = ArrayRecordSource(os.path.join(d, "*.array_record"))
        >>> len(src), src[2], src.__getitems__([2, 0])
        (3, b'z', [b'z', b'x'])
    """

    #: Local files: batched reads beat threads (see ReadOptions). URLs set
    #: ``REMOTE_READS_IN_FLIGHT`` instead: the loader then starts the reads of the next
    #: batches while this one is transformed (one batched read already issues its requests
    #: concurrently; slices that share a chunk share its fetch, see ``chunk_cache``).
    suggested_reads_in_flight = 0

    def __init__(self, paths: PathLike | Sequence[PathLike], *,
                 storage_options: Mapping[str, Any] | None = None, reader: str = "auto",
                 read_options: RemoteReadOptions | None = None, index: bool = False,
                 max_open: int | None = None) -> None:
        if reader not in ("auto", "native", "ranges"):
            raise ConfigError(f"reader must be 'auto', 'native' or 'ranges', got {reader!r}")
        items = _items(paths)
        remote = [p for p in items if is_url(p)]
        if remote and reader == "native":
            raise ConfigError(f"reader='native' reads local files only, not {remote[0]!r}; use "
                              "reader='auto' or 'ranges' for URLs")
        self._ranges: RangeReader | None = None
        local = None if remote else resolve_paths(items)
        if reader == "auto" and local is not None:
            reader = _auto_reader(local)
        if remote or reader == "ranges":
            from thresher.sources.remote.reader import RangeReader  # only byte-range reads need it

            objects = (_objects(items, storage_options) if local is None
                       else [RemoteObject(q, os.path.getsize(q)) for q in local])
            self._ranges = RangeReader(objects, storage_options, read_options)
            self._paths = [o.url for o in self._ranges.objects]
            lengths = self._ranges.lengths()
            self._sizes = [-1] * len(self._paths)
            if remote or (self._paths and self._ranges.index(0).group_size == 1):
                # URLs: reads wait. Local one-record chunks: the read-ahead thread is what tells the
                # reader a block shuffle's blocks (read whole, checked at once); without it each
                # record is a request (5,000 records/s against 177,000 here, benchmarks/README.md)
                self.suggested_reads_in_flight = REMOTE_READS_IN_FLIGHT
        else:
            assert local is not None
            self._paths = local
            # Counted in parallel; cached with index=True. The sizes detect a local file that
            # shrinks under a reader (read_native).
            lengths, self._sizes = record_counts(self._paths, index=index)
        self._lengths = lengths
        self._starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
        self._len = int(self._starts[-1])
        self._max_open = max_open
        self._readers = self._reader_cache()

    def _reader_cache(self) -> ReaderCache:
        most = self._max_open if self._max_open is not None else default_max_open(self._lengths)
        return ReaderCache(lambda i: open_reader(self._paths[i]), most, lambda r: r.close())

    @property
    def reader(self) -> str:
        """``"native"`` (array_record's reader) or ``"ranges"`` (byte ranges and the chunk cache)."""
        return "native" if self._ranges is None else "ranges"

    @property
    def paths(self) -> list[str]:
        """The files, in index order."""
        return list(self._paths)

    @property
    def file_lengths(self) -> list[int]:
        """The number of records in each file, in index order."""
        return list(self._lengths)

    def __len__(self) -> int:
        return self._len

    def record_locations(self, record_keys: Sequence[int]) -> list[tuple[str, int]]:
        """The file of each record and its index in that file (no file is opened).

        Example:
            >>> import tempfile, os
            >>> from thresher.sources import write_array_record
            >>> path = os.path.join(tempfile.mkdtemp(), "one.array_record")
            >>> _ = write_array_record(path, [b"a", b"b", b"c"])
            >>> src = ArrayRecordSource([path, path])      # the same file twice: keys 0..5
            >>> [i for _, i in src.record_locations([4, 0])]
            [1, 0]
        """
        keys = check_keys(record_keys, self._len, repr(self))
        files = np.searchsorted(self._starts, keys, side="right") - 1
        index = keys - self._starts[files]
        paths = self._paths
        return [(paths[f], i) for f, i in zip(files.tolist(), index.tolist(), strict=False)]

    def _reader(self, i: int) -> Any:
        return self._readers.get(i)

    def _read(self, file_index: int, local_keys: list[int]) -> list[bytes]:
        if self._ranges is not None:
            return self._ranges.read([(file_index, k) for k in local_keys])
        try:
            read = self._reader(file_index).read
            n = len(local_keys)
            if n == 0:
                return []
            first = local_keys[0]
            if local_keys[-1] - first == n - 1 and (n < 3 or _is_run(local_keys)):
                records = read(first, first + n)
            else:
                records = [read(k, k + 1)[0] for k in local_keys]
            if b"" in records:
                self._check_unchanged(file_index, local_keys)
            return records
        except SourceError:
            raise
        except Exception as e:
            path = self._paths[file_index]
            if not os.path.exists(path):
                raise SourceNotFoundError(
                    f"ArrayRecord file {path!r} disappeared while reading records {local_keys[:8]}"
                ) from e
            raise CorruptSourceError(
                f"reading records {local_keys[:8]}{'...' if len(local_keys) > 8 else ''} of "
                f"{path!r} failed: {e}. The file may be truncated or corrupt"
            ) from e

    def _check_unchanged(self, file_index: int, local_keys: list[int]) -> None:
        """array_record returns empty records, without an error, for the part of a file that
        was cut off after the reader opened it: an empty record is believed only if the file
        still has the size it had when the source was made."""
        path = self._paths[file_index]
        try:
            size = os.path.getsize(path)
        except OSError:
            size = None
        if size != self._sizes[file_index]:
            now = "is gone" if size is None else f"has {size} bytes"
            raise CorruptSourceError(
                f"ArrayRecord file {path!r} changed while it was read: it had {self._sizes[file_index]} bytes "
                f"and now {now}, so records {local_keys[:8]}{'...' if len(local_keys) > 8 else ''} cannot be "
                "read. Do not modify data files during training; restore the file and resume from the last "
                "state")

    def __getitem__(self, record_key: int) -> bytes:
        k = check_key(record_key, self._len, repr(self))
        f = int(np.searchsorted(self._starts, k, side="right")) - 1
        return self._read(f, [k - int(self._starts[f])])[0]

    def __getitems__(self, record_keys: Sequence[int]) -> list[bytes]:
        keys = check_keys(record_keys, self._len, repr(self))
        if keys.size == 0:
            return []
        if len(self._paths) == 1:
            return self._read(0, keys.tolist())
        files = np.searchsorted(self._starts, keys, side="right") - 1
        if self._ranges is not None:
            local = keys - self._starts[files]
            return self._ranges.read(list(zip(files.tolist(), local.tolist(), strict=False)))
        out: list[Any] = [None] * len(keys)
        for f in np.unique(files).tolist():
            where = np.flatnonzero(files == f)
            records = self._read(f, (keys[where] - self._starts[f]).tolist())
            for i, rec in zip(where.tolist(), records, strict=False):
                out[i] = rec
        return out

    def group_sizes(self) -> list[int]:
        """Each file's records per chunk (its group size), read from the footers once.

        Example:
            >>> import tempfile, os
            >>> from thresher.sources import write_array_record
            >>> path = os.path.join(tempfile.mkdtemp(), "g.array_record")
            >>> _ = write_array_record(path, [b"a", b"b", b"c"], group_size=2)
            >>> ArrayRecordSource(path).group_sizes()
            [2]
        """
        sizes = self.__dict__.get("_group_sizes")
        if sizes is None:
            from thresher.sources.remote.reader import RangeReader

            reader = self._ranges or RangeReader([RemoteObject(p, os.path.getsize(p)) for p in self._paths])
            sizes = self.__dict__["_group_sizes"] = [reader.index(f).group_size for f in range(len(self._paths))]
        return list(sizes)

    def block_boundaries(self, min_records: int) -> np.ndarray:
        """Starts of blocks of whole chunks, at least ``min_records`` records each where a file
        allows (a block never spans two files): thresher.BlockShuffle.of_source uses them.

        Example:
            >>> import tempfile, os
            >>> from thresher.sources import write_array_record
            >>> path = os.path.join(tempfile.mkdtemp(), "b.array_record")
            >>> _ = write_array_record(path, [b"x"] * 10, group_size=3)
            >>> ArrayRecordSource(path).block_boundaries(4).tolist()     # chunks of 3: blocks of 6
            [0, 6]
        """
        parts = []
        for f, g in enumerate(self.group_sizes()):
            step = max(1, -(-int(min_records) // g)) * g
            parts.append(np.arange(int(self._starts[f]), int(self._starts[f + 1]), step, dtype=np.int64))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    @property
    def lookahead_records(self) -> int:
        """How many positions ahead the loader should pass the record keys of to
        :meth:`upcoming` (0: none): ``RemoteReadOptions.lookahead`` for byte-range reads
        with a chunk cache."""
        r = self._ranges
        return r.options.lookahead if r is not None and r.options.cache_bytes else 0

    def upcoming(self, record_keys: Sequence[int]) -> None:
        """The record keys the next reads will ask for, in order: a hint that only chooses
        which cached chunks are evicted first (what is read never depends on it).

        Example:
            >>> import tempfile, os
            >>> from thresher.sources import write_array_record
            >>> path = os.path.join(tempfile.mkdtemp(), "u.array_record")
            >>> _ = write_array_record(path, [b"a", b"b", b"c"])
            >>> from thresher.sources.remote import RemoteReadOptions
            >>> src = ArrayRecordSource(path, reader="ranges", read_options=RemoteReadOptions(lookahead=4096))
            >>> src.upcoming([2, 0]); src.lookahead_records, src[2]
            (4096, b'c')
        """
        if self._ranges is None:
            return
        keys = np.asarray(record_keys, dtype=np.int64).reshape(-1)
        keys = keys[(keys >= 0) & (keys < self._len)]
        files = np.searchsorted(self._starts, keys, side="right") - 1
        self._ranges.upcoming(files, keys - self._starts[files])

    def upcoming_blocks(self, starts: np.ndarray, stops: np.ndarray) -> None:
        """Key ranges ``[starts[i], stops[i])`` read together next (a BlockShuffle's window): with
        byte-range reads and a chunk cache, a read that needs one of their chunks fetches the whole
        block in one coalesced request. A hint only: what is read never depends on it.

        Example:
            >>> import tempfile, os
            >>> from thresher.sources import write_array_record
            >>> path = os.path.join(tempfile.mkdtemp(), "h.array_record")
            >>> _ = write_array_record(path, [b"a", b"b", b"c", b"d"])
            >>> src = ArrayRecordSource(path, reader="ranges")
            >>> src.upcoming_blocks([0], [4]); src[1], src._ranges.requests   # one request: footer and block
            (b'b', 2)
        """
        if self._ranges is None or not self._ranges.options.cache_bytes:
            return
        self._ranges.upcoming_blocks(self._file_blocks(starts, stops))

    def prefetch_blocks(self, starts: np.ndarray, stops: np.ndarray) -> None:
        """Key ranges ``[starts[i], stops[i])`` read after the current blocks (a BlockShuffle's
        next window): as :meth:`upcoming_blocks`, and with byte-range reads of a group_size-1
        file, fetched in the background now if they fit in half the chunk cache. A hint only.

        Example:
            >>> import tempfile, os
            >>> from thresher.sources import write_array_record
            >>> path = os.path.join(tempfile.mkdtemp(), "p.array_record")
            >>> _ = write_array_record(path, [b"a", b"b", b"c", b"d"])
            >>> src = ArrayRecordSource(path, reader="ranges")
            >>> src.prefetch_blocks([0], [4]); src[3]
            b'd'
        """
        if self._ranges is None or not self._ranges.options.cache_bytes:
            return
        self._ranges.prefetch_blocks(self._file_blocks(starts, stops))

    def _file_blocks(self, starts: np.ndarray, stops: np.ndarray) -> list[tuple[int, int, int]]:
        """Key ranges as ``(file, first key, last key)`` in each file (a range may span files)."""
        blocks = []
        for a, b in zip(np.asarray(starts, dtype=np.int64).tolist(), np.asarray(stops, dtype=np.int64).tolist(),
                        strict=True):
            a, b = max(a, 0), min(b, self._len)
            f = int(np.searchsorted(self._starts, a, side="right")) - 1
            while a < b:  # a block may span files
                end = min(b, int(self._starts[f + 1]))
                blocks.append((f, a - int(self._starts[f]), end - 1 - int(self._starts[f])))
                a, f = end, f + 1
        return blocks

    def close(self) -> None:
        """Closes the open readers (they reopen on the next read)."""
        if self._ranges is not None:
            self._ranges.close()
        self._readers.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_readers"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._readers = self._reader_cache()

    def __repr__(self) -> str:
        if len(self._paths) == 1:
            return f"ArrayRecordSource({self._paths[0]!r})"
        return f"ArrayRecordSource(<{len(self._paths)} files, first {self._paths[0]!r}>)"
