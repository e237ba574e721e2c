"""ReadAhead: a producer's reads in flight, started before the chunk is transformed.

A producer (the in-process one, or the loop of a worker process) calls ``start`` for
the chunks it will need next and ``finish`` for the one it needs now. ``start``
samples the chunk's record keys and, with ``threads > 0``, cuts them into up to
``threads`` contiguous slices, each read on a thread by the source's ``read_many``
(so a source with ``__getitems__`` still gets batched calls). ``finish`` waits for
the slices and joins them in key order: the records, and so the batches, are the
same for any number of threads. With ``threads == 0`` nothing runs ahead: ``finish``
reads in the calling thread, as a plain ``ChunkProcessor`` call would.

Errors: the exception of a failing slice is raised by ``finish`` as it was raised
(with the note naming positions and keys); slices still waiting longer than
``timeout_s`` raise a SourceError naming the keys and the option. ``close`` cancels
the reads not yet started; a read already running cannot be interrupted, its thread
ends when it returns.

Example:
    >>> import thresher as th
    >>> from thresher.loader.chunk import ChunkProcessor
    >>> from thresher.loader.read_ahead import ReadAhead
    >>> from thresher.transforms import plan_operations
    >>> proc = ChunkProcessor([10, 11, 12, 13, 14, 15], th.IndexSampler(6), plan_operations([]))
    >>> ahead = ReadAhead(proc, threads=3)
    >>> pending = [ahead.start(0, 3), ahead.start(3, 6)]     # both chunks' reads now in flight
    >>> [proc.transform(ahead.finish(p)).elements for p in pending]
    [[10, 11, 12], [13, 14, 15]]
    >>> ahead.close()
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from thresher.errors import SourceError
from thresher.loader.chunk import ChunkProcessor, Reading

__all__ = ["Pending", "ReadAhead"]


class Pending:
    """A chunk whose reads were started: its Reading and the futures of its slices."""

    __slots__ = ("futures", "reading", "submitted")

    def __init__(self, reading: Reading, futures: list[Future[tuple[list[Any], int, int]]] | None,
                 submitted: int = 0) -> None:
        self.reading = reading
        self.futures = futures
        self.submitted = submitted


def _slices(n: int, parts: int) -> list[tuple[int, int]]:
    """Up to ``parts`` contiguous, nearly equal ranges covering [0, n) (none empty)."""
    parts = min(parts, n)
    if parts <= 0:
        return []
    q, r = divmod(n, parts)
    out, lo = [], 0
    for i in range(parts):
        hi = lo + q + (1 if i < r else 0)
        out.append((lo, hi))
        lo = hi
    return out


class ReadAhead:
    """Reads the chunks a producer will need on ``threads`` threads (0: inline, when needed).

    Attributes:
        read_wall_ns, read_cpu_ns: of the last finished chunk: the time its reads took
            from start to the last slice's end, and the CPU time they used (all threads).
    """

    def __init__(self, processor: ChunkProcessor, threads: int = 0, timeout_s: float | None = None) -> None:
        self._processor = processor
        self.threads = 0 if processor.skip_errors else threads  # errors="skip" reads record by record
        self.timeout_s = timeout_s
        self._executor: ThreadPoolExecutor | None = None
        self.read_wall_ns = 0
        self.read_cpu_ns = 0

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="thresher-read")
        return self._executor

    def _read_slice(self, reading: Reading, lo: int, hi: int) -> tuple[list[Any], int, int]:
        cpu = time.thread_time_ns()
        records = self._processor.read(reading, reading.key_list[lo:hi])
        return records, time.thread_time_ns() - cpu, time.monotonic_ns()

    def start(self, start: int, stop: int) -> Pending:
        """Samples positions [start, stop) and, with threads, starts reading them."""
        reading = self._processor.sample(np.arange(start, stop, dtype=np.int64))
        if self.threads == 0 or not reading.key_list:
            return Pending(reading, None)
        pool = self._pool()
        submitted = time.monotonic_ns()
        futures = [pool.submit(self._read_slice, reading, lo, hi)
                   for lo, hi in _slices(len(reading.key_list), self.threads)]
        return Pending(reading, futures, submitted)

    def finish(self, pending: Pending) -> Reading:
        """The chunk's Reading with its records, once read; marks: sample, then the wait."""
        reading = pending.reading
        waited = time.monotonic_ns()
        if pending.futures is None:
            cpu = time.thread_time_ns()
            if not self._processor.skip_errors:  # errors="skip" reads in transform, record by record
                reading.elements = self._processor.read(reading, reading.key_list)
            self.read_cpu_ns = time.thread_time_ns() - cpu
            ready = time.monotonic_ns()
            self.read_wall_ns = ready - waited
        else:
            _done, late = wait(pending.futures, timeout=self.timeout_s)
            if late:
                for f in pending.futures:
                    f.cancel()
                raise self._timed_out(reading, pending, late)
            elements: list[Any] = []
            cpu_ns, last = 0, pending.submitted
            for f in pending.futures:
                records, used, ended = f.result()  # a slice's exception is raised here, as it was raised
                elements.extend(records)
                cpu_ns += used
                last = max(last, ended)
            reading.elements = elements
            ready = time.monotonic_ns()
            self.read_cpu_ns, self.read_wall_ns = cpu_ns, last - pending.submitted
        sampled = reading.marks[1] - reading.marks[0]
        reading.marks[:] = [waited - sampled, waited, ready]  # the stats count the time waited for reads
        return reading

    def _timed_out(self, reading: Reading, pending: Pending, late: set[Any]) -> SourceError:
        assert pending.futures is not None
        bounds = _slices(len(reading.key_list), self.threads)
        keys = [k for f, (lo, hi) in zip(pending.futures, bounds, strict=False) if f in late
                for k in reading.key_list[lo:hi]]
        pos = reading.positions
        return SourceError(
            f"reading record keys {keys[:8]}{'...' if len(keys) > 8 else ''} (of positions "
            f"[{int(pos[0])}, {int(pos[-1]) + 1})) of {self._processor.source!r} took longer than "
            f"ReadOptions(timeout_s={self.timeout_s}): a read hangs (the storage does not answer). Fix the "
            "storage, or raise timeout_s if reads can take this long, then resume from the last state")

    def close(self) -> None:
        """Cancels the reads not started; running ones end on their own (no wait here)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
