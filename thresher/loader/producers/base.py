"""Producers hand the iterator processed chunks in position order.

Chunk i of a producer is positions ``chunk_bounds(start, stop, chunk_size, i)``; every
producer hands them out in the order i = 0, 1, 2, ... through one loop, ``ChunkLoop.next_chunk``,
and differs only in how it gets chunk i (``ChunkLoop._compute``): computed here when asked
(``InProcessProducer``), several at a time here (``CoalescingProducer``, coalesce.py), computed
ahead by worker threads (``ThreadPoolProducer``, pool/threads.py) or worker processes
(``WorkerPoolProducer``, pool/workers.py; both on the schedule of pool/schedule.py). Two more
switch between those: ``MeasuringProducer`` (``worker_count="auto"``: measures the first chunks
here, then hands over) and ``WarmStartProducer`` (warm_start.py: here until the worker
processes are up). Results are identical because each chunk is a pure function of its range.
Producers note each chunk's stage times in the iterator's StatsRecorder.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from thresher.loader.autotune import Probe, latency_bound, nbytes
from thresher.loader.chunk import Chunk, ChunkProcessor
from thresher.loader.profiling.stats import StatsRecorder
from thresher.loader.read_ahead import Pending, ReadAhead
from thresher.loader.thread_probe import measure_pair

__all__ = ["ChunkLoop", "InProcessProducer", "MeasuringProducer", "Producer", "chunk_bounds"]


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


class MeasuringProducer:
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
        self._probe = InProcessProducer(processor, start, stop, chunk_size, stats, reads)
        self._processor, self._stats = processor, stats
        self._start, self._stop, self._chunk_size = start, stop, chunk_size
        self._choose = choose
        self._wants_pair = wants_pair
        self._timeout_s, self._keys = timeout_s, keys  # the watchdog of the pair's helper thread
        self._probes: list[Probe] = []
        self._ready: deque[Chunk | BaseException] = deque()  # the pair's chunks, not yet handed out
        self._index = 0  # chunks handed out
        self._rest: Producer | None = None

    @property
    def rest(self) -> Producer | None:
        """The producer chosen after measuring (None until then)."""
        return self._rest

    def next_chunk(self) -> Chunk | None:
        if self._ready:
            ready = self._ready.popleft()
            if isinstance(ready, BaseException):
                raise ready
            self._index += 1
            return ready
        if self._rest is not None:
            return self._rest.next_chunk()
        chunk = self._probe.next_chunk()
        if chunk is None:
            return None
        self._index += 1
        marks = chunk.marks
        reads = self._probe.reads
        left = None if self._stop is None else -(-(self._stop - chunk.stop) // self._chunk_size)
        self._probes.append(Probe((marks[-1] - marks[0]) / 1e9 if marks else 0.0, nbytes(chunk.elements),
                                  chunk.stop - chunk.start, left, reads.read_wall_ns / 1e9,
                                  reads.read_cpu_ns / 1e9, reads.threads,
                                  (marks[-1] - marks[2]) / 1e9 if marks and len(marks) > 2 else 0.0))
        n, total = len(self._probes), sum(p.chunk_s for p in self._probes)
        last = self._stop is not None and chunk.stop >= self._stop
        first = self._probes[0]
        if (last or n >= self.MAX_PROBES or (n >= self.MIN_PROBES and total >= self.CHEAP_S)
                or first.chunk_s >= self.LONG_S or (first.read_threads > 0 and latency_bound(first))):
            fastest = replace(min(self._probes, key=lambda p: p.chunk_s), chunks_left=left)
            self._probe.close()
            at = chunk.stop
            if not last and self._wants_pair is not None and self._wants_pair(fastest):
                fastest, at = self._pair(fastest, at, reads.threads, reads.timeout_s)
            self._rest = self._choose(fastest, at)
        return chunk

    def _pair(self, probe: Probe, at: int, read_threads: int, timeout_s: float | None) -> tuple[Probe, int]:
        """Computes the two chunks from ``at`` at once on two threads: the probe with their speedup."""
        first = chunk_bounds(at, self._stop, self._chunk_size, 0)
        second = chunk_bounds(at, self._stop, self._chunk_size, 1)
        if first is None or second is None or second[1] - second[0] < self._chunk_size:
            return probe, at  # too little left to measure: the mode is chosen without it
        chunks, seconds = measure_pair(self._processor, first, second, read_threads, timeout_s, self._timeout_s,
                                       self._keys)
        for i, (c, bounds) in enumerate(zip(chunks, (first, second), strict=True)):
            if self._stats is not None and isinstance(c, Chunk) and c.marks is not None:
                self._stats.chunk(self._processor.stages, c.marks, index=self._index + i, start=bounds[0],
                                  stop=bounds[1])
            self._ready.append(c)
        left = None if probe.chunks_left is None else max(0, probe.chunks_left - 2)
        speedup = 2 * probe.chunk_s / seconds if seconds > 0 else 1.0
        return replace(probe, chunks_left=left, thread_speedup=speedup), second[1]

    def close(self) -> None:
        self._ready.clear()
        self._probe.close()
        if self._rest is not None:
            self._rest.close()
