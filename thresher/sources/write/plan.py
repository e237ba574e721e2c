"""Where each keyed record goes, from counts per bucket of sort keys: no step holds a split.

A distributed prepare (``thresher.beam``) cannot sort a whole split in one place. It cuts
the sort-key space into ``NUM_BUCKETS`` contiguous *buckets*, counts the records of each
(a ``Plan``: prefix sums of the counts, a fixed-size array whatever the dataset's size),
and sends every record to the shard(s) its bucket overlaps. A shard's writer then holds
its own records plus the parts of the (at most two) buckets that straddle its edges, sorts
them, and keeps the positions that are its own. With many more buckets than shards a
straddling bucket is a small fraction of a shard.

Buckets: with ``shuffle=True`` sort keys start with a uniform 64-bit hash, so the bucket is
its leading 16 bits (``hash_bucket``). With ``shuffle=False`` sort keys are the keys' own
bytes, which can share long prefixes (``0, 1, 2, ...`` differ only in their last bytes), so
the buckets are cut at approximate quantiles of the sort keys (``edge_bucket``).

Example:
    >>> import numpy as np
    >>> counts = np.zeros(NUM_BUCKETS, np.int64)
    >>> counts[[3, 7, 9]] = [4, 5, 3]                  # 12 records in three buckets
    >>> plan = Plan(counts, nbytes=1200, num_shards=3)  # shards [0, 4) [4, 8) [8, 12)
    >>> list(plan.shards_of(3)), list(plan.shards_of(7)), list(plan.shards_of(9))
    ([0], [1, 2], [2])
    >>> recs = [(7, b"g%d" % i, b"r") for i in range(5)] + [(9, b"x%d" % i, b"r") for i in range(3)]
    >>> [pos for pos, _ in plan.place(2, recs, split="train")]
    [8, 9, 10, 11]
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from thresher.errors import ConfigError
from thresher.sources.formats.prepared.keys import describe_key
from thresher.sources.write.local import shard_bounds

__all__ = ["EDGES", "NUM_BUCKETS", "Plan", "edge_bucket", "hash_bucket"]

NUM_BUCKETS = 1 << 16
EDGES = 4097  # quantiles of the sort keys for shuffle=False: 4,096 ordered buckets

Routed = tuple[int, bytes, bytes]  # (bucket, sort key, record)


def hash_bucket(sk: bytes) -> int:
    """The bucket of a ``shuffle=True`` sort key: its leading 16 bits (a uniform hash)."""
    return int.from_bytes((sk[:2] + b"\0\0")[:2], "big")


def edge_bucket(edges: Sequence[bytes], sk: bytes) -> int:
    """The bucket of a ``shuffle=False`` sort key between quantile ``edges`` (sorted, ends included)."""
    return bisect.bisect_right(edges, sk, 1, max(1, len(edges) - 1)) - 1 if len(edges) > 2 else 0


class Plan:
    """Records per bucket (as prefix sums), the split's bytes, and its shard bounds.

    ``counts`` is one int per bucket (``NUM_BUCKETS`` of them); the plan's size does not
    depend on the number of records.
    """

    def __init__(self, counts: np.ndarray, nbytes: int, num_shards: int | None) -> None:
        self.starts = np.zeros(len(counts) + 1, np.int64)
        np.cumsum(counts, out=self.starts[1:])
        self.count, self.nbytes = int(self.starts[-1]), int(nbytes)
        self.bounds = shard_bounds(self.count, self.nbytes, num_shards)

    @property
    def num_shards(self) -> int:
        """How many shard files the split has (at least one, even when empty)."""
        return len(self.bounds) - 1

    def shard_of(self, position: int) -> int:
        """The shard holding the record at global ``position``."""
        return bisect.bisect_right(self.bounds, position) - 1

    def shards_of(self, bucket: int) -> range:
        """The shards that the records of ``bucket`` land in (a bucket is contiguous)."""
        lo, hi = int(self.starts[bucket]), int(self.starts[bucket + 1])
        if hi == lo:
            return range(0)
        return range(self.shard_of(lo), self.shard_of(hi - 1) + 1)

    def place(self, shard: int, routed: Iterable[Routed], split: str,
              shuffle: bool = True) -> Iterator[tuple[int, bytes]]:
        """The ``(position, record)`` pairs of ``shard``, in order, out of everything routed to it.

        ``routed`` holds every record of each bucket that overlaps the shard (what
        ``shards_of`` sends), so a record's rank in its sorted bucket is known; the ones
        outside the shard are dropped. Duplicate keys and records a runner lost or
        delivered twice are errors (``shuffle`` says how to name a duplicate key).
        """
        records = sorted(routed, key=lambda r: r[1])
        first, end = self.bounds[shard], self.bounds[shard + 1]
        bucket, rank, prev = -1, 0, None
        expected = first
        for b, sk, record in records:
            if sk == prev:
                key = describe_key(sk[8:] if shuffle else sk)
                raise ConfigError(f"split {split!r}: two examples have the key {key}; keys must "
                                  "be unique within a split")
            if b != bucket:
                self._check_bucket(bucket, rank, shard, split)
                bucket, rank = b, 0
            pos = int(self.starts[b]) + rank
            rank, prev = rank + 1, sk
            if first <= pos < end:
                if pos != expected:  # a whole bucket before this one never came
                    self._refuse_missing(expected, shard, split)
                expected += 1
                yield pos, record
        self._check_bucket(bucket, rank, shard, split)
        if expected != end:  # the shard's last bucket(s) never came
            self._refuse_missing(expected, shard, split)

    def bucket_of(self, position: int) -> int:
        """The bucket holding the record at global ``position`` (``0 <= position < count``).

        Example:
            >>> counts = np.zeros(NUM_BUCKETS, np.int64)
            >>> counts[[3, 7]] = [4, 5]
            >>> Plan(counts, nbytes=90, num_shards=2).bucket_of(4)
            7
        """
        return int(np.searchsorted(self.starts, position, side="right")) - 1

    def _refuse_missing(self, position: int, shard: int, split: str) -> None:
        self._refuse(shard, self.bucket_of(position), 0, split)

    def _check_bucket(self, bucket: int, got: int, shard: int, split: str) -> None:
        if bucket >= 0 and got != self.starts[bucket + 1] - self.starts[bucket]:
            self._refuse(shard, bucket, got, split)

    def _refuse(self, shard: int, bucket: int, got: int, split: str) -> None:
        planned = int(self.starts[bucket + 1] - self.starts[bucket])
        raise ConfigError(
            f"split {split!r}: shard {shard} of {self.num_shards} got {got} of the {planned} records "
            f"of bucket {bucket} (global positions [{int(self.starts[bucket])}, "
            f"{int(self.starts[bucket + 1])})) that the plan counted, so the runner "
            f"{'lost' if got < planned else 'added'} records between counting and the shard writer. "
            "Nothing was committed; run the pipeline again (see 'When a shard refuses to write' in "
            "docs/beam.md)")
