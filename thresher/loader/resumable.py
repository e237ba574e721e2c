"""The resumable-iterator protocol every thresher iterator implements.

``iter(DataLoader)``, ``iter(Dataset)`` and the JAX device-prefetch iterator (what
``thresher.jax.global_batches`` returns) are all a :class:`ResumableIterator`:
batches by ``next``, a small JSON state by ``get_state``, an exact restore by
``set_state``, ``close`` to stop workers and threads, ``stats`` for where the time
went. Code that wraps an iterator (prefetching, checkpointing) needs nothing more.

Example:
    >>> import thresher as th
    >>> from thresher.loader.resumable import ResumableIterator
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 4), th.IndexSampler(4), [th.Batch(2)])
    >>> isinstance(iter(loader), ResumableIterator)
    True
    >>> isinstance(iter(th.Dataset.range(3)), ResumableIterator)
    True
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from thresher.loader.profiling.stats import LoaderStats

__all__ = ["HasState", "ResumableIterator"]


@runtime_checkable
class HasState(Protocol):
    """An iterator whose position can be saved: ``get_state()`` returns a JSON-able dict."""

    def get_state(self) -> dict[str, Any]: ...


@runtime_checkable
class ResumableIterator(HasState, Protocol):
    """An iterator of batches that saves and restores its position exactly."""

    def __iter__(self) -> Iterator[Any]: ...

    def __next__(self) -> Any: ...

    def set_state(self, state: dict[str, Any]) -> None: ...

    def close(self) -> None: ...

    def stats(self, reset: bool = False) -> LoaderStats: ...
