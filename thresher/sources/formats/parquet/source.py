"""ParquetSource: random access to the rows of Parquet files, read in place.

Record key ``k`` is the ``k``-th row of the files taken in order (globs and directories
sorted), so it maps to (file, row group, row) through the footers alone: opening a
source reads no data. A batch of keys is grouped by row group; each row group needed is
decoded once (only the requested columns) and kept, converted, in a per-process cache
bounded in bytes, which serves the other records of that row group. Row groups are the
source's natural blocks (:meth:`ParquetSource.block_boundaries`): a sampler that shuffles
blocks, then records within a few blocks at a time, reads each row group about once.

Pickling keeps paths, sizes, versions, row counts and the schema: a worker process
reopens the files by path (or URL), never receives data.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import numpy as np

from thresher.errors import CorruptSourceError, FeatureError, SourceError, SourceNotFoundError
from thresher.sources.formats.descriptors import descriptor_share, no_descriptor_error, out_of_descriptors
from thresher.sources.formats.parquet.arrow import pyarrow, pyarrow_parquet
from thresher.sources.formats.parquet.convert import (
    check_type,
    column_converter,
    column_values,
    has_map,
    plain_batch,
    wide_columns,
)
from thresher.sources.formats.parquet.files import (
    FileLayout,
    check_schemas,
    find_files,
    open_local,
    read_layout,
    select_columns,
)
from thresher.sources.formats.parquet.gather import Gatherer
from thresher.sources.formats.parquet.remote import RangeFile, RangeStats
from thresher.sources.formats.parquet.store import RowGroupStore
from thresher.sources.protocol import check_keys, join_blocks
from thresher.sources.remote.fs import RemoteObject, is_url
from thresher.sources.remote.options import RemoteReadOptions

__all__ = ["DEFAULT_CACHE_BYTES", "ParquetSource"]

VALUE_OVERHEAD = 64
"""Bytes counted per value a row group keeps as a Python object, over its Arrow bytes."""
DEFAULT_CACHE_BYTES = 256 << 20
"""Decoded row groups one source keeps per process, in bytes (see ``cache``)."""
REMOTE_READS_IN_FLIGHT = 2
"""Reads in flight a source of URLs suggests to the loader: the next chunks' reads start while
the current one is transformed. More slices of one chunk would only add calls: a batch's
row groups are fetched together, below."""
REMOTE_DECODES = 8
"""Row groups one batch of a source of URLs fetches and decodes at once, on its own threads
(each fetch is a few range requests that wait)."""
_FOOTER_THREADS = 32
_GROUP_LOCKS = 64  # row group g decodes under lock g % 64: once, however many threads miss it


class ParquetSource:
    """Random access over the rows of Parquet files; each record a dict of NumPy values.

    Args:
        paths: a file, a glob (``"data/train-*.parquet"``), a directory (its ``*.parquet``
            files, recursively), a URL or URL glob (``s3://``, ``gs://``, ``http(s)://``),
            or a list of them. Files are taken in the given order, globs and directories
            sorted; together they form one index space.
        columns: the columns to read (None: all). Only these are decoded.
        cache_bytes: decoded row groups kept per process (0: none; each batch then
            decodes the row groups it needs, once per batch).
        storage_options: fsspec options for URLs (credentials, endpoint, ...).
        read_options: for URLs, the byte-range reader's ``timeout`` and
            ``max_concurrency`` (footers are read on that many threads).

    Values follow :mod:`thresher.sources.formats.parquet.convert` (numbers as NumPy
    scalars, strings as ``str``, lists as 1-D arrays, structs as dicts, nulls as None);
    a column of a type that cannot be converted is refused here, naming it. Page
    checksums are verified where the writer stored them. A local file that changes after
    the source was opened (size or modification time) is refused when next read.

    Example:
        >>> import os, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> d = tempfile.mkdtemp()
        >>> pq.write_table(pa.table({"text": ["a", "b", "c"], "label": [0, 1, 2]}),
        ...                os.path.join(d, "train-0.parquet"), row_group_size=2)
        >>> pq.write_table(pa.table({"text": ["d"], "label": [3]}), os.path.join(d, "train-1.parquet"))
        >>> src = ParquetSource(os.path.join(d, "train-*.parquet"))
        >>> len(src), src[3], src.block_boundaries().tolist()
        (4, {'text': 'd', 'label': np.int64(3)}, [0, 2, 3])
        >>> [r["text"] for r in src.__getitems__([2, 0, 1])]
        ['c', 'a', 'b']
    """

    suggested_reads_in_flight = 0

    def __init__(self, paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                 columns: Sequence[str] | None = None, cache_bytes: int = DEFAULT_CACHE_BYTES,
                 storage_options: Mapping[str, Any] | None = None,
                 read_options: RemoteReadOptions | None = None) -> None:
        from thresher._validate import check_int

        check_int(cache_bytes, "cache_bytes", minimum=0)
        self.cache_bytes = int(cache_bytes)
        self._storage_options = dict(storage_options or {})
        self._read_options = read_options or RemoteReadOptions()
        self._local: dict[str, Any] | None = None
        objects = find_files(paths, storage_options)
        if any(is_url(o.url) for o in objects):
            self.suggested_reads_in_flight = REMOTE_READS_IN_FLIGHT
        layouts = self._read_layouts(objects)
        self.columns = select_columns(layouts[0], columns)
        types = check_schemas(layouts, self.columns)
        for c in self.columns:
            check_type(c, types[c], f"of {layouts[0].obj.url!r}")
        self._objects = [lay.obj for lay in layouts]
        self._types = [types[c] for c in self.columns]
        wide = set(wide_columns(layouts[0], self.columns, types))
        self._narrow = [c for c in self.columns if c not in wide]
        self._wide = [c for c in self.columns if c in wide]
        self._schema = pyarrow().schema([pyarrow().field(c, types[c]) for c in self.columns])
        counts = [np.asarray(lay.row_counts, dtype=np.int64) for lay in layouts]
        self._rg_file = np.concatenate([np.full(len(c), i, dtype=np.int64) for i, c in enumerate(counts)])
        self._rg_index = np.concatenate([np.arange(len(c), dtype=np.int64) for c in counts])
        self._rg_starts = np.concatenate([[0], np.cumsum(np.concatenate(counts), dtype=np.int64)])
        self._file_starts = np.concatenate([[0], np.cumsum([int(c.sum()) for c in counts], dtype=np.int64)])
        self._len = int(self._rg_starts[-1])
        self._process()["footers"].update({f: lay.metadata for f, lay in enumerate(layouts)})

    def _read_layouts(self, objects: list[RemoteObject]) -> list[FileLayout]:
        if len(objects) == 1:
            return [read_layout(objects[0], self._opener)]
        with ThreadPoolExecutor(min(_FOOTER_THREADS, self._read_options.max_concurrency, len(objects)),
                                thread_name_prefix="thresher-parquet-footer") as pool:
            return list(pool.map(lambda o: read_layout(o, self._opener), objects))

    # --- per process -------------------------------------------------------------------

    def _process(self) -> dict[str, Any]:
        local = self._local
        if local is None or local["pid"] != os.getpid():
            local = self._local = {"pid": os.getpid(), "files": OrderedDict(), "lock": threading.Lock(),
                                   "file_locks": {}, "footers": {}, "clients": {},
                                   "cache": None, "stats": RangeStats(), "handles": {},
                                   "gather_lock": threading.Lock(),
                                   "group_locks": [threading.Lock() for _ in range(_GROUP_LOCKS)]}
        return local

    def _store(self) -> RowGroupStore:
        local = self._process()
        store = local["cache"]
        if store is None:
            with local["lock"]:
                store = local["cache"]
                if store is None:
                    gatherer = self._gatherer()
                    store = local["cache"] = RowGroupStore(self.cache_bytes, len(self._rg_file),
                                                           None if gatherer is None else gatherer.spec)
        return store

    def _gatherer(self) -> Gatherer | None:
        """This process's gatherer of the narrow columns (None: Arrow's take; see ``gather``)."""
        local = self._process()
        if "gatherer" not in local:
            types = dict(zip(self.columns, self._types, strict=True))
            local["gatherer"] = Gatherer.of([types[c] for c in self._narrow])
        gatherer: Gatherer | None = local["gatherer"]
        return gatherer

    def _opener(self, obj: RemoteObject, metadata: Any = None) -> Any:
        if not is_url(obj.url):
            return open_local(obj, metadata)
        local = self._process()
        handle = RangeFile(obj, self._storage_options, self._read_options.timeout, local["stats"],
                           local["clients"])
        return pyarrow_parquet().ParquetFile(handle, metadata=metadata, page_checksum_verification=True,
                                             pre_buffer=True)

    def _file(self, f: int) -> tuple[Any, threading.Lock]:
        """The open ParquetFile of local file ``f`` and its lock. At most ``descriptor_share()``
        stay open (each holds a descriptor), the least recently used let go first: it closes
        when the last read using it ends."""
        local = self._process()
        files = local["files"]
        with local["lock"]:
            pf = files.get(f)
            if pf is not None:
                files.move_to_end(f)
                return pf, local["file_locks"][f]
        self._check_unchanged(f, None)
        pf = open_file(self._objects[f], self._opener, local["footers"].pop(f, None))
        with local["lock"]:
            if f not in files:
                files[f] = pf
                local["file_locks"][f] = threading.Lock()
                most = descriptor_share()
                while len(files) > most:
                    old, _ = files.popitem(last=False)
                    del local["file_locks"][old]
            return files[f], local["file_locks"][f]

    @contextmanager
    def _handle(self, f: int) -> Iterator[Any]:
        """A ParquetFile of file ``f`` for this thread alone while it is used: for a local file
        the one handle, under its lock; for a URL a handle of the file's own pool (a handle
        holds no descriptor, so threads fetch row groups of one file at once)."""
        if not is_url(self._objects[f].url):
            pf, lock = self._file(f)
            with lock:
                yield pf
            return
        local = self._process()
        with local["lock"]:
            free = local["handles"].setdefault(f, [])
            pf = free.pop() if free else None
        if pf is None:
            pf = open_file(self._objects[f], self._opener, local["footers"].get(f))
        try:
            yield pf
        finally:
            with local["lock"]:
                local["handles"][f].append(pf)

    def _check_unchanged(self, f: int, group: int | None) -> None:
        obj = self._objects[f]
        if is_url(obj.url):
            return
        where = "" if group is None else f" (reading row group {group})"
        try:
            st = os.stat(obj.url)
        except FileNotFoundError:
            raise SourceNotFoundError(f"Parquet file {obj.url!r} disappeared after the source was opened"
                                      f"{where}") from None
        if st.st_size != obj.size or str(st.st_mtime_ns) != obj.version:
            raise CorruptSourceError(
                f"Parquet file {obj.url!r} changed after the source was opened{where}: it had {obj.size} "
                f"bytes (mtime_ns {obj.version}), now {st.st_size} (mtime_ns {st.st_mtime_ns}). Do not "
                "modify data files during training; restore the file, or open a new source (the record "
                "keys may mean other rows now)")

    # --- decoding ----------------------------------------------------------------------

    def _decode(self, g: int, store: RowGroupStore) -> tuple[Any, tuple[list[Any], ...] | None]:
        """Global row group ``g``, decoded once and put in ``store`` (the caller missed it):
        its narrow columns as an Arrow record batch (dictionaries decoded), its wide ones (see
        :func:`wide_columns`) as lists of values."""
        f, i = int(self._rg_file[g]), int(self._rg_index[g])
        with self._process()["group_locks"][g % _GROUP_LOCKS]:
            held = store.peek(g)  # another thread may have decoded it meanwhile
            if held is not None:
                return held
            self._check_unchanged(f, i)
            with self._handle(f) as pf:
                table = self._read_group(pf, f, i, self.columns)
            narrow = plain_batch(table, self._narrow, [self._types[self.columns.index(c)] for c in self._narrow])
            wide = tuple(column_values(table.column(c)) for c in self._wide) if self._wide else None
            # a list costs its column's Arrow bytes plus each object
            wide_cost = sum(int(table.column(c).nbytes) + VALUE_OVERHEAD * table.num_rows for c in self._wide)
            store.put(g, narrow, wide, wide_cost)
        return narrow, wide

    def _read_group(self, pf: Any, f: int, i: int, columns: list[str]) -> Any:
        pa = pyarrow()
        url = self._objects[f].url
        expected = int(self._rg_starts[self._global_group(f, i) + 1] - self._rg_starts[self._global_group(f, i)])
        try:
            table = pf.read_row_group(i, columns=columns, use_threads=False)
        except SourceError:
            raise
        except (pa.ArrowException, OSError, ValueError) as e:
            column = self._failing_column(pf, i, columns)
            at = f", column {column!r}" if column is not None else ""
            raise CorruptSourceError(
                f"row group {i} of {url!r}{at} cannot be decoded ({type(e).__name__}: {e}); the file is "
                "corrupt (or changed while it was read). Rewrite it, or leave it out of the source") from e
        if table.num_rows != expected:
            raise CorruptSourceError(f"row group {i} of {url!r} decoded to {table.num_rows} rows, its footer "
                                     f"says {expected}; the file is corrupt")
        return table

    def _failing_column(self, pf: Any, i: int, columns: list[str]) -> str | None:
        for c in columns:
            try:
                pf.read_row_group(i, columns=[c], use_threads=False)
            except Exception:
                return c
        return None

    def _global_group(self, f: int, i: int) -> int:
        return int(np.searchsorted(self._rg_file, f, side="left")) + i

    # --- the source protocol -----------------------------------------------------------

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, record_key: int) -> dict[str, Any]:
        return self.__getitems__([record_key])[0]

    def __getitems__(self, record_keys: Sequence[int]) -> list[dict[str, Any]]:
        keys = check_keys(record_keys, self._len, repr(self))
        if not keys.size:
            return []
        groups = np.searchsorted(self._rg_starts, keys, side="right") - 1
        rows = keys - self._rg_starts[groups]
        store = self._store()
        plan = store.plan(groups)
        missing = plan.missing.tolist()
        if len(missing) > 1 and self.suggested_reads_in_flight:  # URLs: fetches that wait, at once
            for g, decoded in zip(missing, self._decoders().map(lambda g: self._decode(g, store), missing),
                                  strict=True):
                plan.add(g, *decoded)
        else:
            for g in missing:
                plan.add(g, *self._decode(g, store))
        with self._process()["gather_lock"]:  # one thread at a time: CPU work that hands the GIL back and forth
            try:
                return self._gather(plan, rows)
            except UnicodeDecodeError as e:
                raise self._not_utf8(np.unique(groups).tolist(), e) from e

    def _not_utf8(self, groups: list[int], error: UnicodeDecodeError) -> CorruptSourceError:
        """The error for a string column holding bytes that are not UTF-8 (Parquet writers do
        not all check): it names the file, the row group and the column, found by validating
        the batch's row groups again."""
        pa = pyarrow()
        text = [c for c, t in zip(self.columns, self._types, strict=True)
                if pa.types.is_string(t) or pa.types.is_large_string(t)
                or (pa.types.is_dictionary(t) and pa.types.is_string(t.value_type))]
        for g in groups:
            f, i = int(self._rg_file[g]), int(self._rg_index[g])
            with self._handle(f) as pf:
                table = self._read_group(pf, f, i, text)
            for c in text:
                try:
                    table.column(c).validate(full=True)
                except (pa.ArrowException, ValueError):
                    return CorruptSourceError(
                        f"row group {i} of {self._objects[f].url!r}, column {c!r}: a string value is not "
                        f"UTF-8 ({error.reason} at byte {error.start}). Rewrite the column with valid "
                        "UTF-8, or as binary, or leave it out with columns=[...]")
        return CorruptSourceError(f"a string value read from {self!r} is not UTF-8 ({error}); rewrite it as UTF-8 "
                                  "or as binary, or leave the column out with columns=[...]")

    def _gather(self, plan: Any, rows: np.ndarray) -> list[dict[str, Any]]:
        """The records of the planned keys (rows ``rows`` of their row groups), in key order."""
        store = self._store()
        if plan.located:  # every narrow column read from the tables' buffers in C
            return self._gather_located(plan, rows)
        pieces, order = plan.gather(rows) if self._narrow else ([], None)
        wide = plan.extras() if self._wide else None
        store.maybe_merge()
        if self._narrow and not self._wide:  # every column narrow: the dicts made in one pass
            columns = [convert(pieces[0].column(c)) if len(pieces) == 1 else
                       [v for piece in pieces for v in convert(piece.column(c))] for c, _, convert in self._readers()]
            made = self._records_of()(columns)
            if order is None:
                return made
            out: list[Any] = [None] * len(made)
            for j, record in zip(order.tolist(), made, strict=True):  # the pieces' rows back in key order
                out[j] = record
            return out
        records: list[dict[str, Any]] = [{} for _ in range(len(rows))]
        # the same dicts in the order of the pieces' rows: each narrow column converted once a piece
        placed = records if order is None else [records[j] for j in order.tolist()]
        row_list = rows.tolist() if wide is not None else []
        for c, w, convert in self._readers():
            if w < 0:
                values = convert(pieces[0].column(c)) if len(pieces) == 1 else \
                    [v for piece in pieces for v in convert(piece.column(c))]
                for record, value in zip(placed, values, strict=True):
                    record[c] = value
            else:
                assert wide is not None
                for record, held, r in zip(records, wide, row_list, strict=True):
                    record[c] = held[w][r]
        return records

    def _gather_located(self, plan: Any, rows: np.ndarray) -> list[dict[str, Any]]:
        specs, slots = plan.locate()
        gatherer = self._gatherer()
        assert gatherer is not None
        narrow = dict(zip(self._narrow, gatherer.gather(specs, slots, rows), strict=True))
        if self._wide:
            held, of_key = plan.distinct_extras()
            at = np.ascontiguousarray(rows, dtype=np.int64)
            for c, w, _ in self._readers():
                if w >= 0:
                    narrow[c] = gatherer.objects(tuple(h[w] for h in held), of_key, at)
        return self._records_of()([narrow[c] for c in self.columns])

    def _decoders(self) -> ThreadPoolExecutor:
        local = self._process()
        with local["lock"]:
            pool = local.get("decoders")
            if pool is None:
                pool = local["decoders"] = ThreadPoolExecutor(REMOTE_DECODES,
                                                              thread_name_prefix="thresher-parquet-decode")
        return pool

    def _records_of(self) -> Callable[[list[list[Any]]], list[dict[str, Any]]]:
        """A function from the columns' values (lists, in ``columns`` order) to the records: one
        list comprehension of dict displays, made once per process for this source's columns (as
        ``collections.namedtuple`` makes its class). Only the count of columns is written into
        the code; the names are bound as values."""
        local = self._process()
        made = local.get("records_of")
        if made is None:
            k = len(self.columns)
            values = ", ".join(f"v{i}" for i in range(k)) + ("," if k == 1 else "")
            items = ", ".join(f"k{i}: v{i}" for i in range(k))
            namespace: dict[str, Any] = {f"k{i}": name for i, name in enumerate(self.columns)}
            exec(f"def records_of(columns):\n    return [{{{items}}} for {values} in zip(*columns)]\n", namespace)
            made = local["records_of"] = namespace["records_of"]
        return made

    def _readers(self) -> list[tuple[str, int, Any]]:
        """Per column in order: its name, its index among the wide columns (-1: narrow), and
        the converter of a narrow one (made once per process: functions are not pickled)."""
        local = self._process()
        readers = local.get("readers")
        if readers is None:
            types = dict(zip(self.columns, self._types, strict=True))
            readers = local["readers"] = [
                (c, self._wide.index(c), None) if c in self._wide else
                (c, -1, _naming(column_converter(types[c]), c, self) if has_map(types[c]) else
                 column_converter(types[c]))
                for c in self.columns]
        return readers

    # --- what else a source tells ------------------------------------------------------

    @property
    def paths(self) -> list[str]:
        """The files (or URLs), in key order."""
        return [o.url for o in self._objects]

    @property
    def file_lengths(self) -> list[int]:
        """The number of rows of each file, in key order."""
        return [int(n) for n in np.diff(self._file_starts)]

    @property
    def schema(self) -> Any:
        """The Arrow schema of the columns read."""
        return self._schema

    @property
    def row_group_offsets(self) -> np.ndarray:
        """The first record key of each row group, then ``len(self)`` (int64, ascending; a row
        group without rows repeats its key)."""
        return self._rg_starts.copy()

    def block_boundaries(self, min_records: int = 1) -> np.ndarray:
        """The first key of each natural block (int64, strictly increasing, from 0), as
        :class:`thresher.sources.protocol.BlockedSource` asks: whole row groups, consecutive
        ones joined until a block holds at least ``min_records`` (the last may hold fewer).
        Reading the keys of a block decodes only its row groups; ``thresher.BlockShuffle``
        asks for these.

        Example:
            >>> import os, tempfile
            >>> import pyarrow as pa, pyarrow.parquet as pq
            >>> path = os.path.join(tempfile.mkdtemp(), "x.parquet")
            >>> pq.write_table(pa.table({"x": list(range(10))}), path, row_group_size=4)
            >>> src = ParquetSource(path)
            >>> src.block_boundaries().tolist(), src.block_boundaries(5).tolist()
            ([0, 4, 8], [0, 8])
        """
        return join_blocks(self._rg_starts, min_records)

    @property
    def fingerprint(self) -> str:
        """A digest of what the record keys mean: the files (path, size, version), their row
        groups' row counts, and the columns read. Equal fingerprints, equal records."""
        files = [[o.url, o.size, o.version] for o in self._objects]
        counts = [int(x) for x in np.diff(self._rg_starts)]
        text = json.dumps({"files": files, "row_groups": counts, "columns": self.columns,
                           "group_files": self._rg_file.tolist()}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def record_locations(self, record_keys: Sequence[int]) -> list[tuple[str, int]]:
        """The file of each record and its row index in that file (nothing is read)."""
        keys = check_keys(record_keys, self._len, repr(self))
        files = np.searchsorted(self._file_starts, keys, side="right") - 1
        rows = keys - self._file_starts[files]
        return [(self._objects[f].url, r) for f, r in zip(files.tolist(), rows.tolist(), strict=True)]

    @property
    def bytes_fetched(self) -> int:
        """Bytes this process fetched by range requests from URLs (0 for local files)."""
        return int(self._process()["stats"].bytes)

    @property
    def requests(self) -> int:
        """Range requests this process sent for URLs."""
        return int(self._process()["stats"].requests)

    def cache_info(self) -> dict[str, int]:
        """This process's row-group cache: ``hits`` (keys read from cached row groups),
        ``misses`` (row groups decoded), ``entries`` (row groups held), ``bytes`` (their Arrow
        bytes, plus 64 per value of a wide column) and ``merged`` (entries copied into the
        few large tables a shuffled batch is taken from in one step)."""
        return self._store().info()

    def close(self) -> None:
        """Closes the open files and drops the cache (both come back on the next read)."""
        local, self._local = self._local, None
        if local is not None and local["cache"] is not None:
            local["cache"].clear()
        if local is not None and local.get("decoders") is not None:
            local["decoders"].shutdown(wait=False, cancel_futures=True)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_local"] = None
        return state

    def __repr__(self) -> str:
        if len(self._objects) == 1:
            return f"ParquetSource({self._objects[0].url!r})"
        return f"ParquetSource(<{len(self._objects)} files, first {self._objects[0].url!r}>)"


def _naming(convert: Callable[[Any], list[Any]], column: str, source: ParquetSource) -> Callable[[Any], list[Any]]:
    """``convert``, whose refusal of a value (a map with a repeated key) names the column."""

    def named(arr: Any) -> list[Any]:
        try:
            return convert(arr)
        except FeatureError as e:
            raise FeatureError(f"column {column!r} of {source!r}: {e}") from e

    return named


def open_file(obj: RemoteObject, opener: Any, metadata: Any) -> Any:
    """Opens ``obj`` for reading row groups (its footer read again unless ``metadata`` is
    given); CorruptSourceError naming it if it fails."""
    pa = pyarrow()
    try:
        return opener(obj, metadata)
    except SourceError:
        raise
    except (pa.ArrowException, OSError, ValueError) as e:
        if out_of_descriptors(e):
            raise no_descriptor_error(obj.url, e) from e
        raise CorruptSourceError(f"{obj.url!r} can no longer be opened as a Parquet file "
                                 f"({type(e).__name__}: {e}); it changed or is corrupt") from e
