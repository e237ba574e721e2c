"""Grain's ``DataLoader`` (all of its keywords) and its iterator, on thresher's engine.

What thresher keeps of its own, where Grain's behaviour is a bug:

- batches are the same for every ``worker_count`` (Grain's depend on it);
- a state saved under one worker count restores under any other (Grain refuses);
- seeds are hashed with the epoch, never added to it (Grain's seed 0 epoch 1 is seed
  1 epoch 0).

The order for a given seed differs from Grain's, so a state saved by Grain itself is
refused. ``get_state()`` returns bytes of JSON, as Grain's does, and ``set_state``
takes them (or the dict inside).

Example:
    >>> import thresher.grain as grain
    >>> loader = grain.DataLoader(data_source=grain.RangeDataSource(0, 6, 1),
    ...                           sampler=grain.IndexSampler(6, grain.NoSharding(), num_epochs=1),
    ...                           operations=[grain.Batch(2)])
    >>> it = iter(loader)
    >>> next(it).tolist()
    [0, 1]
    >>> state = it.get_state()
    >>> type(state)
    <class 'bytes'>
    >>> it2 = iter(loader)
    >>> it2.set_state(state)
    >>> next(it2).tolist()
    [2, 3]
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from thresher._validate import check_count
from thresher.errors import ConfigError
from thresher.loader.data_loader import DataLoader as _DataLoader
from thresher.loader.iterator import DataLoaderIterator as _DataLoaderIterator
from thresher.samplers.index_sampler import IndexSampler
from thresher.samplers.sharding import ShardOptions

__all__ = ["DataLoader", "DataLoaderIterator", "PyGrainDatasetIterator"]


def _sampler_with(sampler: IndexSampler, shard_options: Any) -> IndexSampler:
    """The sampler, sharded by the DataLoader's ``shard_options`` when they are given."""
    if shard_options is None:
        return sampler
    wanted = ShardOptions.coerce(shard_options, "DataLoader shard_options")
    own = sampler.shard_options
    if own.shard_count != 1 and (own.shard_index, own.shard_count) != (wanted.shard_index, wanted.shard_count):
        raise ConfigError(f"DataLoader shard_options={shard_options!r} and the sampler's {own!r} disagree: "
                          "shard once, in either place")
    return sampler.with_shard_options(wanted)


class DataLoader(_DataLoader):
    """Grain's DataLoader: keyword arguments only, as in Grain.

    Args:
        data_source: a random-access source.
        sampler: ``thresher.grain.IndexSampler`` or ``SequentialSampler`` (or thresher's).
        operations: Grain's or thresher's transforms and one Batch.
        worker_count: processes; None lets thresher choose (``"auto"``).
        worker_buffer_size: chunks computed ahead per worker (Grain counts batches);
            speed and memory only.
        shard_options: shards the sampler's stream (when the sampler has none).
        read_options: Grain's ReadOptions; checked, then unused (reads are batched per chunk).
        enable_profiling: accepted; use ``iterator.stats()`` for thresher's profile.

    Example:
        >>> import thresher.grain as grain
        >>> loader = grain.DataLoader(data_source=grain.InMemoryDataSource(range(4)),
        ...                           sampler=grain.IndexSampler(4, num_epochs=1),
        ...                           shard_options=grain.ShardOptions(0, 2), worker_count=0)
        >>> list(loader)
        [0, 2]
    """

    def __init__(self, *, data_source: Any, sampler: IndexSampler, operations: Sequence[Any] = (),
                 worker_count: int | None = 0, worker_buffer_size: int = 1, shard_options: Any = None,
                 read_options: Any = None, enable_profiling: bool = False) -> None:
        check_count(worker_buffer_size, "worker_buffer_size")
        if isinstance(sampler, IndexSampler):
            sampler = _sampler_with(sampler, shard_options)
        super().__init__(data_source, sampler, list(operations),
                         worker_count="auto" if worker_count is None else worker_count,
                         worker_buffer_size=max(1, worker_buffer_size), read_options=read_options)
        self.enable_profiling = bool(enable_profiling)

    def __iter__(self) -> DataLoaderIterator:
        return self.iterator_at(0)

    def iterator_at(self, position: int) -> DataLoaderIterator:
        return DataLoaderIterator(self.engine, position, decision=self.autotune_report, decided=self._decided)


class DataLoaderIterator(_DataLoaderIterator):
    """The iterator of a ``thresher.grain.DataLoader``: ``get_state()`` is bytes of JSON.

    Example:
        >>> import thresher.grain as grain
        >>> loader = grain.DataLoader(data_source=grain.RangeDataSource(0, 3, 1),
        ...                           sampler=grain.SequentialSampler(3))
        >>> it = iter(loader)
        >>> _ = next(it)
        >>> json.loads(it.get_state())["position"]
        1
    """

    def get_state(self) -> bytes:  # type: ignore[override]
        return json.dumps(super().get_state(), indent=4).encode()


PyGrainDatasetIterator = DataLoaderIterator
