"""Repeating a stage whose source changes from one epoch to the next.

``ds.random_map(f).shuffle(seed=1).repeat(2)`` compiles to two stages: the random
map runs in a view (stage 0) that the shuffled, repeated stage 1 reads. For the
draws to change in every epoch, as with Grain's ``repeat`` (``reseed_each_epoch``,
its default), epoch e of stage 1 must read epoch e of the view. A ``RepeatView``
does that: key g of the repeated stream is epoch ``e = g // N`` and record
``perm_e(g % N)`` of the sampler's shuffle (the very keys the engine's
``IndexSampler`` gives), read from the source as the *extended* key
``e * N + perm_e(g % N)`` (``views.read_extended``). The stage then runs
over the RepeatView with a sampler of one epoch and no shuffle of its own, so
every global position, every per-record seed and every shard get exactly what
the repeated stage would give them: the stream stays a pure function of position.

Example:
    >>> import thresher as th
    >>> from thresher.dataset.repeat import RepeatView
    >>> view = RepeatView(["a", "b", "c"], shuffle=None, num_epochs=2)
    >>> len(view), view.__getitems__([0, 4, 5])
    (6, ['a', 'b', 'c'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from thresher.dataset.views import ENDLESS, read_extended
from thresher.samplers.block_shuffle import BlockShuffle
from thresher.samplers.index_sampler import IndexSampler
from thresher.samplers.sharding import ShardOptions
from thresher.sources.protocol import check_key

__all__ = ["RepeatView", "repeated_sampler"]


class RepeatView:
    """``num_epochs`` epochs of ``source`` (None: forever), epoch e shuffled by the
    sampler's permutation of epoch e (a block shuffle's with ``block``) and read from the
    source's epoch e."""

    def __init__(self, source: Any, *, shuffle: int | None, num_epochs: int | None,
                 block: BlockShuffle | None = None) -> None:
        self._source = source
        self._records = len(source)
        order: bool | BlockShuffle = block if block is not None and shuffle is not None else shuffle is not None
        self._sampler = IndexSampler(self._records, shuffle=order, seed=shuffle, num_epochs=None)
        self._len = ENDLESS if num_epochs is None else num_epochs * self._records
        self._label = f"RepeatView({source!r}, num_epochs={num_epochs})"

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, key: int) -> Any:
        return self.__getitems__([key])[0]

    def __getitems__(self, keys: Sequence[int]) -> list[Any]:
        g = np.asarray(keys, dtype=np.int64)
        if g.size and (int(g.min()) < 0 or int(g.max()) >= self._len):
            bad = int(g.min()) if int(g.min()) < 0 else int(g.max())
            check_key(bad, self._len, self._label)
        record_keys, epochs = self._sampler.record_keys(g)
        return read_extended(self._source, (epochs * self._records + record_keys).tolist())

    def __repr__(self) -> str:
        return self._label


def repeated_sampler(view: RepeatView, seed: int | None, shard: ShardOptions | None) -> IndexSampler:
    """The sampler that runs a stage over ``view``: one epoch, no shuffle, the stage's seed
    (so RandomMap draws are seeded as the repeated stage would seed them).

    Example:
        >>> from thresher.dataset.repeat import RepeatView, repeated_sampler
        >>> s = repeated_sampler(RepeatView([1, 2], shuffle=5, num_epochs=3), 5, None)
        >>> len(s), s.shuffle, s.seed
        (6, False, 5)
    """
    endless = len(view) >= ENDLESS
    return IndexSampler(len(view), shuffle=False, seed=seed, num_epochs=None if endless else 1,
                        shard_options=shard)
