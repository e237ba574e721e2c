"""MapWithIndexTransform: a map that also receives the element's index in the stream."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["MapWithIndexTransform"]


class MapWithIndexTransform:
    """Applies ``fn(index, element)``, where ``index`` is the element's global position.

    The index is the position in the job's global stream (epoch * N + i, counted over
    all shards), which is what Grain passes too. It is a pure function of position:
    the same for every worker count, shard count and restart. It must come before the
    Batch (after it, use a map on whole batches).

    Example:
        >>> import thresher as th
        >>> from thresher.transforms import MapWithIndexTransform
        >>> tag = MapWithIndexTransform(lambda i, x: (i, x))
        >>> list(th.DataLoader(th.sources.InMemoryDataSource("ab"), th.IndexSampler(2, num_epochs=2), [tag]))
        [(0, 'a'), (1, 'b'), (2, 'a'), (3, 'b')]
    """

    def __init__(self, fn: Callable[[int, Any], Any] | None = None) -> None:
        self._fn = fn

    def map_with_index(self, index: int, element: Any) -> Any:
        fn = getattr(self, "_fn", None)
        if fn is None:
            raise NotImplementedError(f"{type(self).__name__} must override map_with_index() or be given a function")
        return fn(index, element)

    def __repr__(self) -> str:
        from thresher.transforms.operations import describe

        return describe(self)
