"""HuggingFaceSource: a ``datasets.Dataset``, a ``save_to_disk`` directory or a
``pyarrow.Table`` as a random-access source of dicts of NumPy values.

Reads gather the keys' rows from the table's record batches, memory-mapped from the
dataset's Arrow files where it has them (one-row slices joined: only the rows read are
copied, never a whole column, which Arrow's ``take`` on a table of many record batches
would concatenate first). The record batches are the source's natural blocks
(:meth:`HuggingFaceSource.block_boundaries`). Worker processes open
those files by path: pickling the source sends paths (and a ``select``/``shuffle``
index, 8 bytes per record), never the table. A table held only in memory is written
once to a temporary Arrow file when the source is first pickled, removed when the
source is garbage collected.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from thresher.errors import ConfigTypeError, CorruptSourceError, FeatureError, SourceError, SourceNotFoundError
from thresher.sources.formats.descriptors import no_descriptor_error, out_of_descriptors
from thresher.sources.formats.huggingface.media import features_from_schema, media_columns, media_value
from thresher.sources.formats.parquet.arrow import pyarrow
from thresher.sources.formats.parquet.convert import check_type, column_values
from thresher.sources.protocol import check_key, check_keys, join_blocks

__all__ = ["HuggingFaceSource"]

_WHAT = "HuggingFaceSource"


def _unreadable(path: str, e: BaseException) -> SourceError:
    """The error for a file that exists but cannot be opened (never called corrupt)."""
    if out_of_descriptors(e):
        return no_descriptor_error(path, e)
    return SourceError(f"{path!r} cannot be read ({type(e).__name__}: {e})")


def _open_arrow(path: str) -> Any:
    """The table of one Arrow file (stream or file format), memory-mapped."""
    pa = pyarrow(_WHAT)
    if not os.path.isfile(path):
        raise SourceNotFoundError(f"Arrow file {path!r} does not exist (was it moved or deleted?)")
    try:
        mm = pa.memory_map(path)
        try:
            return pa.ipc.open_stream(mm).read_all()
        except pa.ArrowInvalid:
            return pa.ipc.open_file(pa.memory_map(path)).read_all()
    except (pa.ArrowException, OSError) as e:
        if out_of_descriptors(e):
            raise no_descriptor_error(path, e) from e
        raise CorruptSourceError(f"{path!r} is not a readable Arrow file ({type(e).__name__}: {e}); it is "
                                 "another format, truncated or corrupt") from e


def _same_rows(a: Any, b: Any) -> bool:
    n = a.num_rows
    if n != b.num_rows or a.schema.remove_metadata() != b.schema.remove_metadata():
        return False
    return all(a.slice(i, 1).equals(b.slice(i, 1)) for i in {0, n // 2, max(0, n - 1)} if i < n)


def _dataset_parts(ds: Any) -> tuple[Any, list[str] | None, np.ndarray | None, dict[str, Any] | None]:
    """(table, Arrow files it is memory-mapped from or None, indices or None, features)."""
    pa = pyarrow(_WHAT)
    table = ds.data.table if hasattr(ds.data, "table") else ds.data
    # datasets has no public accessor for the select/shuffle index mapping
    mapping = getattr(ds, "_indices", None)
    indices = None
    if mapping is not None:
        m = mapping.table if hasattr(mapping, "table") else mapping
        indices = np.asarray(m.column(0).to_numpy(), dtype=np.int64)
    files: list[str] | None = None
    candidates = [c["filename"] for c in getattr(ds, "cache_files", []) or []]
    parts = []
    for path in candidates:
        t = _open_arrow(path)
        if t.schema.remove_metadata() == table.schema.remove_metadata():
            parts.append((path, t))
    if parts and _same_rows(pa.concat_tables([t for _, t in parts]), table):
        files = [p for p, _ in parts]
    features = ds.features.to_dict() if hasattr(ds.features, "to_dict") else None
    return table, files, indices, features


def _directory_parts(path: str) -> tuple[Any, list[str], dict[str, Any] | None]:
    state_path = os.path.join(path, "state.json")
    if not os.path.isfile(state_path):
        raise SourceNotFoundError(
            f"{path!r} is not a directory written by datasets' save_to_disk (it has no state.json); "
            "for a DatasetDict pass its split's directory (e.g. {path}/train), for Parquet files use "
            "thresher.sources.ParquetSource")
    try:
        with open(state_path) as f:
            state = json.load(f)
        names = [d["filename"] for d in state["_data_files"]]
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptSourceError(f"{state_path!r} is not a datasets state file: {e}") from e
    except OSError as e:  # it exists, but cannot be read: permissions, no descriptor left
        raise _unreadable(state_path, e) from e
    files = []
    for name in names:
        full = os.path.normpath(os.path.join(path, name))
        if os.path.dirname(full) != os.path.normpath(path):
            raise CorruptSourceError(f"{state_path!r} names {name!r}, outside the directory {path!r}")
        files.append(full)
    pa = pyarrow(_WHAT)
    table = pa.concat_tables([_open_arrow(p) for p in files]) if files else None
    features = None
    info = os.path.join(path, "dataset_info.json")
    if os.path.isfile(info):
        try:
            with open(info) as f:
                features = json.load(f).get("features")
        except ValueError:
            features = None
    if features is None and table is not None:
        features = features_from_schema(table.schema)
    return table, files, features


class HuggingFaceSource:
    """Random access over a Hugging Face dataset; each record a dict of NumPy values.

    Args:
        data: a ``datasets.Dataset`` (in memory or memory-mapped; ``select``/``shuffle``
            views too), the path of a ``save_to_disk`` directory, or a ``pyarrow.Table``.
        columns: the columns to read (None: all).
        decode: False (the default): ``Image``/``Audio`` columns come back as the encoded
            file's bytes (decode them with :func:`thresher.sources.formats.huggingface.decode_image`
            / ``decode_audio``); True: decoded (an image as a uint8 array, audio as
            ``(samples, sampling_rate)``).

    Values follow :mod:`thresher.sources.formats.parquet.convert`; record ``k`` is
    ``dataset[k]`` (the same order, ``select``/``shuffle`` included).

    Example:
        >>> import datasets
        >>> ds = datasets.Dataset.from_dict({"text": ["a", "b", "c"], "label": [0, 1, 0]})
        >>> src = HuggingFaceSource(ds.select([2, 0]))
        >>> len(src), src[0], [r["text"] for r in src.__getitems__([1, 0])]
        (2, {'text': 'c', 'label': np.int64(0)}, ['a', 'c'])
    """

    suggested_reads_in_flight = 0

    def __init__(self, data: Any, *, columns: Sequence[str] | None = None, decode: bool = False) -> None:
        pa = pyarrow(_WHAT)
        indices = None
        features = None
        if isinstance(data, dict):
            raise ConfigTypeError(f"HuggingFaceSource got a DatasetDict with splits {sorted(data)}: pass one "
                                  "split, e.g. HuggingFaceSource(dd['train'])")
        if isinstance(data, (str, os.PathLike)):
            path = os.path.expanduser(os.fspath(data))
            table, files, features = _directory_parts(path)
            self._files: list[str] | None = files
        elif isinstance(data, pa.Table):
            table, self._files = data, None
            features = features_from_schema(data.schema)
        elif hasattr(data, "cache_files") and hasattr(data, "features") and hasattr(data, "data"):
            table, self._files, indices, features = _dataset_parts(data)
        else:
            raise ConfigTypeError(f"HuggingFaceSource takes a datasets.Dataset, a save_to_disk directory or "
                                  f"a pyarrow.Table, got {type(data).__name__}")
        names = list(table.schema.names) if table is not None else []
        self.columns = names if columns is None else ([columns] if isinstance(columns, str) else list(columns))
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise CorruptSourceError(f"HuggingFaceSource: columns {missing} are not in the dataset, whose "
                                     f"columns are {names}")
        self._media = {c: k for c, k in media_columns(features).items() if c in self.columns}
        for c in self.columns:
            check_type(c, table.schema.field(c).type, "of the dataset")
        self.decode = bool(decode)
        self._indices = indices
        self._rows = table.num_rows if table is not None else 0
        self._len = len(indices) if indices is not None else self._rows
        self._table: Any = table
        self._batches: tuple[list[Any], np.ndarray] | None = None  # per process, from the table
        self._sorted_view = indices is None or bool(indices.size < 2 or (np.diff(indices) > 0).all())
        self._fingerprint: str | None = None
        # the files as they are now: the fingerprint names these versions, even if taken later
        self._file_stats = None if self._files is None else [
            [p, st.st_size, st.st_mtime_ns] for p, st in ((p, os.stat(p)) for p in self._files)]
        self._spilled: str | None = None
        self._lock = threading.Lock()

    @property
    def files(self) -> list[str] | None:
        """The Arrow files the table is memory-mapped from (None: held in memory)."""
        return None if self._files is None else list(self._files)

    def _arrow(self) -> Any:
        table = self._table
        if table is None:
            with self._lock:
                if self._table is None:
                    files = self._files or ([self._spilled] if self._spilled else [])
                    self._table = pyarrow(_WHAT).concat_tables([_open_arrow(p) for p in files])
                    if self._table.num_rows != self._rows:
                        raise CorruptSourceError(f"the Arrow files {files} hold {self._table.num_rows} rows, "
                                                 f"not {self._rows}: they changed after the source was made")
                table = self._table
        return table

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, record_key: int) -> dict[str, Any]:
        k = check_key(record_key, self._len, repr(self))
        return self._read(np.asarray([k], dtype=np.int64))[0]

    def __getitems__(self, record_keys: Sequence[int]) -> list[dict[str, Any]]:
        keys = check_keys(record_keys, self._len, repr(self))
        return self._read(keys) if keys.size else []

    def _record_batches(self) -> tuple[list[Any], np.ndarray]:
        """The table's record batches (the requested columns) and their first rows, then
        the row count (per process)."""
        got = self._batches
        if got is None:
            batches = self._arrow().select(self.columns).to_batches()
            starts = np.cumsum([0, *(b.num_rows for b in batches)], dtype=np.int64)
            got = self._batches = (batches, starts)
        return got

    def _read(self, keys: np.ndarray) -> list[dict[str, Any]]:
        rows = self._indices[keys] if self._indices is not None else keys
        batches, starts = self._record_batches()
        if len(batches) == 1:
            taken = batches[0].take(rows)
        else:
            which = np.searchsorted(starts, rows, side="right") - 1
            at = (rows - starts[which]).tolist()
            taken = _concat([batches[b].slice(r, 1) for b, r in zip(which.tolist(), at, strict=True)])
        values = []
        for c in self.columns:
            try:
                col = column_values(taken.column(c))
            except FeatureError as e:  # a map value with a repeated key
                raise FeatureError(f"column {c!r} of {self!r}: {e}") from e
            kind = self._media.get(c)
            if kind is not None:
                col = [media_value(v, c, kind, int(k), self.decode) for v, k in zip(col, keys.tolist(), strict=True)]
            values.append(col)
        if not values:
            return [{} for _ in range(keys.size)]
        return [dict(zip(self.columns, vals, strict=True)) for vals in zip(*values, strict=True)]

    def block_boundaries(self, min_records: int = 1) -> np.ndarray:
        """The first key of each natural block (int64, strictly increasing, from 0), as
        :class:`thresher.sources.protocol.BlockedSource` asks: the table's Arrow record
        batches (each Arrow file's, in order), consecutive ones joined until a block holds
        at least ``min_records``. ``thresher.BlockShuffle.of_source`` asks for these. A
        ``select`` view in ascending order keeps the batches' cuts (mapped to its keys); a
        ``shuffle`` view has no storage order, so its blocks are plain runs of
        ``min_records`` keys.

        Example:
            >>> import pyarrow as pa
            >>> t = pa.Table.from_batches([pa.record_batch({"x": [0, 1, 2]}), pa.record_batch({"x": [3, 4]})])
            >>> src = HuggingFaceSource(t)
            >>> src.block_boundaries().tolist(), src.block_boundaries(4).tolist()
            ([0, 3], [0])
        """
        step = max(1, int(min_records))
        if not self._sorted_view:
            return np.arange(0, self._len, step, dtype=np.int64)
        _, starts = self._record_batches()
        cuts = starts if self._indices is None else np.searchsorted(self._indices, starts, side="left")
        return join_blocks(np.concatenate([[0], cuts, [self._len]]), step)

    @property
    def fingerprint(self) -> str:
        """A digest of what the record keys mean: the Arrow files (path, size, modification
        time) or, for a table held in memory, its contents (digested once, O(its bytes));
        the ``select``/``shuffle`` index, the columns and ``decode``. Equal fingerprints,
        equal records.

        Example:
            >>> import pyarrow as pa
            >>> a, b = HuggingFaceSource(pa.table({"x": [1, 2]})), HuggingFaceSource(pa.table({"x": [1, 3]}))
            >>> a.fingerprint == HuggingFaceSource(pa.table({"x": [1, 2]})).fingerprint, a.fingerprint == b.fingerprint
            (True, False)
        """
        if self._fingerprint is None:
            h = hashlib.sha256()
            if self._file_stats is not None:
                h.update(json.dumps(self._file_stats).encode())
            else:
                _digest_table(h, self._arrow())
            h.update(json.dumps({"columns": self.columns, "decode": self.decode, "rows": self._rows}).encode())
            if self._indices is not None:
                h.update(np.ascontiguousarray(self._indices, dtype="<i8").tobytes())
            self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint

    def _spill(self) -> str:
        """Writes the in-memory table to a temporary Arrow file (once), for other processes."""
        with self._lock:
            if self._spilled is None:
                pa = pyarrow(_WHAT)
                fd, path = tempfile.mkstemp(prefix="thresher-hf-", suffix=".arrow")
                os.close(fd)
                with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, self._table.schema) as writer:
                    writer.write_table(self._table)
                self._spilled = path
                weakref.finalize(self, _remove, path, os.getpid())
            return self._spilled

    def __getstate__(self) -> dict[str, Any]:
        if self._files is None and self._table is not None and self._spilled is None:
            self._spill()
        state = self.__dict__.copy()
        state["_table"] = None
        state["_batches"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        where = f"{self._files[0]!r}{' ...' if len(self._files) > 1 else ''}" if self._files else "in memory"
        return f"HuggingFaceSource(<{self._len} records, {where}>)"


def _concat(pieces: list[Any]) -> Any:
    """Record batches (one schema) as one record batch."""
    pa = pyarrow(_WHAT)
    concat = getattr(pa, "concat_batches", None)  # pyarrow >= 19
    if concat is not None:
        return concat(pieces)
    return pa.Table.from_batches(pieces).combine_chunks()


def _digest_table(h: Any, table: Any) -> None:
    """Feeds ``table``'s schema and rows (in Arrow's IPC stream form) to hash ``h``."""
    pa = pyarrow(_WHAT)

    class _Sink:
        def write(self, data: Any) -> int:
            view = memoryview(data)
            h.update(view)
            return view.nbytes

        def flush(self) -> None:
            pass

        closed = False

    with pa.ipc.new_stream(pa.PythonFile(_Sink(), mode="w"), table.schema) as writer:
        writer.write_table(table)


def _remove(path: str, pid: int) -> None:
    if os.getpid() == pid:
        with contextlib.suppress(OSError):
            os.remove(path)
