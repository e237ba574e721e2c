"""Grain's ``MapDataset`` and ``IterDataset``, compiled onto thresher's engine.

Each wraps a thresher Dataset, so every thresher guarantee holds: elements are a
pure function of position, the same for every worker count, with a small state and
exact resume. What differs from Grain:

- the order for a given seed differs from Grain's (thresher's keyed permutation);
- ``ds[i]`` past the end raises IndexError (Grain wraps it to a later epoch): use
  ``repeat()`` before the steps whose epochs should differ;
- ``mp_prefetch`` gives the same elements for every ``num_workers`` (Grain's change
  with it after a ``batch``).

Example:
    >>> import thresher.grain as grain
    >>> ds = grain.MapDataset.range(10).shuffle(seed=1).map(lambda x: x + 1).batch(batch_size=4)
    >>> len(ds), ds[0].shape
    (3, (4,))
    >>> sorted(x for b in ds.to_iter_dataset() for x in b.tolist())
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Callable, Sequence
from typing import Any

from thresher.dataset import nodes as N
from thresher.dataset.dataset import Dataset
from thresher.errors import ConfigError
from thresher.grain.chain import Chain, _KeepOrNone
from thresher.grain.dataset_iterator import DatasetIterator
from thresher.grain.options import MultiprocessingOptions, check_read_options
from thresher.transforms.operations import transform_function

__all__ = ["IterDataset", "MapDataset"]


def _no_batch_fn(batch_fn: Any) -> None:
    if batch_fn is not None:
        raise ConfigError("batch(batch_fn=...) is not supported: thresher stacks leaf by leaf; batch, then map "
                          "your function over the batches")


class MapDataset(Chain):
    """A random-access dataset: ``len(ds)``, ``ds[i]``, ``ds[a:b:c]`` and chained steps.

    Example:
        >>> import thresher.grain as grain
        >>> ds = grain.MapDataset.source([1, 2, 3, 4]).filter(lambda x: x % 2 == 0)
        >>> len(ds), ds[0], ds[1], list(ds)
        (4, None, 2, [2, 4])
    """

    @staticmethod
    def source(source: Any) -> MapDataset:
        """A dataset over a random-access source or a sequence (a list, a range, ...)."""
        if isinstance(source, builtins.range):
            source = list(source)
        return MapDataset(Dataset.source(source))

    @staticmethod
    def range(start: int, stop: int | None = None, step: int = 1) -> MapDataset:
        """The integers of ``range(start, stop, step)``."""
        return MapDataset(Dataset.range(start, stop, step))

    @staticmethod
    def mix(datasets: Sequence[MapDataset], weights: Sequence[float] | None = None) -> MapDataset:
        """Weighted mixing on thresher's deterministic schedule, cut to Grain's length
        (``min(len_i / (weight_i / sum(weights)))``, so no element appears twice)."""
        if not datasets or not all(isinstance(d, MapDataset) for d in datasets):
            raise ConfigError("MapDataset.mix takes a non-empty list of MapDatasets")
        w = [1.0] * len(datasets) if weights is None else [float(x) for x in weights]
        mixed = Dataset.mix([d.thresher_dataset for d in datasets], w)
        if len(w) == len(datasets) and all(x > 0 for x in w):
            length = int(min(len(d) / (x / sum(w)) for d, x in zip(datasets, w, strict=False)))
            mixed = mixed.slice(0, min(length, len(mixed)))
        return MapDataset(mixed)

    def shuffle(self, seed: int | None = None) -> MapDataset:
        """A global shuffle, new every epoch (seed hashed with the epoch)."""
        return self._with(self._ds.shuffle(self._seed(seed, "shuffle", required=True)))  # type: ignore[arg-type]

    def filter(self, transform: Any) -> MapDataset:
        """Grain's MapDataset filter: same length, None where an element is dropped;
        iteration skips the Nones."""
        predicate = transform_function(transform, "filter", "filter")
        return self._with(self._ds.map(_KeepOrNone(predicate)), sparse=True)

    def batch(self, batch_size: int, *, drop_remainder: bool = False,
              batch_fn: Callable[[Sequence[Any]], Any] | None = None) -> MapDataset:
        """Stacks ``batch_size`` consecutive elements (pytrees of NumPy arrays)."""
        _no_batch_fn(batch_fn)
        if self._sparse:
            raise ConfigError("MapDataset.batch after filter cannot stack the dropped elements' Nones (Grain fails "
                              "too): call .to_iter_dataset() before .batch(...)")
        return self._with(self._ds.batch(batch_size, drop_remainder=drop_remainder))

    def repeat(self, num_epochs: int | None = None, *, reseed_each_epoch: bool = True) -> MapDataset:
        """Repeats ``num_epochs`` times (None: forever); each epoch reshuffled."""
        if not reseed_each_epoch:
            raise ConfigError("repeat(reseed_each_epoch=False) is not supported: thresher reshuffles every epoch; "
                              "to see one epoch again, iterate the dataset again")
        return self._with(self._ds.repeat(num_epochs))

    def slice(self, sl: builtins.slice) -> MapDataset:
        """The elements ``sl`` selects, as a MapDataset (``ds[a:b:c]``)."""
        return self._with(self._ds.slice(sl.start, sl.stop, sl.step))

    def __len__(self) -> int:
        """The number of elements; ``sys.maxsize`` after ``repeat()`` without a count, as in Grain."""
        if any(isinstance(n, N.Repeat) and n.num_epochs is None for n in self._ds.nodes):
            return sys.maxsize
        return len(self._ds)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, builtins.slice):
            return self.slice(index)
        if isinstance(index, int) and not isinstance(index, bool) and index >= len(self):
            raise IndexError(f"index {index} is past the end of this MapDataset (len {len(self)}); Grain "
                             "would wrap it to a later epoch: use .repeat() and index that instead")
        return self._ds[index]

    def to_iter_dataset(self, read_options: Any = None, *, allow_nones: bool = False) -> IterDataset:
        """This dataset as an IterDataset (the Nones of a filter dropped unless ``allow_nones``)."""
        check_read_options(read_options, "to_iter_dataset read_options")
        ds = self._ds if allow_nones else self.thresher_dataset
        return IterDataset(ds, default_seed=self._default_seed)

    def __iter__(self) -> DatasetIterator:
        return iter(self.to_iter_dataset())


class IterDataset(Chain):
    """A dataset that is iterated (not indexed); made by ``MapDataset.to_iter_dataset``.

    Example:
        >>> import thresher.grain as grain
        >>> ds = grain.MapDataset.range(6).to_iter_dataset().filter(lambda x: x != 3).batch(2)
        >>> [b.tolist() for b in ds]
        [[0, 1], [2, 4], [5]]
    """

    def filter(self, transform: Any) -> IterDataset:
        """Keeps the elements for which the predicate (or FilterTransform) is true."""
        return self._with(self._ds.filter(transform_function(transform, "filter", "filter")))

    def batch(self, batch_size: int, *, drop_remainder: bool = False,
              batch_fn: Callable[[Sequence[Any]], Any] | None = None) -> IterDataset:
        """Stacks ``batch_size`` consecutive elements."""
        _no_batch_fn(batch_fn)
        return self._with(self._ds.batch(batch_size, drop_remainder=drop_remainder))

    def mp_prefetch(self, options: MultiprocessingOptions | None = None,
                    worker_init_fn: Callable[[int, int], None] | None = None,
                    sequential_slice: bool = False) -> IterDataset:
        """Computes ahead in ``options.num_workers`` processes; the elements are the same
        for every number of workers (thresher's, not Grain's, behaviour), so
        ``sequential_slice`` has nothing to change and is ignored."""
        if worker_init_fn is not None:
            raise ConfigError("mp_prefetch(worker_init_fn=...) is not supported: thresher's workers run only the "
                              "pipeline; do per-process setup lazily inside a transform")
        opts = options or MultiprocessingOptions()
        return self._with(self._ds.prefetch(worker_count=opts.num_workers,
                                            buffer=max(1, opts.per_worker_buffer_size)))

    def prefetch(self, multiprocessing_options: MultiprocessingOptions) -> IterDataset:
        """Grain's older name of ``mp_prefetch``."""
        return self.mp_prefetch(multiprocessing_options)

    def __iter__(self) -> DatasetIterator:
        return DatasetIterator(iter(self.thresher_dataset))
