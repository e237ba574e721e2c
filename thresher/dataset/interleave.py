"""Interleave: many datasets (e.g. one per file) read in a deterministic cycle.

Semantics (close to tf.data's ``interleave`` with ``deterministic=True``): the
first ``cycle_length`` non-empty datasets fill the cycle's slots. In each round,
every slot in turn gives its next ``block_length`` elements (fewer when it has
fewer left); a slot whose dataset ran out takes the next unused dataset for the
next round, and slots with nothing left to take drop out. The stream ends when
every dataset is exhausted.

Because every dataset's length is known, the rounds form at most about 2 * S
*segments* (S datasets) in which the set of slots does not change; they are
computed once, and position -> (dataset, index) is a binary search plus
arithmetic. ``InterleaveView`` is a random-access view of the interleaved stream,
so it shuffles, batches and runs in the engine's workers like any source.

Example:
    >>> from thresher.dataset.interleave import interleave_order
    >>> interleave_order([3, 1, 2], cycle_length=2, block_length=2)
    [(0, 0), (0, 1), (1, 0), (0, 2), (2, 0), (2, 1)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from thresher._validate import check_count
from thresher.dataset.views import read_extended
from thresher.errors import ConfigError
from thresher.sources.protocol import check_key, read_many

__all__ = ["InterleaveView", "interleave_order", "reference_order"]


@dataclass(frozen=True)
class _Segment:
    start: int
    datasets: np.ndarray  # int64, per slot
    offsets: np.ndarray  # int64, per slot: the index each slot starts this segment at
    rounds: int  # full rounds of block_length each (0 for a last, uneven round)
    counts: np.ndarray | None  # for an uneven round: what each slot gives
    length: int


def _segments(lengths: Sequence[int], cycle_length: int, block_length: int) -> list[_Segment]:
    b = block_length
    pending = iter([i for i, n in enumerate(lengths) if n > 0])
    slots: list[list[int]] = []  # [dataset, offset, remaining]
    for i in pending:
        slots.append([i, 0, lengths[i]])
        if len(slots) == cycle_length:
            break
    out: list[_Segment] = []
    pos = 0
    while slots:
        ds = np.array([s[0] for s in slots], dtype=np.int64)
        offs = np.array([s[1] for s in slots], dtype=np.int64)
        k = min(s[2] // b for s in slots)
        if k > 0:
            n = k * b * len(slots)
            out.append(_Segment(pos, ds, offs, k, None, n))
            for s in slots:
                s[1] += k * b
                s[2] -= k * b
        else:
            counts = np.array([min(b, s[2]) for s in slots], dtype=np.int64)
            n = int(counts.sum())
            out.append(_Segment(pos, ds, offs, 0, counts, n))
            for s, c in zip(slots, counts.tolist(), strict=False):
                s[1] += c
                s[2] -= c
        pos += n
        kept: list[list[int]] = []
        for s in slots:
            if s[2] > 0:
                kept.append(s)
                continue
            nxt = next(pending, None)
            if nxt is not None:
                kept.append([nxt, 0, lengths[nxt]])
        slots = kept
    return out


def reference_order(lengths: Sequence[int], cycle_length: int, block_length: int) -> list[tuple[int, int]]:
    """The interleaved order by direct simulation, round by round (for tests).

    Example:
        >>> from thresher.dataset.interleave import reference_order
        >>> reference_order([2, 1], cycle_length=2, block_length=1)
        [(0, 0), (1, 0), (0, 1)]
    """
    pending = [i for i, n in enumerate(lengths) if n > 0]
    slots = [[i, 0] for i in pending[:cycle_length]]
    pending = pending[cycle_length:]
    out: list[tuple[int, int]] = []
    while slots:
        for s in slots:
            take = min(block_length, lengths[s[0]] - s[1])
            out.extend((s[0], s[1] + j) for j in range(take))
            s[1] += take
        nxt = []
        for s in slots:
            if s[1] < lengths[s[0]]:
                nxt.append(s)
            elif pending:
                nxt.append([pending.pop(0), 0])
        slots = nxt
    return out


class InterleaveView:
    """Key g -> element g of the interleaved stream of ``components``.

    Example:
        >>> from thresher.dataset.interleave import InterleaveView
        >>> view = InterleaveView([["a0", "a1"], ["b0"], ["c0", "c1"]], [2, 1, 2], cycle_length=2)
        >>> view.__getitems__(list(range(len(view))))
        ['a0', 'b0', 'a1', 'c0', 'c1']
    """

    def __init__(self, components: Sequence[Any], lengths: Sequence[int], cycle_length: int,
                 block_length: int = 1) -> None:
        for name, v in (("cycle_length", cycle_length), ("block_length", block_length)):
            check_count(v, f"interleave {name}", minimum=1)
        if len(components) != len(lengths):
            raise ConfigError("interleave: one length per dataset")
        self._components = list(components)
        self._segments = _segments(list(lengths), cycle_length, block_length)
        self._starts = [s.start for s in self._segments]
        self._len = sum(int(n) for n in lengths)
        self._block = block_length

    def __len__(self) -> int:
        return self._len

    def locate_many(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions -> (datasets, indices in them), int64 arrays."""
        g = np.asarray(g, dtype=np.int64)
        seg_of = np.searchsorted(np.asarray(self._starts, dtype=np.int64), g, side="right") - 1
        ds = np.empty_like(g)
        idx = np.empty_like(g)
        b = self._block
        for si in np.unique(seg_of).tolist():
            where = seg_of == si
            seg = self._segments[si]
            o = g[where] - seg.start
            if seg.counts is None:
                per_round = b * len(seg.datasets)
                rnd, within = np.divmod(o, per_round)
                slot, j = np.divmod(within, b)
                ds[where] = seg.datasets[slot]
                idx[where] = seg.offsets[slot] + rnd * b + j
            else:
                ends = np.cumsum(seg.counts)
                slot = np.searchsorted(ends, o, side="right")
                ds[where] = seg.datasets[slot]
                idx[where] = seg.offsets[slot] + o - (ends[slot] - seg.counts[slot])
        return ds, idx

    def __getitem__(self, key: int) -> Any:
        return self.__getitems__([key])[0]

    def __getitems__(self, keys: Sequence[int]) -> list[Any]:
        for k in (min(keys), max(keys)) if len(keys) else ():
            check_key(k, self._len, repr(self))
        return self._read(np.asarray(keys, dtype=np.int64), None)

    @property
    def varies_by_epoch(self) -> bool:
        """Whether a component changes from one repeat epoch to the next."""
        return any(getattr(c, "varies_by_epoch", False) for c in self._components)

    def read_extended(self, keys: Sequence[int]) -> list[Any]:
        """Reads keys ``e * len(self) + k``: element k in repeat epoch e, which reads
        each component's epoch e (see ``views.read_extended``)."""
        epochs, k = np.divmod(np.asarray(keys, dtype=np.int64), self._len)
        return self._read(k, epochs)

    def _read(self, keys: np.ndarray, epochs: np.ndarray | None) -> list[Any]:
        ds, idx = self.locate_many(keys)
        out: list[Any] = [None] * len(keys)
        for d in np.unique(ds).tolist():
            where = np.flatnonzero(ds == d)
            component = self._components[d]
            if epochs is None:
                elements = read_many(component, idx[where].tolist())
            else:
                elements = read_extended(component, (epochs[where] * len(component) + idx[where]).tolist())
            for i, element in zip(where.tolist(), elements, strict=False):
                out[i] = element
        return out

    def __repr__(self) -> str:
        return f"InterleaveView({len(self._components)} datasets, {self._len} elements)"


def interleave_order(lengths: Sequence[int], cycle_length: int, block_length: int = 1) -> list[tuple[int, int]]:
    """(dataset, index) for every position of the interleaved stream."""
    view = InterleaveView([None] * len(lengths), lengths, cycle_length, block_length)
    ds, idx = view.locate_many(np.arange(len(view)))
    return list(zip(ds.tolist(), idx.tolist(), strict=False))

