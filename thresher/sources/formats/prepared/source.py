"""PreparedSource: the records of a split expression, decoded, with random access.

A split expression becomes a list of record ranges over the shard files it touches;
key ``k`` of the source is the k-th record of those ranges in order. Reads go through
one :class:`~thresher.sources.ArrayRecordSource` (batched ``__getitems__``), and
records are decoded by the dataset's :class:`~thresher.features.RecordCodec`.

The source is an ordinary map-style dataset (``len``, ``[k]``, ``__getitems__``), so it
works with thresher's DataLoader, Grain and ``torch.utils.data.DataLoader``. It pickles
as paths and ranges; files are reopened in the process that reads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from thresher.errors import CorruptSourceError, SourceNotFoundError
from thresher.features import RecordCodec
from thresher.sources.formats.prepared.info import DatasetInfo
from thresher.sources.paths import inside
from thresher.sources.protocol import check_key, check_keys
from thresher.sources.remote.fs import is_url
from thresher.sources.remote.reader import RemoteReadOptions
from thresher.sources.sharded_records import ShardedRecords
from thresher.splits import AbsoluteInstruction

__all__ = ["PreparedSource"]


class PreparedSource(ShardedRecords):
    """Decoded records of one split expression of a prepared dataset.

    Made by ``thresher.data_source(path, split=...)``; see there for an example.
    Raw tensors and ``encoding='none'`` images decode to read-only views over the
    record bytes (``.copy()`` them to modify in place).
    """

    def __init__(self, info: DatasetInfo, split: str,
                 instructions: Sequence[AbsoluteInstruction], *,
                 storage_options: Mapping[str, Any] | None = None,
                 read_options: RemoteReadOptions | None = None) -> None:
        assert info.data_dir is not None
        self.info = info
        self.split = split
        self._codec = RecordCodec(info.features)
        files: list[str] = []
        index: dict[str, int] = {}
        expected: list[int] = []
        pieces: list[tuple[int, int, int]] = []  # (file index, skip, take)
        for a in instructions:
            split_info = info.splits[a.split]
            lengths = dict(zip(split_info.filenames, split_info.shard_lengths, strict=False))
            for fi in split_info.file_instructions(a):
                path = inside(info.data_dir, fi.filename, f"split {a.split!r} shard name",
                              "dataset_info.json")
                if path not in index:
                    index[path] = len(files)
                    files.append(path)
                    expected.append(lengths[fi.filename])
                pieces.append((index[path], fi.skip, fi.take))
        self._paths = files
        missing = [p for p in files if not is_url(p) and not os.path.isfile(p)]
        if missing:
            raise SourceNotFoundError(
                f"prepared dataset {info.data_dir!r} is incomplete: {len(missing)} shard "
                f"file(s) listed in dataset_info.json are missing, e.g. "
                f"{os.path.basename(missing[0])!r}. Re-create the dataset")
        self._open_shards(files, expected, storage_options, read_options, lambda path, want, got: (
            f"shard {os.path.basename(path)!r} of {info.data_dir!r} has {got} "
            f"records but dataset_info.json says {want}: the file and the info do "
            "not belong together (re-create the dataset)"))
        file_starts = np.concatenate([[0], np.cumsum(expected, dtype=np.int64)])
        bases: list[int] = []
        takes: list[int] = []
        for f, skip, take in pieces:  # merge ranges that continue each other
            base = int(file_starts[f]) + skip
            if bases and bases[-1] + takes[-1] == base:
                takes[-1] += take
            else:
                bases.append(base)
                takes.append(take)
        self._bases = np.asarray(bases, dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(takes, dtype=np.int64)])
        self._len = int(self._starts[-1])
        self._single = int(bases[0]) if len(bases) == 1 else None

    @property
    def features(self) -> Any:
        """The dataset's features."""
        return self.info.features

    @property
    def paths(self) -> list[str]:
        """The shard files this source reads."""
        return list(self._paths)

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return (f"PreparedSource({self.info.data_dir!r}, split={self.split!r}, "
                f"{self._len} records)")

    def _global(self, keys: np.ndarray) -> np.ndarray:
        if self._single is not None:
            return keys + self._single
        r = np.searchsorted(self._starts, keys, side="right") - 1
        return self._bases[r] + (keys - self._starts[r])


    def _decode(self, record: bytes, key: int) -> Any:
        try:
            return self._codec.decode(record)
        except CorruptSourceError as e:
            raise CorruptSourceError(f"record {key} of {self!r} cannot be decoded: {e}") from None

    def __getitem__(self, record_key: int) -> Any:
        k = check_key(record_key, self._len, repr(self))
        g = int(self._global(np.asarray([k], dtype=np.int64))[0])
        assert self._reader is not None
        return self._decode(self._reader[g], k)

    def __getitems__(self, record_keys: Sequence[int]) -> list[Any]:
        keys = check_keys(record_keys, self._len, repr(self))
        if keys.size == 0:
            return []
        assert self._reader is not None
        records = self._reader.__getitems__(cast(Sequence[int], self._global(keys)))
        try:
            return self._codec.decode_many(records)
        except CorruptSourceError:
            return [self._decode(r, int(k)) for r, k in zip(records, keys, strict=False)]
