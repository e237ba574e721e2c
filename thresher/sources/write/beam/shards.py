"""The steps of ``thresher.beam`` that both exchanges share: encode, count, write a shard.

``thresher.beam.WriteDataset`` moves records from encoders to shard writers either through
the runner's shuffle or through spill files (``thresher.sources.write.beam.files``); before and after
that exchange the steps are the same and live here. Importing this module needs Beam.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from thresher._optional import missing

try:
    import apache_beam as beam
except ModuleNotFoundError as e:
    raise missing(e, "thresher.beam") from e

from thresher.errors import ConfigError
from thresher.features import RecordCodec
from thresher.sources.formats.array_record.writer import ArrayRecordWriter
from thresher.sources.formats.prepared.info import SplitInfo
from thresher.sources.formats.prepared.keys import key_bytes, sort_key
from thresher.sources.formats.prepared.layout import shard_filename
from thresher.sources.remote.fs import join
from thresher.sources.write.commit import staging
from thresher.sources.write.plan import NUM_BUCKETS, Plan, Routed, edge_bucket, hash_bucket

__all__ = ["METRICS", "Count", "Encoder", "WriteShard", "bucket_function", "split_info"]

METRICS = "thresher.beam"  # namespace of the metrics that WriteShard reports


class Encoder:
    """``(key, example)`` -> ``(sort key, record)`` for one split (picklable)."""

    def __init__(self, codec: RecordCodec, split: str, shuffle_key: int, shuffle: bool) -> None:
        self.codec, self.split, self.key, self.shuffle = codec, split, shuffle_key, shuffle

    def __call__(self, pair: Any) -> tuple[bytes, bytes]:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ConfigError(f"split {self.split!r}: WriteDataset needs (key, example) pairs, "
                              f"got {type(pair).__name__}")
        where = f"example with key {pair[0]!r:.80} of split {self.split!r}"
        kb = key_bytes(pair[0], where)
        return sort_key(self.key, kb, shuffle=self.shuffle), self.codec.encode(pair[1], where)


class _EdgeBucket:
    def __init__(self, edges: Sequence[bytes]) -> None:
        self.edges = edges

    def __call__(self, sk: bytes) -> int:
        return edge_bucket(self.edges, sk)


def bucket_function(edges: Sequence[bytes] | None) -> Any:
    """The bucket of a sort key: by hash (``edges`` None, ``shuffle=True``) or between quantile edges."""
    return hash_bucket if edges is None else _EdgeBucket(edges)


class Count(beam.CombineFn):
    """Records per bucket and bytes of a split: a fixed-size array, whatever the split's size.

    Its inputs are routed records (``Routed``); ``add_counts`` is the hook for inputs that
    already carry counts per bucket.
    """

    def __init__(self, num_shards: int | None) -> None:
        self.num_shards = num_shards

    def create_accumulator(self) -> list[Any]:
        return [np.zeros(NUM_BUCKETS, np.int64), 0]

    def add_input(self, acc: list[Any], routed: Routed) -> list[Any]:
        acc[0][routed[0]] += 1
        acc[1] += len(routed[2])
        return acc

    def merge_accumulators(self, accs: Iterable[list[Any]]) -> list[Any]:
        out = self.create_accumulator()
        for counts, nbytes in accs:
            out[0] += counts
            out[1] += nbytes
        return out

    def extract_output(self, acc: list[Any]) -> Plan:
        return Plan(acc[0], acc[1], self.num_shards)


class WriteShard(beam.DoFn):
    """Writes one shard's ArrayRecord file from what was routed to it (one shard in memory).

    Reports, in namespace ``METRICS``, the distributions ``held_records`` and ``held_bytes``
    (what one call holds: the shard plus the parts of its edge buckets) and ``shard_records``.
    Subclasses gather the shard's records another way by overriding ``gather``. ``tmp`` is
    a local directory or a URL (``storage_options`` for it): see ``write_shard``.
    """

    def __init__(self, tmp: str, dataset: str, split: str, shuffle: bool,
                 storage_options: Mapping[str, Any] | None = None) -> None:
        self.tmp, self.dataset, self.split, self.shuffle = tmp, dataset, split, shuffle
        self.storage_options = storage_options
        self.held = beam.metrics.Metrics.distribution(METRICS, "held_records")
        self.held_bytes = beam.metrics.Metrics.distribution(METRICS, "held_bytes")
        self.written = beam.metrics.Metrics.distribution(METRICS, "shard_records")

    def gather(self, values: Iterable[Any], edges: Sequence[bytes] | None) -> list[Routed]:
        """The records routed to a shard, from the values the shuffle grouped for it."""
        return list(values)

    def process(self, item: tuple[int, Iterable[Any]], plan: Plan,
                edges: Sequence[bytes] | None = None) -> Iterator[tuple[int, int, int]]:
        shard, values = item
        held = self.gather(values, edges)
        self.held.update(len(held))
        self.held_bytes.update(sum(len(r[2]) for r in held))
        result = write_shard(self.tmp, self.dataset, self.split, shard, plan.num_shards,
                             (r for _, r in plan.place(shard, held, self.split, self.shuffle)),
                             self.storage_options)
        self.written.update(result[1])
        yield result


def write_shard(tmp: str, dataset: str, split: str, shard: int, shards: int,
                records: Iterable[bytes], storage_options: Mapping[str, Any] | None = None
                ) -> tuple[int, int, int]:
    """Writes shard ``shard`` of ``shards``; returns (shard, records, bytes on disk).

    Into directory ``tmp``; when ``tmp`` is a URL, into a local file uploaded whole to
    its final object name (a retry writes the same bytes to the same name).
    """
    with staging(join(tmp, shard_filename(dataset, split, shard, shards)), storage_options) as path:
        with ArrayRecordWriter(path) as w:
            for r in records:
                w.write(r)
            n = w.count
        size = os.path.getsize(path)
    return shard, n, size


def split_info(written: list[tuple[int, int, int]], plan: Plan, tmp: str, dataset: str,
               split: str, storage_options: Mapping[str, Any] | None = None) -> SplitInfo:
    """The SplitInfo of a split from its written shards (an empty shard file where none came)."""
    shards = plan.num_shards
    done = {s: (n, size) for s, n, size in written}
    for s in range(shards):  # an empty split still has its one (empty) shard file
        if s not in done:
            _, n, size = write_shard(tmp, dataset, split, s, shards, (), storage_options)
            done[s] = (n, size)
    lengths = tuple(done[s][0] for s in range(shards))
    return SplitInfo(split, lengths, sum(size for _, size in done.values()), dataset)
