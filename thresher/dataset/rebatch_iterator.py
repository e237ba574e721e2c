"""Iterating batches of a filtered stream's batches (see ``thresher.dataset.rebatch``).

Example:
    >>> import thresher as th
    >>> ds = th.Dataset.range(10).filter(lambda x: x != 4).batch(3).batch(2)
    >>> it = iter(ds)
    >>> next(it).tolist()
    [[0, 1, 2], [3, 5, 6]]
    >>> state = it.get_state()
    >>> it2 = iter(ds)
    >>> it2.set_state(state)
    >>> [b.tolist() for b in it2]
    [[[7, 8, 9]]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thresher.dataset.iterator import CompilableChain, DatasetIterator
from thresher.dataset.rebatch import run_batch_maps

if TYPE_CHECKING:
    from thresher.dataset.compile import Compiled

__all__ = ["RebatchIterator"]


class RebatchIterator(DatasetIterator):
    """Outer batches of the engine's stream of (filtered) batches; the state is the engine's."""

    def __init__(self, dataset: CompilableChain, compiled: Compiled) -> None:
        super().__init__(dataset, compiled)
        assert compiled.rebatch is not None
        self._front = compiled.rebatch

    def __next__(self) -> Any:
        batch = self._front.batch
        inner = []
        for _ in range(batch.batch_size):
            try:
                inner.append(next(self._it))
            except StopIteration:
                break
        if not inner or (len(inner) < batch.batch_size and batch.drop_remainder):
            raise StopIteration
        return run_batch_maps(self._front.fns, batch.stack(inner), "map after the outer batch")
