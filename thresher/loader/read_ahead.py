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
``timeout_s`` raise a ReadTimeoutError naming the keys, the option and the Python
stack of each thread still reading (``sys._current_frames``: where the read hangs).
``close`` cancels the reads not yet started; a read already running cannot be
interrupted, its thread ends when it returns.

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

import sys
import threading
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from thresher._validate import is_int
from thresher.errors import ReadTimeoutError
from thresher.loader.chunk import ChunkProcessor, Reading
from thresher.sources.protocol import BlockHintedSource

__all__ = ["Pending", "ReadAhead"]


class Pending:
    """A chunk whose reads were started: its Reading, the futures of its slices and the
    threads reading them (``threading.get_ident()`` of each slice's thread once it started)."""

    __slots__ = ("futures", "reading", "submitted", "threads")

    def __init__(self, reading: Reading, futures: list[Future[tuple[list[Any], int, int]]] | None,
                 submitted: int = 0) -> None:
        self.reading = reading
        self.futures = futures
        self.submitted = submitted
        self.threads: dict[int, int] = {}


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


def _few(keys: list[int]) -> str:
    return f"{keys[:8]}{'...' if len(keys) > 8 else ''}"


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
        self._windows_told: set[tuple[int, int]] = set()  # (epoch, window) pairs last told to the source
        self._prefetched: tuple[int, int] | None = None  # the (epoch, window) last asked to be prefetched

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="thresher-read")
        return self._executor

    def _read_slice(self, pending: Pending, slot: int, lo: int, hi: int) -> tuple[list[Any], int, int]:
        pending.threads[slot] = threading.get_ident()
        if slot == 0:
            self._tell_upcoming(pending.reading)
        cpu = time.thread_time_ns()
        records = self._processor.read(pending.reading, pending.reading.key_list[lo:hi])
        return records, time.thread_time_ns() - cpu, time.monotonic_ns()

    def _tell_upcoming(self, reading: Reading) -> None:
        """Passes a source that asks for it (``lookahead_records``, e.g. a byte-range
        ArrayRecordSource with a chunk cache) the record keys of the positions after
        ``reading``'s, just before they are read (on the read thread: the reads of a
        producer run in order, so these are the keys needed *after* this read): a hint for
        what its cache evicts; what is read never depends on it."""
        if not len(reading.positions):
            return
        start = int(reading.positions[-1]) + 1
        source = self._processor.source
        span = getattr(source, "lookahead_records", 0)
        if not is_int(span, minimum=1):
            return
        sampler = self._processor.sampler
        end = start + span if sampler.local_length is None else min(start + span, sampler.local_length)
        if end > start:
            source.upcoming(sampler.keys(sampler.to_global(np.arange(start, end, dtype=np.int64))))

    def _tell_blocks(self, reading: Reading) -> None:
        """Passes a source that takes it (``BlockHintedSource``) the blocks of the BlockShuffle
        windows that ``reading``'s positions lie in, once per window: its reader
        can then fetch whole blocks in few requests. A hint: what is read never depends on it."""
        sampler = self._processor.sampler
        source = self._processor.source
        if sampler.block_shuffle is None or not len(reading.globals_) or not isinstance(source, BlockHintedSource):
            return
        n = sampler.num_records
        g = np.asarray(reading.globals_, dtype=np.int64)
        # every window the positions lie in (a read longer than a window spans several), as one
        # code per (epoch, window): a 1-D unique is ten times cheaper than a unique of pairs
        per_epoch = n // sampler.block_shuffle.window_records + 1
        codes = np.unique((g // n) * per_epoch + (g % n) // sampler.block_shuffle.window_records)
        windows = {(c // per_epoch, c % per_epoch) for c in codes.tolist()}
        new = windows - self._windows_told
        if not new:
            return
        self._windows_told = windows
        blocks = [r for e, w in sorted(new) for r in sampler.epoch_order(e).window_blocks(w)]
        source.upcoming_blocks(np.array([a for a, _ in blocks], dtype=np.int64),
                               np.array([b for _, b in blocks], dtype=np.int64))
        self._prefetch_next(reading)

    def _prefetch_next(self, reading: Reading) -> None:
        """Passes a source that takes it (``prefetch_blocks``) the blocks of the window this
        process reads next: the one holding the position a window's length after ``reading``'s
        last (with shards, this process's next window), once per window. It can then fetch
        them while the current window is read."""
        source = self._processor.source
        prefetch = getattr(source, "prefetch_blocks", None)
        if prefetch is None or not len(reading.positions):
            return
        sampler = self._processor.sampler
        assert sampler.block_shuffle is not None
        ahead = int(reading.positions[-1]) + sampler.block_shuffle.window_records
        if sampler.local_length is not None and ahead >= sampler.local_length:
            return
        g = int(sampler.to_global(np.array([ahead], dtype=np.int64))[0])
        n = sampler.num_records
        window = (g // n, sampler.epoch_order(g // n).window_of(g % n))
        if window in self._windows_told or window == self._prefetched:
            return
        self._prefetched = window
        blocks = sampler.epoch_order(window[0]).window_blocks(window[1])
        prefetch(np.array([a for a, _ in blocks], dtype=np.int64), np.array([b for _, b in blocks], dtype=np.int64))

    def start(self, start: int, stop: int) -> Pending:
        """Samples positions [start, stop) and, with threads, starts reading them."""
        reading = self._processor.sample(np.arange(start, stop, dtype=np.int64))
        self._tell_blocks(reading)
        if self.threads == 0 or not reading.key_list:
            return Pending(reading, None)
        pool = self._pool()
        pending = Pending(reading, [], time.monotonic_ns())
        assert pending.futures is not None
        for slot, (lo, hi) in enumerate(_slices(len(reading.key_list), self.threads)):
            pending.futures.append(pool.submit(self._read_slice, pending, slot, lo, hi))
        return pending

    def finish(self, pending: Pending) -> Reading:
        """The chunk's Reading with its records, once read; marks: sample, then the wait."""
        reading = pending.reading
        waited = time.monotonic_ns()
        if pending.futures is None:
            cpu = time.thread_time_ns()
            if not self._processor.skip_errors:  # errors="skip" reads in transform, record by record
                self._tell_upcoming(reading)
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

    def _timed_out(self, reading: Reading, pending: Pending, late: set[Any]) -> ReadTimeoutError:
        assert pending.futures is not None
        bounds = _slices(len(reading.key_list), self.threads)
        frames = sys._current_frames()
        keys: list[int] = []
        stacks: list[str] = []
        for slot, (f, (lo, hi)) in enumerate(zip(pending.futures, bounds, strict=False)):
            if f not in late:
                continue
            slice_keys = reading.key_list[lo:hi]
            keys += slice_keys
            ident = pending.threads.get(slot)
            frame = None if ident is None else frames.get(ident)
            where = (f"keys {_few(slice_keys)} have not started: every read thread is busy" if frame is None else
                     f"thread reading keys {_few(slice_keys)}, most recent call last:\n"
                     + "".join(traceback.format_stack(frame)).rstrip())
            stacks.append(where)
        pos = reading.positions
        return ReadTimeoutError(
            f"reading record keys {_few(keys)} (of positions [{int(pos[0])}, {int(pos[-1]) + 1})) of "
            f"{self._processor.source!r} took longer than ReadOptions(timeout_s={self.timeout_s}): a read "
            "hangs (the storage does not answer). Fix the storage, or raise timeout_s if reads can take "
            "this long, then resume from the last state. Where the reads are:\n" + "\n".join(stacks),
            record_keys=keys, stacks=stacks)

    def close(self) -> None:
        """Cancels the reads not started; running ones end on their own (no wait here)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
