"""Producers hand the iterator processed chunks in position order.

The in-process producer computes each chunk when asked. The worker pool (another
producer with the same interface) computes chunk c in worker ``c mod W`` ahead of
time; results are identical because each chunk is a pure function of its range.
"""

from __future__ import annotations

from typing import Protocol

from thresher.loader.chunk import Chunk, ChunkProcessor

__all__ = ["Producer", "InProcessProducer", "chunk_bounds"]


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


class InProcessProducer:
    """Computes chunks one by one in the calling thread (worker_count=0)."""

    def __init__(self, processor: ChunkProcessor, start: int, stop: int | None, chunk_size: int) -> None:
        self._processor = processor
        self._start, self._stop, self._chunk_size = start, stop, chunk_size
        self._index = 0

    def next_chunk(self) -> Chunk | None:
        bounds = chunk_bounds(self._start, self._stop, self._chunk_size, self._index)
        if bounds is None:
            return None
        self._index += 1
        return self._processor(*bounds)

    def close(self) -> None:
        pass
