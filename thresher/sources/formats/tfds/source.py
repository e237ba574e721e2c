"""TfdsSource: random access to a split expression of a TFDS array_record dataset.

Key ``k`` is the k-th record of the split expression's shard ranges in order, the same
record ``tfds.data_source`` returns at ``k``; records decode to the values it returns
(:mod:`thresher.sources.formats.tfds.decode`). Reads are batched through one
:class:`~thresher.sources.ArrayRecordSource`; the source pickles as paths and ranges.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from thresher.errors import CorruptSourceError, SourceNotFoundError
from thresher.sources.formats.tfds.batch import BatchDecoder
from thresher.sources.formats.tfds.decode import TfdsCodec
from thresher.sources.formats.tfds.files import DatasetDir
from thresher.sources.formats.tfds.info import TfdsInfo
from thresher.sources.paths import inside
from thresher.sources.protocol import check_key, check_keys
from thresher.sources.remote.fs import is_url
from thresher.sources.remote.reader import RemoteReadOptions
from thresher.sources.sharded_records import ShardedRecords
from thresher.splits import AbsoluteInstruction

__all__ = ["TfdsSource"]


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1] if is_url(path) else os.path.basename(path)


class TfdsSource(ShardedRecords):
    """Decoded records of one split expression of a TFDS dataset (array_record shards, or
    tfrecord shards read in place through their cached offset indexes).

    Made by ``thresher.data_source(tfds_dir, split=...)``; see :func:`thresher.builder`.
    """

    def __init__(self, info: TfdsInfo, split: str,
                 instructions: Sequence[AbsoluteInstruction], *,
                 storage_options: Mapping[str, Any] | None = None,
                 read_options: RemoteReadOptions | None = None) -> None:
        self.info = info
        self.split = split
        self._codec = TfdsCodec(info.features)
        self._batch = BatchDecoder(self._codec)
        files: list[str] = []
        lengths: list[int] = []
        index: dict[str, int] = {}
        bases: list[int] = []
        takes: list[int] = []
        starts_of_file: list[int] = []
        for a in instructions:
            split_info = info.splits[a.split]
            per_file = dict(zip(split_info.filenames, split_info.shard_lengths, strict=False))
            for fi in split_info.file_instructions(a):
                path = inside(info.data_dir, fi.filename, f"split {a.split!r} shard name",
                              "dataset_info.json")
                if path not in index:
                    index[path] = len(files)
                    starts_of_file.append(sum(lengths))
                    files.append(path)
                    lengths.append(per_file[fi.filename])
                base = starts_of_file[index[path]] + fi.skip
                if bases and bases[-1] + takes[-1] == base:
                    takes[-1] += fi.take
                else:
                    bases.append(base)
                    takes.append(fi.take)
        if is_url(info.data_dir):
            names = DatasetDir(info.data_dir, storage_options).names()
            missing = [p for p in files if p.rsplit("/", 1)[-1] not in names]
        else:
            missing = [p for p in files if not os.path.isfile(p)]
        if missing:
            raise SourceNotFoundError(
                f"TFDS dataset {info.data_dir!r}: shard file {_basename(missing[0])!r} "
                f"(one of {len(missing)} missing) is listed in dataset_info.json but does not "
                "exist; the download or copy is incomplete. Copy or regenerate the dataset")
        self._paths = files
        self._open_shards(files, lengths, storage_options, read_options, lambda path, want, got: (
            f"shard {path!r} has {got} records but dataset_info.json says {want}: "
            "the shard is truncated or belongs to another dataset"), tfrecord=not info.has_array_record)
        self._bases = np.asarray(bases, dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(takes, dtype=np.int64)])
        self._len = int(self._starts[-1])

    @property
    def paths(self) -> list[str]:
        """The shard files this source reads."""
        return list(self._paths)

    @property
    def features(self) -> Any:
        """The dataset's TFDS features."""
        return self.info.features

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return f"TfdsSource({self.info.data_dir!r}, split={self.split!r}, {self._len} records)"

    def _global(self, keys: np.ndarray) -> np.ndarray:
        r = np.searchsorted(self._starts, keys, side="right") - 1
        return cast(np.ndarray, self._bases[r] + (keys - self._starts[r]))

    def _where(self, global_key: int, key: int) -> str:
        assert self._reader is not None
        lengths = np.cumsum(self._reader.file_lengths)
        f = int(np.searchsorted(lengths, global_key, side="right"))
        local = global_key - (int(lengths[f - 1]) if f else 0)
        return (f"record {local} of shard {self._paths[f]!r} (key {key} of split "
                f"{self.split!r})")

    def __getitem__(self, record_key: int) -> Any:
        k = check_key(record_key, self._len, repr(self))
        g = int(self._global(np.asarray([k], dtype=np.int64))[0])
        assert self._reader is not None
        return self._codec.decode(self._reader[g], self._where(g, k))

    def __getitems__(self, record_keys: Sequence[int]) -> list[Any]:
        keys = check_keys(record_keys, self._len, repr(self))
        if keys.size == 0:
            return []
        assert self._reader is not None
        global_keys = self._global(keys)
        records = self._reader.__getitems__(cast(Sequence[int], global_keys))
        fast = self._batch.decode(records)
        if fast is not None:
            return fast
        try:
            return self._codec.decode_many(records)
        except CorruptSourceError:  # redo one by one to name the record
            return [self._codec.decode(r, self._where(int(g), int(k)))
                    for r, g, k in zip(records, global_keys, keys, strict=False)]
