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

    def __init__(self, ds: Dataset, *, default_seed: int | None = None, sparse: bool = False) -> None:
        self._ds = ds
        self._default_seed = default_seed
        self._sparse = sparse

    def _with(self: C, ds: Dataset, **changes: Any) -> C:
        out = type(self).__new__(type(self))
        Chain.__init__(out, ds, default_seed=changes.get("default_seed", self._default_seed),
                       sparse=changes.get("sparse", self._sparse))
        return out

    def _seed(self, seed: int | None, what: str, required: bool) -> int | None:
        if seed is not None:
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
        """``fn(element, rng)``, the generator seeded from (seed, position)."""
        s = self._seed(seed, "random_map", required=False)
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
