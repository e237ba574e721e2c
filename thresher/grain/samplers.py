"""Grain's samplers with Grain's positional order, over thresher's IndexSampler.

Grain: ``IndexSampler(num_records, shard_options, shuffle, num_epochs, seed)``, with
``num_epochs=None`` (forever) by default. What thresher keeps of its own: epochs
are keyed by hashing (seed, epoch), so seed 0 at epoch 1 is not seed 1 at epoch 0
(Grain adds them); the order for a given seed differs from Grain's.

Example:
    >>> import thresher.grain as grain
    >>> s = grain.IndexSampler(4, grain.NoSharding(), True, 1, 0)
    >>> sorted(s[p].record_key for p in range(4))
    [0, 1, 2, 3]
"""

from __future__ import annotations

import sys
from typing import Protocol, runtime_checkable

from thresher.errors import ConfigError
from thresher.samplers.index_sampler import IndexSampler as _IndexSampler
from thresher.samplers.index_sampler import RecordMetadata
from thresher.samplers.sharding import NoSharding, ShardOptions

__all__ = ["IndexSampler", "Sampler", "SequentialSampler"]


@runtime_checkable
class Sampler(Protocol):
    """Grain's sampler interface: the RecordMetadata of a global index."""

    def __getitem__(self, index: int) -> RecordMetadata: ...


class IndexSampler(_IndexSampler):
    """thresher's IndexSampler with Grain's argument order, defaults and indexing.

    As in Grain, ``len()`` is the length of the global stream (``sys.maxsize`` when endless)
    and ``s[i]`` is the metadata of global index ``i``, whatever the shard: a DataLoader asks
    shard k for the indices it holds. Which records a shard holds is thresher's own
    (blocks of the global stream dealt in turn, docs/differences_from_grain.md), so the
    ``record_key`` of an index differs from Grain's when the stream is sharded.

    Example:
        >>> import thresher.grain as grain
        >>> s = grain.IndexSampler(num_records=5, shard_options=grain.NoSharding(), num_epochs=2)
        >>> len(s), s[6].record_key, s[6].epoch
        (10, 1, 1)
    """

    def __init__(self, num_records: int, shard_options: ShardOptions | None = None, shuffle: bool = False,
                 num_epochs: int | None = None, seed: int | None = None) -> None:
        if isinstance(num_records, int) and num_records <= 0:
            raise ConfigError(f"a Grain sampler needs at least one record (Grain refuses {num_records} too), "
                              f"got num_records={num_records}")
        super().__init__(num_records, shuffle=shuffle, seed=seed, num_epochs=num_epochs,
                         shard_options=shard_options)

    def __len__(self) -> int:
        n = self.global_length
        return sys.maxsize if n is None else n

    def __getitem__(self, index: int) -> RecordMetadata:
        """The metadata of global index ``index`` (its ``index`` is ``index``)."""
        if not isinstance(index, int) or index < 0 or index >= len(self):
            raise IndexError(f"index {index!r} is outside this sampler's global stream [0, {len(self)})")
        return _IndexSampler.__getitem__(self.with_shard_options(NoSharding()), index)


class SequentialSampler(IndexSampler):
    """The records in order, once (Grain's SequentialSampler).

    Example:
        >>> from thresher.grain import SequentialSampler
        >>> [m.record_key for m in SequentialSampler(3)]
        [0, 1, 2]
    """

    def __init__(self, num_records: int, shard_options: ShardOptions | None = None,
                 seed: int | None = None) -> None:
        super().__init__(num_records, shard_options, False, 1, seed)
