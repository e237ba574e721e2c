"""A directory of Parquet files with one file pattern per split, as the Hugging Face Hub
lays them out, read with split strings (``th.data_source(path, split="train[:10%]")``).

A file's split is the word its name starts with, before ``-`` (``data/train-00000-of-00010.parquet``,
``test.parquet``), or, when the name is only a number (``default/train/0000.parquet``), the
name of its folder. Files of a split are taken sorted; a split's shards are its files, so
``"train[:2shard]"`` is its first two files.

Example:
    >>> import os, tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> import thresher as th
    >>> d = tempfile.mkdtemp(); os.mkdir(os.path.join(d, "data"))
    >>> for i in range(2):
    ...     pq.write_table(pa.table({"x": list(range(10 * i, 10 * i + 10))}),
    ...                    os.path.join(d, "data", f"train-{i:05d}-of-00002.parquet"))
    >>> pq.write_table(pa.table({"x": [-1, -2]}), os.path.join(d, "data", "test-00000-of-00001.parquet"))
    >>> sorted(parquet_splits(d))
    ['test', 'train']
    >>> src = th.data_source(d, split="train[:10%]+test")
    >>> [int(r["x"]) for r in src.__getitems__(range(len(src)))]
    [0, 1, -1, -2]
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from thresher.errors import SourceNotFoundError, SplitError
from thresher.sources.formats.parquet.source import DEFAULT_CACHE_BYTES, ParquetSource
from thresher.sources.protocol import check_key, check_keys, join_blocks
from thresher.splits import AbsoluteInstruction, SplitArg, resolve_split

__all__ = ["ParquetBuilder", "ParquetSplitSource", "is_parquet_dir", "parquet_splits"]

_WORD = re.compile(r"^([A-Za-z][A-Za-z0-9_]*?)(?:[-.].*)?$")


def _split_of(rel: str) -> str:
    parts = rel.replace(os.sep, "/").split("/")
    stem = parts[-1][: -len(".parquet")]
    m = _WORD.match(stem)
    if m is not None:
        return m.group(1)
    if len(parts) > 1:
        return parts[-2]
    raise SplitError(f"cannot tell the split of the Parquet file {rel!r}: name files <split>-*.parquet "
                     "(e.g. train-00000-of-00004.parquet) or put them in a folder named after the split")


def parquet_splits(path: str) -> dict[str, list[str]]:
    """The Parquet files under directory ``path`` by split name (files sorted)."""
    files = sorted(glob.glob(os.path.join(glob.escape(path), "**", "*.parquet"), recursive=True))
    out: dict[str, list[str]] = {}
    for f in files:
        out.setdefault(_split_of(os.path.relpath(f, path)), []).append(f)
    return out


def is_parquet_dir(path: str) -> bool:
    """True for a local directory that holds ``*.parquet`` files and is not a prepared or
    TFDS dataset (no ``dataset_info.json`` at its top)."""
    if not os.path.isdir(path) or os.path.exists(os.path.join(path, "dataset_info.json")):
        return False
    return bool(glob.glob(os.path.join(glob.escape(path), "**", "*.parquet"), recursive=True))


class ParquetBuilder:
    """The splits of a Parquet directory; ``as_data_source(split)`` as ``data_source`` gives.

    Args:
        path: the directory.
        columns, cache_bytes, storage_options, read_options: as in :class:`ParquetSource`.
    """

    def __init__(self, path: str | os.PathLike[str], *, columns: Sequence[str] | None = None,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, storage_options: Mapping[str, Any] | None = None,
                 read_options: Any = None) -> None:
        self.path = os.path.expanduser(os.fspath(path))
        files = parquet_splits(self.path)
        if not files:
            raise SourceNotFoundError(f"the directory {self.path!r} holds no *.parquet file")
        self.sources = {name: ParquetSource(paths, columns=columns, cache_bytes=cache_bytes,
                                            storage_options=storage_options, read_options=read_options)
                        for name, paths in files.items()}

    @property
    def split_sizes(self) -> dict[str, list[int]]:
        """Rows per file (shard) of each split."""
        return {name: src.file_lengths for name, src in self.sources.items()}

    def as_data_source(self, split: Any = None) -> Any:
        """One source per split (None), one source (a split expression), or a list of them."""
        if split is None:
            return {name: self._source(name) for name in self.sources}
        if isinstance(split, (list, tuple)):
            return [self._source(s) for s in split]
        return self._source(split)

    def _source(self, split: SplitArg) -> ParquetSplitSource:
        instructions = resolve_split(split, self.split_sizes)
        return ParquetSplitSource(self.sources, instructions, str(split))

    def __repr__(self) -> str:
        return f"ParquetBuilder({self.path!r}, splits={sorted(self.sources)})"


class ParquetSplitSource:
    """The records of a split expression over the splits of a Parquet directory.

    Key ``k`` is the ``k``-th record of the expression's ranges, in order. Made by
    ``thresher.data_source(path, split=...)`` (see :mod:`thresher.sources.formats.parquet.splits`).
    """

    suggested_reads_in_flight = 0

    def __init__(self, sources: Mapping[str, ParquetSource], instructions: Sequence[AbsoluteInstruction],
                 split: str) -> None:
        self.split = split
        self._instructions = list(instructions)
        self._sources = {a.split: sources[a.split] for a in self._instructions}
        self.suggested_reads_in_flight = max([s.suggested_reads_in_flight for s in self._sources.values()] or [0])
        self._starts = np.concatenate([[0], np.cumsum([a.num_examples for a in self._instructions],
                                                      dtype=np.int64)])
        self._len = int(self._starts[-1])

    def __len__(self) -> int:
        return self._len

    def _locate(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        part = np.searchsorted(self._starts, keys, side="right") - 1
        froms = np.asarray([a.from_ for a in self._instructions], dtype=np.int64)
        return part, keys - self._starts[part] + froms[part]

    def __getitem__(self, record_key: int) -> dict[str, Any]:
        k = check_key(record_key, self._len, repr(self))
        return self.__getitems__([k])[0]

    def __getitems__(self, record_keys: Sequence[int]) -> list[dict[str, Any]]:
        keys = check_keys(record_keys, self._len, repr(self))
        part, inner = self._locate(keys)
        out: list[Any] = [None] * len(keys)
        names = np.asarray([self._instructions[p].split for p in part.tolist()], dtype=object)
        for name, src in self._sources.items():
            where = np.flatnonzero(names == name)
            if where.size:
                for i, r in zip(where.tolist(), src.__getitems__(inner[where].tolist()), strict=True):
                    out[i] = r
        return out

    def block_boundaries(self, min_records: int = 1) -> np.ndarray:
        """Row groups cut to the expression's ranges, joined to at least ``min_records``:
        the first key of each block (see :meth:`ParquetSource.block_boundaries`)."""
        cuts = [np.asarray([0, self._len], dtype=np.int64)]
        for start, a in zip(self._starts[:-1].tolist(), self._instructions, strict=True):
            b = self._sources[a.split].row_group_offsets
            inside = b[(b > a.from_) & (b < a.to)] - a.from_ + start
            cuts.append(np.concatenate([[start], inside, [start + a.num_examples]]))
        return join_blocks(np.concatenate(cuts), min_records)

    @property
    def fingerprint(self) -> str:
        """A digest of the splits' files and the ranges read."""
        text = "|".join([*(f"{a}" for a in self._instructions),
                         *(f"{n}:{s.fingerprint}" for n, s in sorted(self._sources.items()))])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def __repr__(self) -> str:
        return f"ParquetSplitSource({self.split!r}, {self._len} records)"
