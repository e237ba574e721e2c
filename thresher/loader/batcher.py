"""Forming batches over the in-order stream of processed elements."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np

from thresher.loader.chunk import Chunk
from thresher.loader.profiling.stats import BATCH, StatsRecorder
from thresher.transforms.batch import Batch

__all__ = ["Batcher"]

_NO_POSITIONS = np.zeros(0, dtype=np.int64)


class Batcher:
    """Accumulates chunks in order and hands out whole batches.

    ``pop`` returns ``(output, end, first, count)``: the batch (or the single element
    when there is no Batch), the position after its last element (the iterator state
    once it is emitted), the position of its first element, and its number of
    elements. The time spent stacking goes to ``stats`` (stage ``batch``), if given.

    Example:
        >>> import numpy as np
        >>> from thresher.loader.batcher import Batcher
        >>> from thresher.loader.chunk import Chunk
        >>> from thresher.transforms import Batch
        >>> b = Batcher(Batch(2))
        >>> b.add(Chunk(0, 3, np.arange(3), [10, 11, 12]))
        >>> out, end, first, count = b.pop(final=False)
        >>> out.tolist(), end, first, count
        ([10, 11], 2, 0, 2)
        >>> b.pop(final=False) is None, b.pop(final=True)[0].tolist()
        (True, [12])
    """

    def __init__(self, batch: Batch | None, stats: StatsRecorder | None = None, by_range: bool = False) -> None:
        self._batch = batch
        #: Batches are the positions [k*B, (k+1)*B), whatever was left out of them (records
        #: blocked or consumed elsewhere: thresher.loader.exclusions), not B elements each.
        self._by_range = by_range and batch is not None
        self._covered = 0  # the stop of the last chunk added
        self._stats = stats
        self._size = batch.batch_size if batch is not None else 1
        self._elements: list[Any] = []
        self._positions: np.ndarray = _NO_POSITIONS  # int64, the positions of _elements
        self._head = 0  # without a Batch: elements [0, _head) are already handed out
        self._ready: deque[tuple[Any, int, int, int]] = deque()  # batches stacked by a worker

    def add(self, chunk: Chunk) -> None:
        self._covered = chunk.stop
        if chunk.batches is not None:
            if len(self._elements) > self._head:
                raise RuntimeError("internal error: stacked batches arrived after a partial batch")
            size = self._size
            for i, batch in enumerate(chunk.batches):
                first = chunk.start + i * size
                end = min(first + size, chunk.stop)
                self._ready.append((batch, end, first, end - first))
            return
        if self._head:
            del self._elements[:self._head]
            self._positions = self._positions[self._head:]
            self._head = 0
        if self._elements:
            self._elements.extend(chunk.elements)
            self._positions = np.concatenate((self._positions, chunk.positions))
        else:
            self._elements = list(chunk.elements)
            self._positions = chunk.positions

    @property
    def pending(self) -> int:
        return len(self._elements) - self._head + len(self._ready)

    def pop(self, final: bool) -> tuple[Any, int, int, int] | None:
        if self._ready:
            return self._ready.popleft()
        if self._by_range:
            return self._pop_range(final)
        head = self._head
        n = len(self._elements) - head
        size = self._size
        if n < size:
            if not final or n == 0 or self._batch is None or self._batch.drop_remainder:
                return None
            size = n
        if self._batch is None:  # one element at a time: no list shifting
            element = self._elements[head]
            self._elements[head] = None
            self._head = head + 1
            p = int(self._positions[head])
            return element, p + 1, p, 1
        if n == size:
            elements, self._elements = self._elements, []
            pos, self._positions = self._positions, _NO_POSITIONS
        else:
            elements = self._elements[:size]
            del self._elements[:size]
            pos = self._positions[:size]
            self._positions = self._positions[size:]
        start = time.monotonic_ns()
        out = self._batch.stack(elements, pos)
        if self._stats is not None:
            self._stats.stage(BATCH, start, time.monotonic_ns())
        return out, int(pos[-1]) + 1, int(pos[0]), size

    def _pop_range(self, final: bool) -> tuple[Any, int, int, int] | None:
        """The batch of the positions [k*B, (k+1)*B) holding the first pending element."""
        batch = self._batch
        assert batch is not None
        if not self._elements:
            return None
        size = self._size
        first = int(self._positions[0])
        stop = (first // size + 1) * size
        if self._covered < stop:  # the range is not complete yet, or the stream ended inside it
            if not final or batch.drop_remainder:
                return None
            stop = self._covered
        k = int(np.searchsorted(self._positions, stop))
        elements = self._elements[:k]
        del self._elements[:k]
        pos = self._positions[:k]
        self._positions = self._positions[k:]
        start = time.monotonic_ns()
        out = batch.stack(elements, pos)
        if self._stats is not None:
            self._stats.stage(BATCH, start, time.monotonic_ns())
        return out, stop, first // size * size, k  # a batch-level RandomMap is seeded as without the exclusions
