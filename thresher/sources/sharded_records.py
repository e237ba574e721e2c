"""What a split's source over ArrayRecord shards shares, whoever wrote the shards.

A split (``train[:10%]``) of a prepared or a TFDS-written dataset is a key space
``[0, len)`` mapped onto global record indices of its shards. :class:`ShardedRecords`
holds the parts that do not depend on how records decode: the undecoded bytes of a key,
where a key lives on disk, and closing the files.

Example:
    >>> import os, tempfile
    >>> import thresher as th
    >>> path = os.path.join(tempfile.mkdtemp(), "toy")
    >>> _ = th.prepare(path, {"train": [{"x": i} for i in range(4)]},
    ...                features={"x": th.features.Scalar("int64")}, progress=False, shuffle=False)
    >>> src = th.data_source(path, split="train[2:]")
    >>> isinstance(src, ShardedRecords), len(src.raw(0)) > 0, src.record_locations([1])[0][1]
    (True, True, 3)
    >>> src.lookahead_records  # local shards: array_record's reader, no chunk cache to tell
    0
    >>> src.block_boundaries(1).tolist()   # records of group_size 1: every key a chunk
    [0, 1]
"""

from __future__ import annotations

import glob
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from thresher.errors import DatasetInfoError
from thresher.sources.formats.array_record.source import ArrayRecordSource
from thresher.sources.formats.shards import list_shards
from thresher.sources.formats.tfrecord import TFRecordSource
from thresher.sources.protocol import BlockedSource, BlockHintedSource, check_key, check_keys, join_blocks

__all__ = ["ShardedRecords"]


class ShardedRecords:
    """Mixin: ``raw``, ``record_locations``, ``close`` and the look-ahead hint for a split source.

    A subclass sets ``_reader`` (an ArrayRecordSource over the shards, or None for an
    empty split), ``_len``, and the split's pieces: ``_bases`` (the global index each
    piece starts at) and ``_starts`` (the split key each piece starts at, then ``_len``);
    it maps split keys to global indices in ``_global``.
    """

    _reader: Any
    _len: int
    _bases: np.ndarray
    _starts: np.ndarray

    def _global(self, keys: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _open_shards(self, files: Sequence[str], lengths: Sequence[int], storage_options: Any,
                     read_options: Any, mismatch: Callable[[str, int, int], str],
                     tfrecord: bool = False) -> None:
        """Sets ``_reader`` over ``files`` (None when there are none) and checks each file holds
        the number of records its info says; DatasetInfoError(``mismatch(path, want, got)``) if not.
        ``tfrecord``: the files are TFRecord files, read in place (:class:`TFRecordSource`).
        """
        self._reader = None
        if not files:
            return
        if tfrecord:
            self._reader = TFRecordSource.from_shards(list_shards(list(files), storage_options, literal=True),
                                                      storage_options)
        else:
            self._reader = ArrayRecordSource([glob.escape(p) for p in files], storage_options=storage_options,
                                             read_options=read_options)
        for path, want, got in zip(files, lengths, self._reader.file_lengths, strict=True):
            if want != got:
                raise DatasetInfoError(mismatch(path, want, got))
        if self._reader.suggested_reads_in_flight:  # shards in a bucket: the loader reads ahead
            self.suggested_reads_in_flight = self._reader.suggested_reads_in_flight

    def raw(self, record_key: int) -> bytes:
        """The undecoded record bytes of ``record_key`` (a TFDS split: a serialized Example)."""
        k = check_key(record_key, self._len, repr(self))
        assert self._reader is not None
        return bytes(self._reader[int(self._global(np.asarray([k], dtype=np.int64))[0])])

    def record_locations(self, record_keys: Sequence[int]) -> list[tuple[str, int]]:
        """The shard file of each record and its index in that file (no file is opened)."""
        keys = check_keys(record_keys, self._len, repr(self))
        if self._reader is None:
            return []
        return list(self._reader.record_locations(self._global(keys).tolist()))

    @property
    def lookahead_records(self) -> int:
        """Positions ahead whose keys the loader should pass to :meth:`upcoming` (0: none):
        the shards' reader's (byte-range reads with a chunk cache ask for them)."""
        return int(self._reader.lookahead_records) if self._reader is not None else 0

    def upcoming(self, record_keys: Sequence[int]) -> None:
        """The split keys the next reads will ask for, in order, passed on to the shards'
        reader: a hint for what its chunk cache evicts (what is read never depends on it)."""
        if self._reader is None:
            return
        keys = np.asarray(record_keys, dtype=np.int64).reshape(-1)
        self._reader.upcoming(self._global(keys[(keys >= 0) & (keys < self._len)]))

    def block_boundaries(self, min_records: int = 1) -> np.ndarray:
        """The first split key of each natural block: the shards' own blocks (whole ArrayRecord
        chunks, or whole TFRecord files), cut where the split's pieces start, consecutive ones
        joined until a block holds at least ``min_records`` (see
        :class:`thresher.sources.protocol.BlockedSource`); ``thresher.BlockShuffle.of_source``
        uses them. O(blocks of the shards read).

        Example:
            >>> import os, tempfile
            >>> import thresher as th
            >>> path = os.path.join(tempfile.mkdtemp(), "b")
            >>> _ = th.prepare(path, {"train": [{"x": i} for i in range(10)]}, num_shards=2,
            ...                features={"x": th.features.Scalar("int64")}, progress=False)
            >>> th.data_source(path, split="train[3:]").block_boundaries(4).tolist()   # 7 keys, blocks of >= 4
            [0, 6]
        """
        if self._reader is None or not self._len:
            return np.zeros(0, dtype=np.int64)
        cuts = [self._starts]
        if isinstance(self._reader, BlockedSource):
            inner = np.asarray(self._reader.block_boundaries(int(min_records)), dtype=np.int64)
            for r, base in enumerate(self._bases.tolist()):
                take = int(self._starts[r + 1] - self._starts[r])
                inside = inner[(inner > base) & (inner < base + take)]
                cuts.append(inside - base + self._starts[r])
        return join_blocks(np.concatenate(cuts), min_records)

    def upcoming_blocks(self, starts: np.ndarray, stops: np.ndarray) -> None:
        """Split key ranges ``[starts[i], stops[i])`` read together next (a BlockShuffle's window),
        passed on as the shards' ranges to a reader that takes them (byte-range reads with a chunk
        cache fetch each block's chunks in one coalesced request). A hint only."""
        if isinstance(self._reader, BlockHintedSource):
            self._reader.upcoming_blocks(*self._shard_ranges(starts, stops))

    def prefetch_blocks(self, starts: np.ndarray, stops: np.ndarray) -> None:
        """Split key ranges of the window read after the current one, passed on as the shards'
        ranges to a reader that fetches such windows ahead (``prefetch_blocks``). A hint only."""
        prefetch = getattr(self._reader, "prefetch_blocks", None)
        if prefetch is not None:
            prefetch(*self._shard_ranges(starts, stops))

    def _shard_ranges(self, starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Split key ranges as ranges of the shards' keys (a range may span pieces that are not
        adjacent in the shards)."""
        lo_out: list[int] = []
        hi_out: list[int] = []
        edges = self._starts
        for a, b in zip(np.asarray(starts, dtype=np.int64).tolist(), np.asarray(stops, dtype=np.int64).tolist(),
                        strict=True):
            a, b = max(a, 0), min(b, self._len)
            r = int(np.searchsorted(edges, a, side="right")) - 1
            while a < b:
                end = min(b, int(edges[r + 1]))
                base = int(self._bases[r]) - int(edges[r])
                lo_out.append(a + base)
                hi_out.append(end + base)
                a, r = end, r + 1
        return np.asarray(lo_out, dtype=np.int64), np.asarray(hi_out, dtype=np.int64)

    def close(self) -> None:
        """Closes open files (they reopen on the next read)."""
        if self._reader is not None:
            self._reader.close()
