"""InProcessProducer: chunks computed one by one in the calling thread (``worker_count=0``).

Example:
    >>> import thresher as th
    >>> from thresher.loader.chunk import ChunkProcessor
    >>> from thresher.loader.producers.in_process import InProcessProducer
    >>> from thresher.transforms import plan_operations
    >>> proc = ChunkProcessor(th.sources.RangeDataSource(0, 5), th.IndexSampler(5), plan_operations([]))
    >>> [c.elements for c in iter(InProcessProducer(proc, 0, 5, 2).next_chunk, None)]
    [[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

from collections import deque

from thresher.loader.chunk import Chunk, ChunkProcessor
from thresher.loader.producers.base import ChunkLoop
from thresher.loader.profiling.stats import StatsRecorder
from thresher.loader.read_ahead import Pending, ReadAhead

__all__ = ["InProcessProducer"]


class InProcessProducer(ChunkLoop):
    """Computes chunks one by one in the calling thread (worker_count=0).

    With ``reads`` (a ReadAhead with threads), the reads of the current chunk and of
    the next ``chunks_ahead`` chunks are in flight while a chunk is transformed.
    """

    def __init__(self, processor: ChunkProcessor, start: int, stop: int | None, chunk_size: int,
                 stats: StatsRecorder | None = None, reads: ReadAhead | None = None, chunks_ahead: int = 0) -> None:
        super().__init__(start, stop, chunk_size)
        self._processor = processor
        self._stats = stats
        self.reads = reads if reads is not None else ReadAhead(processor)
        self._ahead = chunks_ahead if self.reads.threads else 0
        self._pending: deque[Pending] = deque()
        self._started = 0  # chunks whose reads were started

    def _compute(self, index: int, bounds: tuple[int, int]) -> Chunk:
        reads = self.reads
        while self._started <= index + self._ahead:
            b = self.bounds(self._started)
            if b is None:
                break
            self._pending.append(reads.start(*b))
            self._started += 1
        chunk = self._processor.transform(reads.finish(self._pending.popleft()), *bounds)
        if self._stats is not None and chunk.marks is not None:
            self._stats.chunk(self._processor.stages, chunk.marks, index=index, start=bounds[0], stop=bounds[1])
        return chunk

    def close(self) -> None:
        self._pending.clear()
        self.reads.close()
