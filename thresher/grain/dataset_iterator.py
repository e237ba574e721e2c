"""Grain's ``DatasetIterator``: a thresher Dataset iterator with Grain's class name.

``get_state()`` returns a dict, as Grain's DatasetIterator does (Grain's DataLoader
iterator returns bytes); ``set_state`` takes either.

Example:
    >>> import thresher.grain as grain
    >>> it = iter(grain.MapDataset.range(5))
    >>> isinstance(it, grain.DatasetIterator), next(it)
    (True, 0)
    >>> state = it.get_state()
    >>> next(it), next(it)
    (1, 2)
    >>> it.set_state(state)
    >>> next(it)
    1
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["DatasetIterator"]


class DatasetIterator(Iterator[Any]):
    """Iterates a ``thresher.grain`` MapDataset or IterDataset; the state resumes exactly."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __iter__(self) -> DatasetIterator:
        return self

    def __next__(self) -> Any:
        return next(self._inner)

    def get_state(self) -> dict[str, Any]:
        """A small JSON-serialisable dict; nothing of the data is in it."""
        return self._inner.get_state()

    def set_state(self, state: Any, **kwargs: Any) -> None:
        """Continues exactly where ``state`` (a dict, or bytes of JSON) was taken."""
        self._inner.set_state(state, **kwargs)

    def start_prefetch(self) -> None:
        """Accepted for Grain code; thresher starts computing ahead on the first ``next``."""

    def close(self) -> None:
        """Stops any worker processes."""
        close = getattr(self._inner, "close", None)
        if callable(close):
            close()
