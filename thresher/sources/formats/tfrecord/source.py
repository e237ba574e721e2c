"""TFRecordSource: random access to the records of TFRecord files, read in place.

Example:
    >>> import os, tempfile
    >>> import thresher as th
    >>> from thresher.sources.formats.tfrecord.framing import frame_record
    >>> d = tempfile.mkdtemp()
    >>> for s in range(2):
    ...     with open(os.path.join(d, f"train.tfrecord-{s:05d}-of-00002"), "wb") as f:
    ...         _ = f.write(b"".join(frame_record(f"r{s}{i}".encode()) for i in range(3)))
    >>> src = th.sources.TFRecordSource(os.path.join(d, "train.tfrecord-*"))
    >>> len(src), src[4], src.__getitems__([5, 0])
    (6, b'r11', [b'r12', b'r00'])
    >>> src.block_boundaries().tolist()
    [0, 3]
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from thresher.sources.formats.index_cache import load_or_build
from thresher.sources.formats.shard_files import ShardFiles, in_shard_groups
from thresher.sources.formats.shards import Shard, list_shards
from thresher.sources.formats.tfrecord.index import INDEX_KIND, INDEX_VERSION, check_records, read_checked, scan_offsets
from thresher.sources.protocol import check_key, check_keys, join_blocks

__all__ = ["TFRecordSource"]

_REMOTE_READS_IN_FLIGHT = 16


class TFRecordSource:
    """The records (bytes) of TFRecord files, in file order, each checked against its CRCs.

    Args:
        paths: a file, a glob (``train.tfrecord-*``, sorted), a brace pattern
            (``train.tfrecord-{00000..01023}-of-01024``) or a list of them; URLs
            (``gs://``, ``s3://``) are read through fsspec by byte ranges.
        storage_options: fsspec options for URLs.

    Each file's offset index is built once, in a pass that checks every record's
    length and CRCs, and cached (beside the file when its directory is writable, else
    in the user cache; :mod:`~thresher.sources.formats.index_cache`), keyed by the file's
    size and mtime (or ETag): a file that changed gets a new index, never the old one.
    A read checks the record's header and both CRCs again, so bytes returned are
    verified. Worker processes get the shard list only and load the cached indexes.
    Records are serialized protos: decode ``tf.train.Example`` ones with
    :func:`thresher.sources.formats.tfds.wire.parse_example`, or read a TFDS directory with
    ``thresher.data_source`` (it uses this source for tfrecord datasets).
    """

    def __init__(self, paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                 storage_options: Mapping[str, Any] | None = None) -> None:
        shards = list_shards(paths, storage_options, what="TFRecord")
        self._open(shards, storage_options)

    @classmethod
    def from_shards(cls, shards: Sequence[Shard], storage_options: Mapping[str, Any] | None = None
                    ) -> TFRecordSource:
        """A source over shards already listed (:func:`~thresher.sources.formats.shards.list_shards`)."""
        self = cls.__new__(cls)
        self._open(list(shards), storage_options)
        return self

    def _open(self, shards: list[Shard], storage_options: Mapping[str, Any] | None) -> None:
        self._files = ShardFiles(shards, storage_options)
        self._paths = [s.url for s in shards]
        self._offsets = [self._index(i) for i in range(len(shards))]
        counts = [len(o) for o in self._offsets]
        self._starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
        ends = [np.append(o[1:], s.size) if len(o) else o for o, s in zip(self._offsets, shards, strict=True)]
        self._all_offsets = np.concatenate([np.zeros(0, np.int64), *self._offsets]).astype(np.int64)
        self._all_ends = np.concatenate([np.zeros(0, np.int64), *ends]).astype(np.int64)
        if self._files.remote:
            self.suggested_reads_in_flight = _REMOTE_READS_IN_FLIGHT

    def _index(self, i: int) -> np.ndarray:
        shard = self._files.shards[i]

        def build() -> dict[str, np.ndarray]:
            with self._files.open_stream(i) as f:
                return {"offsets": scan_offsets(f, shard.size, shard.url)}

        return load_or_build(shard, INDEX_KIND, INDEX_VERSION, build)["offsets"]

    def __getstate__(self) -> dict[str, Any]:
        return {"files": self._files}

    def __setstate__(self, state: dict[str, Any]) -> None:
        files: ShardFiles = state["files"]
        files.check_unchanged()
        self._open(files.shards, files.storage_options)

    @property
    def paths(self) -> list[str]:
        """The files, in key order."""
        return list(self._paths)

    @property
    def file_lengths(self) -> list[int]:
        """The number of records in each file."""
        return [len(o) for o in self._offsets]

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __repr__(self) -> str:
        return f"TFRecordSource({len(self._offsets)} files, {len(self)} records)"

    def block_boundaries(self, min_records: int = 1) -> np.ndarray:
        """The first key of each natural block (one per file, consecutive ones joined until a block
        holds at least ``min_records``), as :class:`thresher.sources.protocol.BlockedSource` asks;
        ``thresher.BlockShuffle.of_source`` uses them."""
        return join_blocks(self._starts, min_records)

    def _locate(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        files = np.searchsorted(self._starts, keys, side="right") - 1
        return files, keys - self._starts[files]

    def record_locations(self, record_keys: Sequence[int]) -> list[tuple[str, int]]:
        """The file of each key and the record's index in it (nothing is read)."""
        files, local = self._locate(check_keys(record_keys, len(self), repr(self)))
        return [(self._files.name(int(f)), int(j)) for f, j in zip(files, local, strict=True)]

    def __getitem__(self, record_key: int) -> bytes:
        return self.__getitems__([check_key(record_key, len(self), repr(self))])[0]

    def __getitems__(self, record_keys: Sequence[int]) -> list[bytes]:
        keys = check_keys(record_keys, len(self), repr(self))
        files, local = self._locate(keys)
        file_list, starts, ends = files.tolist(), self._all_offsets[keys].tolist(), self._all_ends[keys].tolist()
        names = self._paths
        if not self._files.remote:  # sliced out of the files' maps: no system call per record
            grouped = in_shard_groups(keys, files, self.__getitems__)  # more shards than maps kept
            if grouped is not None:
                return grouped
            return read_checked(self._files.local_buffers(set(file_list)), file_list, starts, ends, names,
                                local.tolist())
        blobs = self._files.read_many(list(zip(file_list, starts, ends, strict=True)))
        return check_records(blobs, [names[f] for f in file_list], local.tolist(), starts)

    # What a TFDS split source asks of its shards' reader (thresher.sources.sharded_records).
    lookahead_records = 0
    suggested_reads_in_flight = 0  # local files; URLs: _REMOTE_READS_IN_FLIGHT

    def upcoming(self, record_keys: Sequence[int]) -> None:
        """Nothing to prepare: reads are single byte ranges."""

    def close(self) -> None:
        """Closes open files (they reopen on the next read)."""
        self._files.close()
