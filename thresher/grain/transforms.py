"""Grain's transform names (``grain.transforms`` and ``grain.python``), over thresher's.

Subclass them and override ``map``/``random_map``/``filter``/``map_with_index`` as in
Grain; they may also wrap a function. What thresher keeps of its own: a RandomMap's
generator is seeded from (seed, global position), never from seed + index, so it is
the same for every worker count and restart.

Example:
    >>> import thresher.grain as grain
    >>> class Double(grain.MapTransform):
    ...     def map(self, x):
    ...         return 2 * x
    >>> Double().map(4)
    8
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from thresher.errors import ConfigError
from thresher.transforms.batch import Batch as _Batch
from thresher.transforms.filter import FilterTransform
from thresher.transforms.map import MapTransform
from thresher.transforms.map_with_index import MapWithIndexTransform
from thresher.transforms.random_map import RandomMapTransform

__all__ = ["Batch", "Filter", "FilterTransform", "Map", "MapTransform", "MapWithIndex", "MapWithIndexTransform",
           "RandomMap", "RandomMapTransform", "Transformation", "Transformations"]

Map = MapTransform
RandomMap = RandomMapTransform
Filter = FilterTransform
MapWithIndex = MapWithIndexTransform


class Batch(_Batch):
    """Grain's ``Batch(batch_size, drop_remainder=False, batch_fn=None)``.

    thresher stacks leaf by leaf; a ``batch_fn`` is refused (put the function in a
    map after the Batch).

    Example:
        >>> from thresher.grain import Batch
        >>> Batch(4, drop_remainder=True)
        Batch(4, drop_remainder=True)
    """

    def __init__(self, batch_size: int, drop_remainder: bool = False,
                 batch_fn: Callable[[Sequence[Any]], Any] | None = None) -> None:
        if batch_fn is not None:
            raise ConfigError("Batch(batch_fn=...) is not supported: thresher's Batch stacks leaf by leaf; pass "
                              "Batch(batch_size) and apply your function in a map after it")
        super().__init__(batch_size, drop_remainder)


Transformation = _Batch | MapTransform | RandomMapTransform | FilterTransform | MapWithIndexTransform
Transformations = Sequence[Transformation]


def __getattr__(name: str) -> Any:
    if name == "TfRandomMap":
        raise AttributeError("Grain's TfRandomMap is not part of thresher.grain.transforms: use RandomMapTransform "
                             "(thresher passes a NumPy Generator; no TensorFlow op is run)")
    raise AttributeError(f"module 'thresher.grain.transforms' has no attribute {name!r}")
