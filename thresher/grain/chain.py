"""What Grain's MapDataset and IterDataset share: a thresher Dataset plus Grain's seeding.

Grain's ``ds.seed(s)`` seeds every later ``shuffle()``/``random_map()`` that has no
seed of its own; here each gets ``derive_seed(s, step)`` (step = its place in the
chain), hashed, never added.

After a MapDataset ``filter``, Grain keeps the length and puts None where an element
was dropped; later steps pass None through and iteration skips it. The functions
here do the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from thresher._validate import is_int
from thresher.dataset.dataset import Dataset
from thresher.errors import ConfigError
from thresher.randomness.seeds import check_seed, derive_seed
from thresher.transforms.operations import transform_function

__all__ = ["Chain", "skip_none"]

C = TypeVar("C", bound="Chain")
_DOMAIN_GRAIN_SEED = 0x47524E53  # "GRNS"


class _NonePassing:
    """Runs ``fn`` on elements that are not None (what Grain does after a filter)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.__qualname__ = getattr(fn, "__qualname__", type(fn).__qualname__)

    def __call__(self, element: Any, *rest: Any) -> Any:
        return None if element is None else self.fn(element, *rest)


class _KeepOrNone:
    """A Grain MapDataset filter: the element if it passes, else None."""

    def __init__(self, predicate: Callable[[Any], Any]) -> None:
        self.predicate = predicate
        self.__qualname__ = getattr(predicate, "__qualname__", type(predicate).__qualname__)

    def __call__(self, element: Any) -> Any:
        return element if element is not None and self.predicate(element) else None


def skip_none(element: Any) -> bool:
    """The filter that drops the None placeholders of a MapDataset filter."""
    return element is not None


class Chain:
    """A thresher Dataset with Grain's default seed and None placeholders."""

    def __init__(self, ds: Dataset, *, default_seed: int | None = None, sparse: bool = False,
                 parents: tuple[Chain, ...] = ()) -> None:
        self._ds = ds
        self._default_seed = default_seed
        self._sparse = sparse
        self._parents = parents

    def _with(self: C, ds: Dataset, **changes: Any) -> C:
        out = type(self).__new__(type(self))
        Chain.__init__(out, ds, default_seed=changes.get("default_seed", self._default_seed),
                       sparse=changes.get("sparse", self._sparse), parents=(self,))
        return out

    @property
    def parents(self) -> tuple[Chain, ...]:
        """The datasets this one was made from (Grain's ``parents``): none for a source."""
        return self._parents

    def pipe(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``func(self, *args, **kwargs)``: a step written as a function, in a chain (Grain's ``pipe``).

        Example:
            >>> import thresher.grain as grain
            >>> list(grain.MapDataset.range(3).pipe(lambda ds, k: ds.map(lambda x: x + k), 10))
            [10, 11, 12]
        """
        return func(self, *args, **kwargs)

    def apply(self: C, transformations: Any) -> C:
        """Applies Grain transformations in order: Map/RandomMap/Filter transforms and Batch.

        Example:
            >>> import thresher.grain as grain
            >>> class Double(grain.MapTransform):
            ...     def map(self, x):
            ...         return 2 * x
            >>> [b.tolist() for b in grain.MapDataset.range(4).apply([Double(), grain.Batch(2)])]
            [[0, 2], [4, 6]]
        """
        from thresher.transforms.batch import Batch
        from thresher.transforms.filter import FilterTransform
        from thresher.transforms.random_map import RandomMapTransform

        ds: Any = self
        for i, t in enumerate(transformations if isinstance(transformations, (list, tuple)) else [transformations]):
            batch = Batch.coerce(t, i)
            if batch is not None:
                ds = ds.batch(batch.batch_size, drop_remainder=batch.drop_remainder)
            elif isinstance(t, RandomMapTransform) or hasattr(t, "random_map"):
                ds = ds.random_map(t)
            elif isinstance(t, FilterTransform) or hasattr(t, "filter"):
                ds = ds.filter(t)
            else:
                ds = ds.map(t)
        return ds

    def _seed(self, seed: int | None, what: str, required: bool) -> int | None:
        if seed is not None:
            if what == "shuffle" and not (is_int(seed) and 0 <= seed < 2**32):
                check_seed(seed, f"{what} seed")  # the type error first
                raise ConfigError(f"{what} seed must be an integer between 0 and 2**32-1, as in Grain (got "
                                  f"{seed}); thresher.Dataset.shuffle takes 64-bit seeds")
            return check_seed(seed, f"{what} seed")
        if self._default_seed is not None:
            return derive_seed(self._default_seed, _DOMAIN_GRAIN_SEED, len(self._ds.nodes))
        if required:
            raise ConfigError(f"{what} needs a seed: pass {what}(seed=...) or call .seed(...) earlier in the chain")
        return None

    def _fn(self, transform: Any, kind: str, where: str) -> Callable[..., Any]:
        fn = transform_function(transform, kind, where)
        return _NonePassing(fn) if self._sparse else fn

    def seed(self: C, seed: int) -> C:
        """Seeds every later shuffle and random_map that has no seed of its own."""
        return self._with(self._ds, default_seed=check_seed(seed, "seed"))

    def map(self: C, transform: Any) -> C:
        """A function or MapTransform applied to every element."""
        return self._with(self._ds.map(self._fn(transform, "map", "map")))

    def random_map(self: C, transform: Any, *, seed: int | None = None) -> C:
        """``fn(element, rng)``, the generator seeded from (seed, position); a seed is needed, as in
        Grain (``seed=`` or an earlier ``.seed(...)``)."""
        s = self._seed(seed, "random_map", required=True)
        return self._with(self._ds.random_map(self._fn(transform, "random_map", "random_map"), seed=s))

    def map_with_index(self, transform: Any) -> Any:
        """Not supported on Datasets: a DataLoader runs MapWithIndexTransform."""
        raise ConfigError("map_with_index is not supported on thresher.grain datasets: put a "
                          "MapWithIndexTransform in a DataLoader's operations (its index is the global position)")

    @property
    def thresher_dataset(self) -> Dataset:
        """The thresher Dataset this compiles to (placeholders dropped)."""
        return self._ds.filter(skip_none) if self._sparse else self._ds

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._ds!r})"
