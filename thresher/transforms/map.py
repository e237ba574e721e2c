"""MapTransform: one element in, one element out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thresher.transforms.kinds import MapOp, Operation, transform_name

__all__ = ["MapTransform"]


class MapTransform:
    """Applies a function to every element.

    Subclass and override ``map``, or wrap a function: ``MapTransform(fn)``. A plain
    callable in a DataLoader's ``operations`` is wrapped this way. The function must
    be pure (its result may depend only on the element): that is what makes batches
    the same for every worker count and every restart.

    Example:
        >>> from thresher.transforms import MapTransform
        >>> class Double(MapTransform):
        ...     def map(self, element):
        ...         return element * 2
        >>> Double().map(3), MapTransform(lambda x: x + 1).map(3)
        (6, 4)
    """

    def __init__(self, fn: Callable[[Any], Any] | None = None) -> None:
        self._fn = fn

    def map(self, element: Any) -> Any:
        fn = getattr(self, "_fn", None)
        if fn is None:
            raise NotImplementedError(
                f"{type(self).__name__} must override map() or be given a function")
        return fn(element)

    def describe(self) -> str:
        """``Map(fn)`` for a wrapped function, ``Map(Subclass)`` otherwise (fingerprinted)."""
        return transform_name(self, MapTransform, "Map")

    def to_operation(self, index: int) -> Operation:
        """This step as the engine runs it (the wrapped function itself when there is one)."""
        fn = getattr(self, "_fn", None)
        direct = fn if type(self) is MapTransform and fn is not None else self.map
        return MapOp(direct, self.describe(), index)

    def __repr__(self) -> str:
        return self.describe()
