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

from thresher.samplers.index_sampler import IndexSampler as _IndexSampler
from thresher.samplers.sharding import ShardOptions

__all__ = ["IndexSampler", "SequentialSampler"]


class IndexSampler(_IndexSampler):
    """thresher's IndexSampler with Grain's argument order and defaults.

    ``len()`` of an endless sampler is ``sys.maxsize``, as in Grain.

    Example:
        >>> import thresher.grain as grain
        >>> s = grain.IndexSampler(num_records=5, shard_options=grain.NoSharding(), num_epochs=2)
        >>> len(s), s[6].record_key, s[6].epoch
        (10, 1, 1)
    """

    def __init__(self, num_records: int, shard_options: ShardOptions | None = None, shuffle: bool = False,
                 num_epochs: int | None = None, seed: int | None = None) -> None:
        super().__init__(num_records, shuffle=shuffle, seed=seed, num_epochs=num_epochs,
                         shard_options=shard_options)

    def __len__(self) -> int:
        n = self.local_length
        return sys.maxsize if n is None else n


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
