"""Producers hand the iterator processed chunks in position order.

Chunk i of a producer is positions ``chunk_bounds(start, stop, chunk_size, i)``; every
producer hands them out in the order i = 0, 1, 2, ... through one loop, ``ChunkLoop.next_chunk``
(this module), and differs only in how it gets chunk i (``ChunkLoop._compute``). The six
producers of this folder:

- ``InProcessProducer`` (in_process.py): computes chunk i here when asked (``worker_count=0``),
  with the reads of the next chunks in flight on read threads;
- ``CoalescingProducer`` (coalescing.py): computes cheap chunks several at a time here
  (``worker_count=0``, no read threads);
- ``ThreadPoolProducer`` (threads.py): computed ahead by worker threads
  (``worker_mode="thread"``);
- ``WorkerPoolProducer`` (processes.py): computed ahead by worker processes (both pools on the
  schedule of ``thresher.loader.pool.schedule``; the processes themselves live in ``pool/``);
- ``MeasuringProducer`` (measuring.py, ``worker_count="auto"``): measures the first chunks here,
  then hands the rest to the producer the measurement picks;
- ``WarmStartProducer`` (warm_start.py, ``warm_start=True``): computes chunks here until the
  worker processes are up, then hands the rest to them.

The last two switch producers on the same loop (``SwitchingLoop``): chunks before the switch
are theirs, the rest come from the producer they hand over to. Results are identical
because each chunk is a pure function of its range. Producers note each chunk's stage times in
the iterator's StatsRecorder.
"""

from __future__ import annotations

from typing import Any, Protocol

from thresher.loader.chunk import Chunk

__all__ = ["ChunkLoop", "Producer", "SwitchingLoop", "chunk_bounds"]


class Producer(Protocol):
    def next_chunk(self) -> Chunk | None: ...

    def close(self) -> None: ...


def chunk_bounds(start: int, stop: int | None, chunk_size: int, index: int) -> tuple[int, int] | None:
    """The range of the ``index``-th chunk of a stream starting at ``start``, or None past the end."""
    lo = start + index * chunk_size
    if stop is not None and lo >= stop:
        return None
    hi = lo + chunk_size
    return lo, hi if stop is None else min(hi, stop)


class ChunkLoop:
    """The loop every producer runs: chunk ``i`` is ``bounds(i)``, handed out for i = 0, 1, 2, ...
    until the end of the stream. A producer says how it gets chunk i (``_compute``) and, if it
    needs to, what follows handing it out (``_taken``: a pool hands out more work).

    Example:
        >>> class Squares(ChunkLoop):
        ...     def _compute(self, index, bounds):
        ...         return [p * p for p in range(*bounds)]
        >>> p = Squares(start=1, stop=6, chunk_size=2)
        >>> [p.next_chunk() for _ in range(4)]
        [[1, 4], [9, 16], [25], None]
    """

    def __init__(self, start: int, stop: int | None, chunk_size: int) -> None:
        self.start, self.stop, self.chunk_size = start, stop, chunk_size
        self._index = 0  # chunks handed out

    def bounds(self, index: int) -> tuple[int, int] | None:
        """The positions of chunk ``index``, or None past the end."""
        return chunk_bounds(self.start, self.stop, self.chunk_size, index)

    def next_chunk(self) -> Any:
        index = self._index
        bounds = self.bounds(index)
        if bounds is None:
            return None
        chunk = self._compute(index, bounds)
        if chunk is not None:
            self._index = index + 1
            self._taken(index, chunk)
        return chunk

    def _compute(self, index: int, bounds: tuple[int, int]) -> Any:
        """Chunk ``index`` (positions ``bounds``), or None when this producer has no more."""
        raise NotImplementedError

    def _taken(self, index: int, chunk: Any) -> None:
        """Runs after chunk ``index`` is handed out (nothing by default)."""


class SwitchingLoop(ChunkLoop):
    """A loop whose chunks up to a switch are computed by itself (``_here``), and the rest by
    another producer (``hand_over``): one that starts at the switch's position with the same
    chunk size and stop, so its chunks are this loop's from the switch on.

    Example:
        >>> class Squares(ChunkLoop):
        ...     def _compute(self, index, bounds):
        ...         return [p * p for p in range(*bounds)]
        >>> class FirstTwoHere(SwitchingLoop):
        ...     def _here(self, index, bounds):
        ...         if index == 1:
        ...             self.hand_over(Squares(self.bounds(2)[0], self.stop, self.chunk_size), 2)
        ...         return list(range(*bounds))
        >>> p = FirstTwoHere(start=0, stop=7, chunk_size=2)
        >>> [p.next_chunk() for _ in range(5)], p.switched_at
        ([[0, 1], [2, 3], [16, 25], [36], None], 2)
    """

    def __init__(self, start: int, stop: int | None, chunk_size: int) -> None:
        super().__init__(start, stop, chunk_size)
        self._rest: Producer | None = None
        self._switch: int | None = None  # the first chunk the rest hands out

    @property
    def rest(self) -> Producer | None:
        """The producer of the chunks after the switch (None before it is chosen)."""
        return self._rest

    @property
    def switched_at(self) -> int | None:
        """The first chunk the rest hands out (None before the switch is decided)."""
        return self._switch

    def hand_over(self, rest: Producer, index: int) -> None:
        """From chunk ``index`` on (not before the chunk in progress), ``rest`` hands out the chunks."""
        self._rest, self._switch = rest, index

    def _compute(self, index: int, bounds: tuple[int, int]) -> Any:
        if self._rest is not None and self._switch is not None and index >= self._switch:
            return self._rest.next_chunk()
        return self._here(index, bounds)

    def _here(self, index: int, bounds: tuple[int, int]) -> Any:
        """Chunk ``index`` (positions ``bounds``) before the switch."""
        raise NotImplementedError
