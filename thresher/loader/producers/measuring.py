"""MeasuringProducer: the first chunks measured here, then the producer they pick (``worker_count="auto"``).

Example:
    >>> import thresher as th
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 8), th.IndexSampler(8),
    ...                        [lambda x: x + 1, th.Batch(4)], worker_count="auto", chunk_size=4)
    >>> [b.tolist() for b in loader]
    [[1, 2, 3, 4], [5, 6, 7, 8]]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace

from thresher.loader.autotune import Probe, latency_bound, nbytes
from thresher.loader.chunk import Chunk, ChunkProcessor
from thresher.loader.producers.base import Producer, SwitchingLoop, chunk_bounds
from thresher.loader.producers.in_process import InProcessProducer
from thresher.loader.profiling.stats import StatsRecorder
from thresher.loader.read_ahead import ReadAhead
from thresher.loader.thread_probe import measure_pair

__all__ = ["MeasuringProducer"]


class MeasuringProducer(SwitchingLoop):
    """Computes the first chunks here, measuring them, then lets ``choose`` pick the producer
    of the rest (``worker_count="auto"``).

    It measures at least ``MIN_PROBES`` chunks (the first is often slow: files open,
    caches are cold), more while they are cheap, and passes the fastest one's
    ``Probe`` and the position of the rest to ``choose``, which returns the producer
    for the positions from there on (same chunk size, so the chunks are exactly those
    of one producer). The measured chunks are handed out as usual. A first chunk that
    takes ``LONG_S`` or more, or whose reads on threads mostly waited, is measurement enough.

    When ``wants_pair(probe)`` says so (the worker mode is to be chosen), the next two
    chunks are computed at once on two threads and their ``thread_speedup`` is added
    to the probe (see thresher.loader.thread_probe); they are handed out in order too.
    The pair's helper thread is watched with ``timeout_s`` (the loader's ``worker_timeout_s``).
    """

    MIN_PROBES, MAX_PROBES, CHEAP_S, LONG_S = 2, 4, 0.01, 0.2

    def __init__(self, processor: ChunkProcessor, start: int, stop: int | None, chunk_size: int,
                 stats: StatsRecorder | None, choose: Callable[[Probe, int], Producer],
                 reads: ReadAhead | None = None, wants_pair: Callable[[Probe], bool] | None = None,
                 timeout_s: float | None = None, keys: Callable[[int, int], list[int]] | None = None) -> None:
        super().__init__(start, stop, chunk_size)
        self._probe = InProcessProducer(processor, start, stop, chunk_size, stats, reads)
        self._processor, self._stats = processor, stats
        self._choose = choose
        self._wants_pair = wants_pair
        self._timeout_s, self._keys = timeout_s, keys  # the watchdog of the pair's helper thread
        self._probes: list[Probe] = []
        self._ready: deque[Chunk | BaseException] = deque()  # the pair's chunks, not yet handed out

    def _here(self, index: int, bounds: tuple[int, int]) -> Chunk | None:
        if self._ready:
            ready = self._ready.popleft()
            if isinstance(ready, BaseException):
                raise ready
            return ready
        chunk = self._probe.next_chunk()
        if chunk is None:
            return None
        marks = chunk.marks
        reads = self._probe.reads
        left = None if self.stop is None else -(-(self.stop - chunk.stop) // self.chunk_size)
        self._probes.append(Probe((marks[-1] - marks[0]) / 1e9 if marks else 0.0, nbytes(chunk.elements),
                                  chunk.stop - chunk.start, left, reads.read_wall_ns / 1e9,
                                  reads.read_cpu_ns / 1e9, reads.threads,
                                  (marks[-1] - marks[2]) / 1e9 if marks and len(marks) > 2 else 0.0))
        n, total = len(self._probes), sum(p.chunk_s for p in self._probes)
        last = self.stop is not None and chunk.stop >= self.stop
        first = self._probes[0]
        if (last or n >= self.MAX_PROBES or (n >= self.MIN_PROBES and total >= self.CHEAP_S)
                or first.chunk_s >= self.LONG_S or (first.read_threads > 0 and latency_bound(first))):
            fastest = replace(min(self._probes, key=lambda p: p.chunk_s), chunks_left=left)
            self._probe.close()
            at, paired = chunk.stop, 0
            if not last and self._wants_pair is not None and self._wants_pair(fastest):
                fastest, at, paired = self._pair(fastest, index + 1, at, reads.threads, reads.timeout_s)
            self.hand_over(self._choose(fastest, at), index + 1 + paired)
        return chunk

    def _pair(self, probe: Probe, index: int, at: int, read_threads: int,
              timeout_s: float | None) -> tuple[Probe, int, int]:
        """Computes chunks ``index`` and ``index + 1`` (from position ``at``) at once on two threads:
        the probe with their speedup, the position after them and the chunks computed (2, or 0
        when too little is left to measure)."""
        first = chunk_bounds(at, self.stop, self.chunk_size, 0)
        second = chunk_bounds(at, self.stop, self.chunk_size, 1)
        if first is None or second is None or second[1] - second[0] < self.chunk_size:
            return probe, at, 0  # too little left to measure: the mode is chosen without it
        chunks, seconds = measure_pair(self._processor, first, second, read_threads, timeout_s, self._timeout_s,
                                       self._keys)
        for i, (c, bounds) in enumerate(zip(chunks, (first, second), strict=True)):
            if self._stats is not None and isinstance(c, Chunk) and c.marks is not None:
                self._stats.chunk(self._processor.stages, c.marks, index=index + i, start=bounds[0],
                                  stop=bounds[1])
            self._ready.append(c)
        left = None if probe.chunks_left is None else max(0, probe.chunks_left - 2)
        speedup = 2 * probe.chunk_s / seconds if seconds > 0 else 1.0
        return replace(probe, chunks_left=left, thread_speedup=speedup), second[1], 2

    def close(self) -> None:
        self._ready.clear()
        self._probe.close()
        if self._rest is not None:
            self._rest.close()
