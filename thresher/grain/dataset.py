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


def mix_weights(datasets: Sequence[Chain], weights: Sequence[float] | None, where: str) -> list[float]:
    """The weights of a Grain mix, checked as Grain checks them (positive, one per non-empty dataset)."""
    kind = MapDataset if where.startswith("MapDataset") else IterDataset
    if not datasets or not all(isinstance(d, kind) for d in datasets):
        raise ConfigError(f"{where} takes a non-empty list of {kind.__name__}s")
    w = [1.0] * len(datasets) if weights is None else [float(x) for x in weights]
    if len(w) != len(datasets):
        raise ConfigError(f"{where} got {len(datasets)} datasets but {len(w)} weights")
    if not all(x > 0 for x in w):
        raise ConfigError(f"{where}: every weight must be positive, as in Grain, got {w} (leave a dataset out "
                          "instead of giving it weight 0)")
    empty = [i for i, d in enumerate(datasets) if isinstance(d, MapDataset) and len(d) == 0]
    if empty:
        raise ConfigError(f"{where}: the datasets at {empty} are empty, and Grain refuses to mix an empty dataset")
    return w


class MapDataset(Chain):
    """A random-access dataset: ``len(ds)``, ``ds[i]``, ``ds[a:b:c]`` and chained steps.

    Example:
        >>> import thresher.grain as grain
        >>> ds = grain.MapDataset.source([1, 2, 3, 4]).filter(lambda x: x % 2 == 0)
        >>> len(ds), ds[0], ds[1], list(ds)
        (4, None, 2, [2, 4])
    """

    _endless: bool | None = None  # set by repeat, mix and slice; None: as the parents are

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
        (``min(len_i / (weight_i / sum(weights)))`` over the finite components, so no element
        appears twice; ``sys.maxsize`` when every component is endless). Weights must be positive
        and components non-empty, as in Grain.

        Example:
            >>> import thresher.grain as grain
            >>> len(grain.MapDataset.mix([grain.MapDataset.range(4), grain.MapDataset.range(9)], [1, 3]))
            12
        """
        ds = list(datasets)
        w = mix_weights(ds, weights, "MapDataset.mix")
        mixed = Dataset.mix([d.thresher_dataset for d in ds], w)
        finite = [(len(d), x) for d, x in zip(ds, w, strict=True) if len(d) != sys.maxsize]
        if finite:
            mixed = mixed.slice(0, int(min(n / (x / sum(w)) for n, x in finite)))
        out = MapDataset(mixed, parents=tuple(ds))
        out._endless = not finite
        return out

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
        """Repeats ``num_epochs`` times (None: forever); each epoch reshuffled. Repeating an endless
        dataset is a ValueError, as in Grain."""
        if len(self) == sys.maxsize:
            raise ConfigError(f"repeating the endless dataset {self!r} does nothing (Grain refuses it too): "
                              "remove one of the repeat() calls")
        if not reseed_each_epoch:
            raise ConfigError("repeat(reseed_each_epoch=False) is not supported: thresher reshuffles every epoch; "
                              "to see one epoch again, iterate the dataset again")
        out = self._with(self._ds.repeat(num_epochs))
        out._endless = num_epochs is None and len(self) > 0  # an empty dataset repeated is empty, as in Grain
        return out

    def slice(self, sl: builtins.slice) -> MapDataset:
        """The elements ``sl`` selects, as a MapDataset (``ds[a:b:c]``); ValueError if ``sl`` is not a slice."""
        if not isinstance(sl, builtins.slice):
            raise ConfigError(f"MapDataset.slice takes a slice (ds.slice(slice(5)) or ds[:5]), got {sl!r}")
        out = self._with(self._ds.slice(sl.start, sl.stop, sl.step))
        out._endless = False
        return out

    def _is_endless(self) -> bool:
        if self._endless is not None:
            return self._endless
        return any(isinstance(p, MapDataset) and p._is_endless() for p in self._parents)

    def __len__(self) -> int:
        """The number of elements; ``sys.maxsize`` after ``repeat()`` without a count, as in Grain."""
        return sys.maxsize if self._is_endless() else len(self._ds)

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

    @staticmethod
    def mix(datasets: Sequence[IterDataset], weights: Sequence[float] | None = None) -> IterDataset:
        """Weighted mixing of IterDatasets (Grain's ``IterDataset.mix``), on thresher's deterministic
        schedule; it ends when a dataset runs out, as Grain's does. The datasets must be random
        access underneath (``MapDataset(...).to_iter_dataset()`` without a filter): thresher mixes
        by position.

        Example:
            >>> import thresher.grain as grain
            >>> a, b = grain.MapDataset.range(3).to_iter_dataset(), grain.MapDataset.range(10, 13).to_iter_dataset()
            >>> sorted(grain.IterDataset.mix([a, b], [1, 1]))
            [0, 1, 2, 10, 11, 12]
        """
        ds = list(datasets)
        w = mix_weights(ds, weights, "IterDataset.mix")
        if any(d._sparse for d in ds):
            raise ConfigError("IterDataset.mix: thresher mixes datasets by position, so each must be random access "
                              "(a MapDataset's to_iter_dataset() with no filter); mix the MapDatasets, then filter")
        return IterDataset(Dataset.mix([d.thresher_dataset for d in ds], w), parents=tuple(ds))

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
