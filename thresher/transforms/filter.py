"""FilterTransform: keep the elements for which a predicate is true."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thresher.transforms.kinds import FilterOp, Operation, transform_name

__all__ = ["FilterTransform"]


class FilterTransform:
    """Keeps an element when ``filter(element)`` is true.

    A Filter before the Batch makes the number of records per batch data-dependent:
    batches are still a pure function of position, but a checkpoint can then only be
    restored under the same shard geometry (see docs/architecture.md, invariant 5).

    Example:
        >>> from thresher.transforms import FilterTransform
        >>> FilterTransform(lambda x: x % 2 == 0).filter(4)
        True
    """

    def __init__(self, fn: Callable[[Any], bool] | None = None) -> None:
        self._fn = fn

    def filter(self, element: Any) -> bool:
        fn = getattr(self, "_fn", None)
        if fn is None:
            raise NotImplementedError(
                f"{type(self).__name__} must override filter() or be given a function")
        return bool(fn(element))

    def describe(self) -> str:
        """``Filter(fn)`` for a wrapped function, ``Filter(Subclass)`` otherwise."""
        return transform_name(self, FilterTransform, "Filter")

    def to_operation(self, index: int) -> Operation:
        """This step as the engine runs it."""
        return FilterOp(self.filter, self.describe(), index)

    def __repr__(self) -> str:
        return self.describe()
