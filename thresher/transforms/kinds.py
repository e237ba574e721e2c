"""The kinds of operation the engine runs: each one class that knows how it runs.

``plan_operations`` turns what the user wrote (a function, a MapTransform, a Grain
transform, ...) into one of these. A kind runs itself on the elements of a chunk
(``apply_records``) and on a whole batch (``apply_batch``); the engine only calls
those two methods, so adding a kind (say, a flat map) touches this module and the
normalisation in ``plan_operations``, nothing in the loader.

Example:
    >>> from thresher.transforms.kinds import FilterOp, MapOp
    >>> ctx = NoRandomness()
    >>> MapOp(abs, "Map(abs)", 0).apply_records([-1, 2], ctx)
    ([1, 2], None)
    >>> FilterOp(lambda x: x > 1, "Filter(big)", 1).apply_records([1, 2, 3], ctx)
    ([2, 3], [1, 2])
    >>> FilterOp(lambda b: len(b) > 2, "Filter(full)", 2).apply_batch([1, 2], ctx)
    ([1, 2], False)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

__all__ = [
    "ElementFailure",
    "FilterOp",
    "MapOp",
    "MapWithIndexOp",
    "NoRandomness",
    "OpContext",
    "Operation",
    "RandomMapOp",
    "fn_name",
    "transform_name",
]


def fn_name(fn: Any) -> str:
    """The qualified name of a callable (or of its type), for descriptions."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        name = type(fn).__qualname__
    return str(name)


class OpContext(Protocol):
    """What an operation may ask of the engine while it runs: its randomness and positions.

    ``record_rngs(salt)`` yields one generator per element of the current list
    (seeded from each element's global position); ``batch_rng(salt)`` is the
    generator of the current batch (seeded from its first global position);
    ``global_positions()`` are the global positions of the current list's elements.
    """

    def record_rngs(self, salt: int) -> Iterator[np.random.Generator]: ...

    def batch_rng(self, salt: int) -> np.random.Generator: ...

    def global_positions(self) -> np.ndarray: ...


class NoRandomness:
    """An OpContext for operations that need no randomness (examples, tests)."""

    def record_rngs(self, salt: int) -> Iterator[np.random.Generator]:
        raise TypeError("this context has no randomness")

    def batch_rng(self, salt: int) -> np.random.Generator:
        raise TypeError("this context has no randomness")

    def global_positions(self) -> np.ndarray:
        raise TypeError("this context has no positions")


class ElementFailure(Exception):
    """Raised by ``apply_records`` when the function failed on element ``index``.

    The engine turns it into a TransformError naming the record key and position.
    """

    def __init__(self, index: int, error: Exception) -> None:
        super().__init__(index, error)
        self.index = index
        self.error = error


@dataclass(frozen=True)
class Operation:
    """One step of a pipeline: the callable to run, its name and its index.

    Subclasses say how the step runs. ``filters`` is True for kinds that can drop
    elements (which makes positions data-dependent), ``random`` for kinds that take
    a seeded generator; ``salt`` keys that randomness (from the index, or the
    operation's own seed).
    """

    fn: Callable[..., Any]
    name: str
    index: int
    salt: int = 0
    filters: ClassVar[bool] = False
    random: ClassVar[bool] = False

    def apply_records(
        self, elements: list[Any], ctx: OpContext
    ) -> tuple[list[Any], list[int] | None]:
        """Runs on the elements of a chunk; returns them and the indices kept (None: all).

        Raises ElementFailure naming the element whose call failed.
        """
        raise NotImplementedError

    def apply_batch(self, batch: Any, ctx: OpContext) -> tuple[Any, bool]:
        """Runs on one batch; returns it and whether it is kept."""
        raise NotImplementedError


def _failing_index(fn: Callable[[Any], Any], elements: list[Any]) -> int:
    """Finds the element that raised, by re-running the (pure) function one by one."""
    for j, element in enumerate(elements):
        try:
            fn(element)
        except Exception:
            return j
    return 0


@dataclass(frozen=True)
class MapOp(Operation):
    """``fn(element)``: one element in, one out."""

    def apply_records(
        self, elements: list[Any], ctx: OpContext
    ) -> tuple[list[Any], list[int] | None]:
        try:
            return list(map(self.fn, elements)), None
        except Exception as e:
            raise ElementFailure(_failing_index(self.fn, elements), e) from e

    def apply_batch(self, batch: Any, ctx: OpContext) -> tuple[Any, bool]:
        return self.fn(batch), True


@dataclass(frozen=True)
class FilterOp(Operation):
    """Keeps an element (or a batch) when ``fn`` returns a true value."""

    filters: ClassVar[bool] = True

    def apply_records(
        self, elements: list[Any], ctx: OpContext
    ) -> tuple[list[Any], list[int] | None]:
        fn = self.fn
        keep: list[bool] = []
        append = keep.append
        try:
            for e in elements:
                append(bool(fn(e)))
        except Exception as e:
            raise ElementFailure(len(keep), e) from e
        if all(keep):
            return elements, None
        idx = [i for i, k in enumerate(keep) if k]
        return [elements[i] for i in idx], idx

    def apply_batch(self, batch: Any, ctx: OpContext) -> tuple[Any, bool]:
        return batch, bool(self.fn(batch))


@dataclass(frozen=True)
class RandomMapOp(Operation):
    """``fn(element, rng)`` with a generator seeded per element (or per batch)."""

    random: ClassVar[bool] = True

    def apply_records(
        self, elements: list[Any], ctx: OpContext
    ) -> tuple[list[Any], list[int] | None]:
        fn = self.fn
        out: list[Any] = []
        append = out.append
        try:
            for e, rng in zip(elements, ctx.record_rngs(self.salt), strict=False):
                append(fn(e, rng))
        except Exception as e:
            raise ElementFailure(len(out), e) from e
        return out, None

    def apply_batch(self, batch: Any, ctx: OpContext) -> tuple[Any, bool]:
        return self.fn(batch, ctx.batch_rng(self.salt)), True


@dataclass(frozen=True)
class MapWithIndexOp(Operation):
    """``fn(index, element)``, the index being the element's global position (Grain's
    ``MapWithIndexTransform``): a pure function of position, like the seeds. Runs only
    before the Batch (``plan_operations`` refuses it after)."""

    def apply_records(self, elements: list[Any], ctx: OpContext) -> tuple[list[Any], list[int] | None]:
        fn = self.fn
        out: list[Any] = []
        append = out.append
        try:
            for i, e in zip(ctx.global_positions().tolist(), elements, strict=False):
                append(fn(i, e))
        except Exception as e:
            raise ElementFailure(len(out), e) from e
        return out, None

    def apply_batch(self, batch: Any, ctx: OpContext) -> tuple[Any, bool]:
        raise TypeError(f"{self.name} runs on records, not on batches: put it before the Batch")


def transform_name(transform: Any, cls: type, kind: str, seed: int | None = None) -> str:
    """``Kind(fn)`` for a plain ``cls`` wrapping ``fn``, ``Kind(Subclass)`` otherwise.

    Example:
        >>> from thresher.transforms import MapTransform
        >>> transform_name(MapTransform(abs), MapTransform, "Map")
        'Map(abs)'
        >>> transform_name(MapTransform(), MapTransform, "Map")
        'Map(MapTransform)'
    """
    fn = getattr(transform, "_fn", None)
    extra = "" if seed is None else f", seed={seed}"
    what = (
        fn_name(fn) if type(transform) is cls and fn is not None else type(transform).__qualname__
    )
    return f"{kind}({what}{extra})"
