"""Reading records of ArrayRecord files by byte ranges, many requests in flight.

Per file the footer index is read once (two range requests at most: the last 64 KiB
plus up to 64 KiB before them, and the rest of the footer if it is longer), kept in a
process-wide cache keyed by URL, size and version (ETag / mtime), and, with
``footer_cache_dir``, on local disk so that worker processes and later runs skip it.

Decoded chunks are kept per process up to ``cache_bytes`` (``chunk_cache``): a chunk
held there, or being fetched by another thread, costs no request. The other chunks of a
batch of keys become one request per run of neighbours: keys in the same chunk share
it, and chunks whose byte extents touch (or lie within ``max_gap_bytes``) are read
together up to ``max_request_bytes``. The requests of a batch, over all its
files, run concurrently on a thread pool of ``max_concurrency`` threads; the batch
fails with a SourceError naming the URL and keys if they are not all back within
``timeout`` seconds. Records are returned only when every request of the batch
succeeded, so nothing half-read is ever delivered.

A file of group_size 1 (a chunk per record) read within the blocks a block shuffle hints
(``upcoming_blocks``) is read by the block: each block is fetched whole (a request per
``max_request_bytes``), every chunk of it is checked at once in C (``_highway.c``: the same
hashes and structure as one chunk at a time, stored zstd blocks copied), and the block's
records are one cache entry. Thousands of one-record entries cost more than the records.

The process-wide footer cache is a deliberate registry: sources over the same objects
in one process share their indexes.

Example:
    >>> import os, tempfile
    >>> from thresher.sources import write_array_record
    >>> from thresher.sources.remote.fs import RemoteObject
    >>> path = os.path.join(tempfile.mkdtemp(), "x.array_record")
    >>> _ = write_array_record(path, [b"a", b"bb", b"ccc"])
    >>> reader = RangeReader([RemoteObject(path, os.path.getsize(path))])
    >>> reader.lengths(), reader.read([(0, 2), (0, 0)])
    ([3], [b'ccc', b'a'])
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import functools
import hashlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from thresher._validate import user_path
from thresher.errors import CorruptSourceError, SourceError
from thresher.sources.remote.block_hints import BlockHints
from thresher.sources.remote.chunk_cache import Block, ChunkCache, Decoded, Held, Raw, cache_cost
from thresher.sources.remote.footer_cache import read_cached, write_cached
from thresher.sources.remote.format import (
    BLOCK_SIZE,
    FileIndex,
    FormatError,
    chunk_records,
    parse_footer,
    parse_postscript,
    read_chunk,
    simple_chunk_records,
    small_chunk_records,
    small_chunks_records,
)
from thresher.sources.remote.fs import RemoteObject, describe_error, filesystem, is_url, read_range
from thresher.sources.remote.lean import client_for
from thresher.sources.remote.options import RemoteReadOptions

__all__ = ["RangeReader", "RemoteReadOptions"]

_FOOTER_GUESS = 64 << 10
_MANY = 8  # one-record chunks of a request checked in one call from this many (fewer: one by one)
_INDEXES: dict[tuple[str, int, str], FileIndex] = {}
_INDEXES_LOCK = threading.Lock()


@dataclasses.dataclass
class _Request:
    file: int
    start: int
    end: int
    chunks: list[int]
    wanted: int  # bytes of the chunks asked for; the rest of [start, end) are gaps


def _close_clients(clients: Mapping[Any, Any]) -> None:
    """Closes the lean clients among a process's filesystems (they keep connections open)."""
    for client in list(clients.values()):
        if hasattr(client, "close"):
            client.close()


def _keys_text(keys: Sequence[int]) -> str:
    shown = ", ".join(str(k) for k in keys[:8])
    return f"record{'s' if len(keys) > 1 else ''} [{shown}{', ...' if len(keys) > 8 else ''}]"


class RangeReader:
    """Records of ArrayRecord objects (URLs or local paths) read by byte ranges.

    Args:
        objects: the files, with their sizes (see :func:`~thresher.sources.remote.fs.expand`).
        storage_options: passed to fsspec for URLs.
        options: a :class:`RemoteReadOptions`.

    Pickles to its arguments; the filesystem, the thread pool and the footer indexes
    are made again in the process that reads.
    """

    def __init__(self, objects: Sequence[RemoteObject],
                 storage_options: Mapping[str, Any] | None = None,
                 options: RemoteReadOptions | None = None) -> None:
        self.objects = list(objects)
        self.storage_options = dict(storage_options or {})
        self.options = options or RemoteReadOptions()
        self._local: dict[str, Any] | None = None
        self.requests = 0
        self.bytes_read = 0
        self.refetches = 0  # chunks read a second time because the first bytes failed their checks
        self.chunks_fetched = 0  # chunks brought by range requests (a refetch not counted again)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_local"] = None
        return state

    def _process(self) -> dict[str, Any]:
        """The per-process state: filesystems, thread pool, indexes (remade after fork)."""
        local = self._local
        if local is None or local["pid"] != os.getpid():
            pool = cf.ThreadPoolExecutor(self.options.max_concurrency,
                                         thread_name_prefix="thresher-range")
            local = self._local = {"pid": os.getpid(), "fs": {}, "indexes": {},
                                   "lock": threading.Lock(), "pool": pool,
                                   "cache": ChunkCache(self.options.cache_bytes), "blocks": BlockHints()}
            # The threads end with the reader, not only at interpreter exit, and its connections close.
            weakref.finalize(self, pool.shutdown, wait=False, cancel_futures=True)
            weakref.finalize(self, _close_clients, local["fs"])
        return local

    def _fs(self, f: int) -> tuple[Any, str]:
        url = self.objects[f].url
        if not is_url(url):
            return None, url
        cache = self._process()["fs"]
        if f not in cache and self.options.client == "lean":
            scheme = url.partition("://")[0]
            if scheme not in cache:  # one lean client per scheme and process (None: fsspec)
                cache[scheme] = client_for(url, self.storage_options, self.options.timeout,
                                           self.options.max_concurrency)
            if cache[scheme] is not None:
                cache[f] = (cache[scheme], url)
        if f not in cache:
            options = dict(self.storage_options)
            if url.startswith(("s3://", "s3a://")):  # botocore's default pool has 10 connections
                config = dict(options.get("config_kwargs") or {})
                config.setdefault("max_pool_connections", self.options.max_concurrency)
                options["config_kwargs"] = config
            cache[f] = filesystem(url, options)
        return cache[f]

    def _fetch(self, f: int, start: int, end: int, what: str, chunks: int = 0) -> bytes:
        """Bytes ``[start, end)`` of file ``f``, counted (with the ``chunks`` they bring)."""
        fs, path = self._fs(f)
        try:
            data = read_range(fs, path, self.objects[f].url, start, end)
        except SourceError:
            raise
        except Exception as e:
            raise describe_error(e, self.objects[f].url, what) from e
        with self._process()["lock"]:
            self.requests += 1
            self.bytes_read += len(data)
            self.chunks_fetched += chunks
        return data

    # --- footers -------------------------------------------------------------------

    def _cache_file(self, f: int) -> str | None:
        folder = self.options.footer_cache_dir
        if folder is None:
            return None
        folder = user_path(folder)
        o = self.objects[f]
        digest = hashlib.sha256(f"{o.url}\0{o.size}\0{o.version}".encode()).hexdigest()[:32]
        return os.path.join(folder, f"{digest}.footer.npz")

    def _load_index(self, f: int) -> FileIndex:
        o = self.objects[f]
        key = (o.url, o.size, o.version)
        with _INDEXES_LOCK:
            if key in _INDEXES:
                return _INDEXES[key]
        cached = self._cache_file(f)
        index = read_cached(cached, o.size) if cached else None
        if index is None:
            index = self._read_footer(f)
            if cached:
                write_cached(cached, index)
        with _INDEXES_LOCK:
            _INDEXES[key] = index
        return index

    def _read_footer(self, f: int) -> FileIndex:
        o = self.objects[f]
        if o.size < BLOCK_SIZE:
            raise CorruptSourceError(f"{o.url!r} ({o.size} bytes) is not an ArrayRecord file: "
                                     "those are at least 64 KiB long")
        try:
            return self._parse_footer(f)
        except FormatError:  # bytes damaged on their way are read again once
            pass
        try:
            return self._parse_footer(f)
        except FormatError as e:
            raise CorruptSourceError(
                f"{o.url!r} ({o.size} bytes) is not a readable ArrayRecord file: {e}. It is "
                "another format, truncated or corrupt; rewrite it with "
                "thresher.sources.write_array_record") from None

    def _parse_footer(self, f: int) -> FileIndex:
        """The index from the postscript and footer of file ``f``, fetched (FormatError if
        they do not verify)."""
        o = self.objects[f]
        start = max(0, o.size - BLOCK_SIZE - _FOOTER_GUESS)
        tail = self._fetch(f, start, o.size, f"reading the footer of {o.url!r}")
        post = o.size - BLOCK_SIZE
        footer_offset = parse_postscript(tail[post - start:], post)
        if not 0 < footer_offset <= post:
            raise FormatError(f"the postscript points at offset {footer_offset}, outside "
                              "the file")
        if footer_offset >= start:
            footer = tail[footer_offset - start:post - start]
        else:
            footer = self._fetch(f, footer_offset, post, f"reading the footer of {o.url!r}")
        return parse_footer(footer, footer_offset, o.size)

    def index(self, f: int) -> FileIndex:
        """The footer index of file ``f`` (read on first use in each process)."""
        local = self._process()
        indexes = local["indexes"]
        if f not in indexes:
            indexes[f] = self._load_index(f)
        return indexes[f]

    def _load_indexes(self, files: Sequence[int]) -> None:
        """Reads the footers of ``files`` not read yet in this process: concurrently, and
        within the timeout."""
        missing = [f for f in files if f not in self._process()["indexes"]]
        self._run([(f"reading the footer of {self.objects[f].url!r}",
                    functools.partial(self.index, f)) for f in missing])

    def lengths(self) -> list[int]:
        """The number of records in each file (footers are read concurrently)."""
        self._load_indexes(range(len(self.objects)))
        return [self.index(f).num_records for f in range(len(self.objects))]

    # --- records -------------------------------------------------------------------

    def _plan(self, f: int, chunks: list[int]) -> list[_Request]:
        """Range requests for the (sorted) ``chunks`` of file ``f``, neighbours coalesced."""
        index = self.index(f)
        starts, ends = index.chunk_offsets, index.chunk_ends()
        out: list[_Request] = []
        if len(chunks) > 1 and chunks[-1] - chunks[0] == len(chunks) - 1:
            # A run of neighbours (a block): no gaps, so only max_request_bytes splits it, as below
            first = chunks[0]
            while first <= chunks[-1]:
                a = int(starts[first])
                stop = max(first, int(np.searchsorted(ends[first:chunks[-1] + 1], a + self.options.max_request_bytes,
                                                      "right")) + first - 1)
                out.append(_Request(f, a, int(ends[stop]), list(range(first, stop + 1)), int(ends[stop]) - a))
                first = stop + 1
            return out
        for c in chunks:
            a, b = int(starts[c]), int(ends[c])
            last = out[-1] if out else None
            # Gaps are read only while they stay under half the wanted bytes, so a request
            # never fetches more than 1.5x the chunks it is for.
            if last is not None and a - last.end <= self.options.max_gap_bytes \
                    and b - last.start <= self.options.max_request_bytes \
                    and 2 * (b - last.start) <= 3 * (last.wanted + b - a):
                last.end = b
                last.chunks.append(c)
                last.wanted += b - a
            else:
                out.append(_Request(f, a, b, [c], b - a))
        return out

    def _serve(self, request: _Request, what: str, needed: frozenset[int] | None = None
               ) -> dict[int, Decoded]:
        """Fetches ``request`` and decodes the chunks ``needed`` (None: all); the others, fetched
        only to fill the cache (the rest of a block), are held as Raw bytes, decoded and checked
        by the first read that needs them (:meth:`_materialize`)."""
        f = request.file
        cache: ChunkCache = self._process()["cache"]
        index = self.index(f)
        data = self._fetch(f, request.start, request.end, what, len(request.chunks))
        ends = index.chunk_ends()
        out = {}
        chunks = request.chunks
        if index.group_size == 1 and len(chunks) >= _MANY:  # a block of one-record chunks: checked at once
            at = np.asarray(chunks, dtype=np.int64)
            many = small_chunks_records(data, request.start, index.chunk_offsets[at], ends[at],
                                        self.options.verify_headers)
            if many is not None:
                done, rest = [], []
                for c, decoded in zip(chunks, many, strict=True):
                    if decoded is None:
                        rest.append(c)
                    else:
                        done.append(((f, c), decoded))
                        if needed is None or c in needed:
                            out[c] = decoded
                cache.fulfil_many(done)
                chunks = rest
        for c in chunks:
            begin, end = int(index.chunk_offsets[c]), int(ends[c])
            if needed is not None and c not in needed:
                cache.fulfil((f, c), Raw(data[begin - request.start:end - request.start], begin, end))
                continue
            out[c] = decoded = self._checked(f, c, data, request.start, begin, end, what)
            cache.fulfil((f, c), decoded)
        return out

    def _checked(self, f: int, c: int, data: bytes, base: int, begin: int, end: int, what: str) -> Decoded:
        """Chunk ``c`` of file ``f`` decoded from ``data`` (the file's bytes from ``base``); bytes
        damaged on their way (a torn or altered response) are fetched again once, and a chunk
        that fails twice is corrupt where it is stored (CorruptSourceError)."""
        try:
            return self._decode(f, c, data, base, begin, end)
        except FormatError:
            pass
        with self._process()["lock"]:
            self.refetches += 1
        again = self._fetch(f, begin, end, what)
        try:
            return self._decode(f, c, again, begin, begin, end)
        except FormatError as again_error:
            index = self.index(f)
            g = index.group_size
            last = min(c * g + g, index.num_records) - 1
            raise CorruptSourceError(
                f"records {c * g}..{last} of {self.objects[f].url!r} (chunk {c} at offset {begin}, "
                f"bytes [{begin}, {end})) cannot be read, fetched twice: {again_error}. No record of "
                "this chunk is returned; restore the object from a good copy or rewrite it") from None

    def _materialize(self, f: int, c: int, held: Held) -> Decoded:
        """A chunk held as Raw bytes decoded and checked (and kept decoded); a decoded one as it is."""
        if not isinstance(held, Raw):
            return cast(Decoded, held)  # a Block is held under a block's key, never a chunk's
        decoded = self._checked(f, c, held.data, held.begin, held.begin, held.end,
                                f"reading chunk {c} of {self.objects[f].url!r}")
        self._process()["cache"].replace((f, c), decoded)
        return decoded

    def _decode(self, f: int, c: int, data: bytes, base: int, begin: int, end: int) -> Decoded:
        """The records of chunk ``c`` of file ``f`` (bytes ``[begin, end)``) from ``data`` (the
        file's bytes from ``base``): hashes verified, structure checked against the footer."""
        index = self.index(f)
        g = index.group_size
        if g == 1:  # a chunk per record: the short path, which leaves anything unusual to the general one
            small = small_chunk_records(data, base, begin, end, self.options.verify_headers)
            if small is not None:
                return small[0], small[1]
        want = min(g, index.num_records - c * g)
        if want > 1:  # stored (incompressible) values copied once, in C; None: the general path decides
            fast = chunk_records(data, base, begin, end, self.options.verify_headers)
            if fast is not None and len(fast[0]) - 1 == want:
                return fast
        header, body = read_chunk(data, base, begin, end, self.options.verify_headers)
        bounds, values = simple_chunk_records(header, body)
        if header.num_records != want:
            raise FormatError(f"the chunk holds {header.num_records} records, the footer says {want}")
        return bounds, values

    def _run(self, tasks: list[tuple[str, Callable[[], Any]]]) -> list[Any]:
        """Runs ``(description, fn)`` tasks on the pool: all results, or the first error, or
        a SourceError quoting the description of one that is not back within the timeout."""
        if not tasks:
            return []
        pool = self._process()["pool"]
        futures = [pool.submit(fn) for _, fn in tasks]
        done, pending = cf.wait(futures, timeout=self.options.timeout,
                                return_when=cf.FIRST_EXCEPTION)
        for p in pending:
            p.cancel()
        for fut in futures:
            error = fut.exception() if fut in done else None
            if error is not None:
                raise error
        if pending:
            what = tasks[futures.index(next(iter(pending)))][0]
            raise SourceError(f"{what} did not finish within {self.options.timeout:g} s "
                              "(RemoteReadOptions.timeout); the storage is unreachable or too "
                              "slow")
        return [fut.result() for fut in futures]

    def read(self, items: Sequence[tuple[int, int]]) -> list[bytes]:
        """The records of ``(file, key in that file)`` pairs, in order."""
        if not items:
            return []
        pairs = np.asarray(items, dtype=np.int64).reshape(-1, 2)
        files = np.unique(pairs[:, 0]).tolist()
        self._load_indexes(files)
        groups = {f: self.index(f).group_size for f in files}
        local = self._process()
        if not (self.options.cache_bytes and local["blocks"] and 1 in groups.values()):
            return self._read_chunks(pairs, files, groups)
        # records of group_size-1 files in hinted blocks: read by the block, one cache entry each (a
        # block stored in more than half the cache is read chunk by chunk: as one entry it could not
        # stay long enough to serve its reads)
        lo, hi = local["blocks"].locate(pairs[:, 0], pairs[:, 1])
        for f in files:
            mine = np.flatnonzero((pairs[:, 0] == f) & (lo >= 0))
            if mine.size and groups[f] != 1:
                lo[mine] = -1
            elif mine.size:
                index = self.index(f)
                stored = index.chunk_ends()[hi[mine]] - index.chunk_offsets[lo[mine]]
                lo[mine[stored > self.options.cache_bytes // 2]] = -1
        inside = lo >= 0
        if inside.all():
            return self._read_blocks(pairs, lo, hi)
        out: list[bytes] = [b""] * len(pairs)
        for part, read in ((inside, self._read_blocks), (~inside, None)):
            at = np.flatnonzero(part)
            if not at.size:
                continue
            sub = pairs[at]
            got = read(sub, lo[at], hi[at]) if read else self._read_chunks(sub, np.unique(sub[:, 0]).tolist(), groups)
            for i, record in zip(at.tolist(), got, strict=True):
                out[i] = record
        return out

    def _read_blocks(self, pairs: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[bytes]:
        """The records of ``pairs`` (of group_size-1 files) in the blocks ``[lo, hi]`` (chunks):
        each block is one cache entry, fetched whole (a few requests), all checked on arrival."""
        # one code per block: a block is known by its file and first chunk (a 1-D unique; one of
        # rows costs ten times as much, on every batch)
        _, first, which = np.unique(pairs[:, 0] << 40 | lo, return_index=True, return_inverse=True)
        keys = [(f, a, b) for f, a, b in zip(pairs[first, 0].tolist(), lo[first].tolist(), hi[first].tolist(),
                                             strict=True)]
        cache: ChunkCache = self._process()["cache"]
        deadline = time.monotonic() + self.options.timeout
        hits, waits, mine = cache.claim(keys)
        try:
            held: dict[Any, Held] = dict(hits)
            held.update(self._fetch_blocks(mine))
        except BaseException as e:
            cache.abandon(mine, e)
            raise
        for key, future in waits.items():  # blocks another thread of this process is fetching
            try:
                held[key] = future.result(timeout=max(0.0, deadline - time.monotonic()))
            except cf.TimeoutError:
                raise SourceError(f"reading records {key[1]}..{key[2]} of {self.objects[key[0]].url!r} did not "
                                  f"finish within {self.options.timeout:g} s (RemoteReadOptions.timeout); the "
                                  "storage is unreachable or too slow") from None
        blocks = [cast(Block, held[k]).records for k in keys]
        return [blocks[b][i] for b, i in zip(np.ravel(which).tolist(), (pairs[:, 1] - lo).tolist(), strict=True)]

    def _fetch_blocks(self, keys: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], Block]:
        """Fetches the blocks ``(file, first chunk, last chunk)`` (their requests all concurrently),
        decodes and checks every chunk, and hands each block to the cache as one entry."""
        tasks: list[tuple[str, Callable[[], Any]]] = []
        owners: list[tuple[int, ...]] = []
        for key in keys:
            f, lo, hi = key
            for r in self._plan(f, list(range(lo, hi + 1))):
                what = f"reading records {r.chunks[0]}..{r.chunks[-1]} of {self.objects[f].url!r}"
                tasks.append((what, functools.partial(self._block_records, r, what)))
                owners.append(key)
        parts: dict[tuple[int, ...], list[bytes]] = {key: [] for key in keys}
        for key, records in zip(owners, self._run(tasks), strict=True):
            parts[key].extend(records)  # the requests of a block, in chunk order
        local = self._process()
        cache: ChunkCache = local["cache"]
        out = {}
        for key, records in parts.items():
            out[key] = block = Block(records, sum(map(len, records)))
            cache.fulfil(key, block)
            f, lo, hi = key
            index = self.index(f)
            stored = int(index.chunk_ends()[hi]) - int(index.chunk_offsets[lo])
            local["block_ratio"] = cache_cost(block) / max(1, stored)  # a block's cost per stored byte, lately
        declined = local.pop("declined", None) if out else None
        if declined is not None and declined[1] * local["block_ratio"] <= self.options.cache_bytes // 2:
            self._start_prefetch(declined[0])
        return out

    def _block_records(self, request: _Request, what: str) -> list[bytes]:
        """The records of ``request``'s one-record chunks, fetched, decoded and checked: all at once in C
        where it can, else each as a single chunk is (bytes damaged on their way fetched again once)."""
        f = request.file
        index = self.index(f)
        data = self._fetch(f, request.start, request.end, what, len(request.chunks))
        at = np.asarray(request.chunks, dtype=np.int64)
        begins, ends = index.chunk_offsets[at], index.chunk_ends()[at]
        many = small_chunks_records(data, request.start, begins, ends, self.options.verify_headers)
        if many is None:
            many = [None] * len(at)
        out = []
        for i, decoded in enumerate(many):
            if decoded is None:
                bounds, values = self._checked(f, request.chunks[i], data, request.start, int(begins[i]),
                                               int(ends[i]), what)
                out.append(values[bounds[0]:bounds[1]])
            else:
                out.append(decoded[1])
        return out

    def _read_chunks(self, pairs: np.ndarray, files: list[int], groups: Mapping[int, int]) -> list[bytes]:
        """The records of ``pairs`` read chunk by chunk through the cache."""
        wanted = [(f, c) for f in files for c in np.unique(pairs[pairs[:, 0] == f, 1] // groups[f]).tolist()]
        cache: ChunkCache = self._process()["cache"]
        deadline = time.monotonic() + self.options.timeout
        wanted_set = set(wanted)
        block = []  # the rest of the hinted blocks (a block shuffle's window, block_hints) of missing chunks
        if self.options.cache_bytes:
            block = self._process()["blocks"].expand([k for k in wanted if not cache.holds(k)])
        chunks, waits, mine = cache.claim(wanted, [k for k in block if k not in wanted_set])
        try:
            mine += cache.claim(self._around(mine, wanted_set))[2]
            chunks.update(self._fetch_chunks(pairs, groups, mine))
        except BaseException as e:
            cache.abandon(mine, e)
            raise
        held: dict[tuple[int, ...], Held] = dict(chunks)
        for (f, c), future in waits.items():  # chunks another thread of this process is fetching
            try:
                held[(f, c)] = future.result(timeout=max(0.0, deadline - time.monotonic()))
            except cf.TimeoutError:
                g = groups[f]
                raise SourceError(f"reading records {c * g}..{c * g + g - 1} of {self.objects[f].url!r} did not "
                                  f"finish within {self.options.timeout:g} s (RemoteReadOptions.timeout); the "
                                  "storage is unreachable or too slow") from None
        decoded = {key: self._materialize(key[0], key[1], h) for key, h in held.items()}
        out = []
        for f, k in pairs.tolist():
            g = groups[f]
            bounds, values = decoded[(f, k // g)]
            i = k % g
            out.append(values[bounds[i]:bounds[i + 1]])
        return out

    def _around(self, claimed: Sequence[tuple[int, ...]], wanted: set[tuple[int, int]]) -> list[tuple[int, int]]:
        """With ``fill_cache``, when every object together fits in a quarter of the cache and
        the cache has not evicted anything yet (decoded chunks may be larger than the objects:
        once they do not fit, filling stops): the other chunks of the aligned
        ``max_request_bytes`` windows that hold ``claimed``."""
        o = self.options
        cache: ChunkCache = self._process()["cache"]
        if not (o.fill_cache and 0 < 4 * sum(x.size for x in self.objects) <= o.cache_bytes) or cache.evictions:
            return []
        span = o.max_request_bytes
        out: set[tuple[int, int]] = set()
        for f, c in claimed:
            starts = self.index(f).chunk_offsets
            w = int(starts[c]) // span
            lo, hi = np.searchsorted(starts, [w * span, (w + 1) * span]).tolist()
            out.update((f, k) for k in range(lo, hi))
        return sorted(out - wanted)

    def _fetch_chunks(self, pairs: np.ndarray, groups: Mapping[int, int],
                      claimed: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], Decoded]:
        """Fetches and decodes the ``claimed`` chunks: one request per run of neighbours,
        all concurrently; each is handed to the cache as soon as it is decoded."""
        tasks: list[tuple[str, Callable[[], Any]]] = []
        requests: list[_Request] = []
        for f in sorted({f for f, _ in claimed}):
            keys = pairs[pairs[:, 0] == f, 1]
            g = groups[f]
            for r in self._plan(f, sorted(c for ff, c in claimed if ff == f)):
                inside = keys[np.isin(keys // g, r.chunks)].tolist()
                what = (f"reading {_keys_text(inside)}" if inside else
                        f"reading records {r.chunks[0] * g}..{r.chunks[-1] * g + g - 1}")
                what += f" of {self.objects[f].url!r}"
                needed = frozenset(int(c) for c in np.unique(keys // g).tolist())
                tasks.append((what, functools.partial(self._serve, r, what, needed)))
                requests.append(r)
        chunks: dict[tuple[int, ...], Decoded] = {}
        for r, res in zip(requests, self._run(tasks), strict=True):
            for c, decoded in res.items():
                chunks[(r.file, c)] = decoded
        return chunks

    def upcoming(self, files: np.ndarray, keys: np.ndarray) -> None:
        """The records (``files[i]``, ``keys[i]``) the next reads will ask for, in order: the
        chunk cache then evicts the chunks needed later first (see ``chunk_cache``). Records
        of files whose footer this process has not read yet are left out of the hint."""
        local = self._process()
        indexes = local["indexes"]
        if local.get("groups_of") != len(indexes):
            local["groups"] = np.array([indexes[f].group_size if f in indexes else 0
                                        for f in range(len(self.objects))], dtype=np.int64)
            local["groups_of"] = len(indexes)
        g = local["groups"][files]
        known = g > 0
        local["cache"].upcoming(files[known], keys[known] // g[known])

    def upcoming_blocks(self, blocks: Sequence[tuple[int, int, int]]) -> None:
        """Blocks ``(file, first key, last key)`` read together next (a block shuffle's window):
        a read that needs a chunk of one fetches all of its chunks (see ``block_hints``). The
        footers of their files are read first where this process has not read them yet (a worker
        process's first window: left out, it was read one request per record)."""
        blocks = list(blocks)
        self._load_indexes(sorted({f for f, _, _ in blocks}))
        local = self._process()
        indexes = local["indexes"]
        local["blocks"].add((f, a // indexes[f].group_size, b // indexes[f].group_size) for f, a, b in blocks)

    def prefetch_blocks(self, blocks: Sequence[tuple[int, int, int]]) -> None:
        """Blocks ``(file, first key, last key)`` read after the current ones (a block shuffle's
        next window): hinted as :meth:`upcoming_blocks` does, and, for files of group_size 1 whose
        blocks together take at most half the cache (estimated from their stored bytes and the
        cost per stored byte of the last block read), fetched now in the background, so that the
        reads of that window find them held (or in flight) instead of waiting for the storage.
        The blocks of earlier windows, used least recently, are evicted first to make room. A
        hint: what is read never depends on it, and a failed prefetch leaves the blocks to the
        reads (which then raise what failed)."""
        blocks = list(blocks)
        self.upcoming_blocks(blocks)
        budget = self.options.cache_bytes // 2
        if not blocks or not budget:
            return
        local = self._process()
        keys, stored = [], 0
        for f, lo, hi in blocks:
            index = local["indexes"][f]
            if index.group_size != 1:
                return
            stored += int(index.chunk_ends()[hi]) - int(index.chunk_offsets[lo])
            keys.append((f, lo, hi))
        # their size in the cache, from the cost per stored byte of the last block read; before any
        # was read, the prefetch waits for the first one to say it
        if "block_ratio" not in local:
            local["declined"] = keys, stored
            return
        if stored * local["block_ratio"] > budget:
            return
        self._start_prefetch(keys)

    def _start_prefetch(self, keys: Sequence[tuple[int, ...]]) -> None:
        local = self._process()
        with local["lock"]:
            if "prefetcher" not in local:  # one thread: it waits while the pool's threads fetch
                local["prefetcher"] = cf.ThreadPoolExecutor(1, thread_name_prefix="thresher-prefetch")
                weakref.finalize(self, local["prefetcher"].shutdown, wait=False, cancel_futures=True)
            prefetcher = local["prefetcher"]
        with contextlib.suppress(RuntimeError):  # shut down: the reader is closing
            prefetcher.submit(self._prefetch, keys)

    def _prefetch(self, keys: Sequence[tuple[int, ...]]) -> None:
        cache: ChunkCache = self._process()["cache"]
        mine = cache.claim(keys)[2]
        try:
            self._fetch_blocks(mine)
        except BaseException as e:  # the reads that wait for these blocks get the error; later ones try again
            cache.abandon(mine, e)

    def close(self) -> None:
        """Stops this process's thread pool (it is remade on the next read)."""
        local = self._local
        if local is not None and local["pid"] == os.getpid():
            if "prefetcher" in local:
                local["prefetcher"].shutdown(wait=False, cancel_futures=True)
            local["pool"].shutdown(wait=False, cancel_futures=True)
            _close_clients(local["fs"])
        self._local = None

