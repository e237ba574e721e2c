"""The schedule both worker pools keep: which worker computes which chunk, and how far ahead.

Chunk c (a fixed range of positions counted from where the iterator starts) is
computed by worker ``c mod W``; at most ``W * buffer_size`` chunks are computed and
not yet taken by the consumer. With ``buffer_size=None`` the buffer is 2 per worker,
fewer when the first chunk shows that would not fit the memory budget
(``autotune.read_ahead``). Worker processes (``workers``) and worker threads
(``threads``) differ only in how a chunk travels back.

Example:
    >>> from thresher.loader.pool.schedule import Schedule
    >>> s = Schedule(start=0, stop=10, chunk_size=4, worker_count=8, buffer_size=None)
    >>> s.worker_count, s.buffer_size, s.bounds(2), s.worker_of(2)
    (3, 2, (8, 10), 2)
"""

from __future__ import annotations

from thresher._validate import is_int
from thresher.errors import ConfigError
from thresher.loader.autotune import read_ahead
from thresher.loader.producers.base import ChunkLoop

__all__ = ["DEFAULT_BUFFER_SIZE", "Schedule"]

DEFAULT_BUFFER_SIZE = 2


class Schedule(ChunkLoop):
    """Chunk ranges, their workers and the read-ahead of a pool (fewer workers than chunks never)."""

    def __init__(self, start: int, stop: int | None, chunk_size: int, worker_count: int,
                 buffer_size: int | None = DEFAULT_BUFFER_SIZE, memory_budget: int | None = None) -> None:
        if not is_int(worker_count, minimum=1) or (buffer_size is not None and not is_int(buffer_size, minimum=1)):
            raise ConfigError(f"need worker_count >= 1 and buffer_size >= 1, got {worker_count}, {buffer_size}")
        super().__init__(start, stop, chunk_size)
        chunks = None if stop is None else max(0, -(-(stop - start) // chunk_size))
        self.count = worker_count if chunks is None else min(worker_count, chunks)
        self.asked = worker_count
        self._sized_by_memory = buffer_size is None
        self._memory_budget = memory_budget
        self.buffer = DEFAULT_BUFFER_SIZE if buffer_size is None else buffer_size

    @property
    def ahead(self) -> int:
        """Chunks that may be out (computed or being computed) and not yet taken."""
        return self.count * self.buffer

    def worker_of(self, index: int) -> int:
        return index % self.count

    def first_chunk_holds(self, nbytes: int) -> None:
        """Sizes the buffer by memory from the first chunk's bytes (when ``buffer_size`` was None)."""
        if self._sized_by_memory:
            self.buffer = read_ahead(nbytes, self.count, self._memory_budget, DEFAULT_BUFFER_SIZE)

    @property
    def buffer_size(self) -> int:
        """Chunks per worker computed ahead (after sizing by memory, when that was asked for)."""
        return self.buffer

    @property
    def worker_count(self) -> int:
        """The workers started (fewer than asked when the stream has fewer chunks)."""
        return self.count
