"""Cheap chunks computed several at a time in this process, handed out one by one.

A chunk pays a fixed cost whatever its size: a few NumPy calls to sample its keys, one
read call, one call per operation, the stage clocks. For a pipeline that does little
per record (``RangeDataSource`` and ``x + 1``: about 40 ns a record) that fixed cost is
a quarter of the time of a 256-position chunk. ``CoalescingProducer`` (worker_count=0,
no read threads) therefore computes ``k`` consecutive chunks in one call of the chunk
processor and splits the result back into the chunks of ``chunk_size`` positions that
one-by-one computation would have given: the same positions, elements, dropped records,
in the same order, since a chunk is a pure function of its positions.

``k`` starts at 1 (the first batch comes as soon as without coalescing) and doubles
while one chunk takes less than ``CHEAP_S``, up to ``MAX_CHUNKS`` and to ``BUDGET_S`` of
work per call (so the memory held is what a few milliseconds of work produce). An
error in a coalesced call is not raised from there: coalescing stops and the chunks are
computed one by one again, so the error comes at the very chunk, after the very batches,
that it would have without coalescing.

Example:
    >>> import thresher as th
    >>> from thresher.loader.chunk import ChunkProcessor
    >>> from thresher.loader.producers.coalescing import CoalescingProducer
    >>> from thresher.transforms import plan_operations
    >>> proc = ChunkProcessor(th.sources.RangeDataSource(0, 10), th.IndexSampler(10), plan_operations([]))
    >>> p = CoalescingProducer(proc, 0, 10, 3)
    >>> [c.elements for c in iter(p.next_chunk, None)]
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np

from thresher.loader.chunk import Chunk, ChunkProcessor
from thresher.loader.producers.base import ChunkLoop
from thresher.loader.profiling.stats import StatsRecorder

__all__ = ["BUDGET_S", "CHEAP_S", "MAX_CHUNKS", "CoalescingProducer", "split_chunk"]

CHEAP_S = 0.0005  # a chunk faster than this is worth coalescing with the next ones
BUDGET_S = 0.004  # at most this much work per coalesced call
MAX_CHUNKS = 16


def split_chunk(chunk: Chunk, bounds: list[tuple[int, int]]) -> list[Chunk]:
    """The chunks of ``bounds`` (consecutive ranges covering ``chunk``'s) cut from ``chunk``.

    Example:
        >>> import numpy as np
        >>> from thresher.loader.chunk import Chunk
        >>> from thresher.loader.producers.coalescing import split_chunk
        >>> whole = Chunk(0, 6, np.array([0, 1, 4, 5]), ["a", "b", "e", "f"])
        >>> [(c.start, c.stop, c.elements) for c in split_chunk(whole, [(0, 3), (3, 6)])]
        [(0, 3, ['a', 'b']), (3, 6, ['e', 'f'])]
    """
    if len(bounds) == 1:
        return [chunk]
    positions = chunk.positions
    cuts = np.searchsorted(positions, [lo for lo, _ in bounds[1:]]).tolist()
    edges = [0, *cuts, len(chunk.elements)]
    dropped = chunk.dropped
    out = []
    for (lo, hi), a, b in zip(bounds, edges, edges[1:], strict=False):
        mine = None if dropped is None else [d for d in dropped if lo <= d.position < hi] or None
        out.append(Chunk(lo, hi, positions[a:b], chunk.elements[a:b], dropped=mine))
    out[0].marks = chunk.marks  # the stage times of the whole call are counted once
    return out


class CoalescingProducer(ChunkLoop):
    """Computes chunks like ``InProcessProducer`` (no read threads), several per call when cheap."""

    def __init__(self, processor: ChunkProcessor, start: int, stop: int | None, chunk_size: int,
                 stats: StatsRecorder | None = None) -> None:
        super().__init__(start, stop, chunk_size)
        self._processor = processor
        self._stats = stats
        self._k = 1  # chunks per call
        self._failed = False  # a coalesced call failed: one chunk per call from then on
        self._ready: deque[Chunk] = deque()  # the chunks from the index on, computed

    def _compute(self, index: int, bounds: tuple[int, int]) -> Chunk:
        if self._ready:
            return self._ready.popleft()
        every = [bounds]
        for j in range(1, self._k):
            b = self.bounds(index + j)
            if b is None:
                break
            every.append(b)
        began = time.monotonic_ns()
        if len(every) > 1:
            try:
                chunk = self._processor(every[0][0], every[-1][1])
            except Exception:  # computed again chunk by chunk: the error comes where it belongs
                self._failed, self._k = True, 1
                return self._compute(index, bounds)
        else:
            chunk = self._processor(*bounds)
        self._adapt((time.monotonic_ns() - began) / 1e9 / len(every), len(every))
        if self._stats is not None and chunk.marks is not None:
            self._stats.chunk(self._processor.stages, chunk.marks, index=index, start=every[0][0],
                              stop=every[-1][1])
        self._ready.extend(split_chunk(chunk, every))
        return self._ready.popleft()

    def _adapt(self, per_chunk_s: float, k: int) -> None:
        if self._failed:
            return
        if per_chunk_s < CHEAP_S and k == self._k:
            self._k = max(1, min(self._k * 2, MAX_CHUNKS, int(BUDGET_S / max(per_chunk_s, 1e-9))))
        elif per_chunk_s >= 2 * CHEAP_S:
            self._k = max(1, self._k // 2)

    def close(self) -> None:
        self._ready.clear()
