"""ThreadPoolProducer: chunks computed ahead in worker threads of this process, handed out in order.

The second worker pool behind the Engine (``worker_mode="thread"``). It keeps the
process pool's schedule exactly: chunk c (a fixed range of positions, counted from
where the iterator starts) is computed by thread ``c mod W`` with the same
:class:`~thresher.loader.chunk.ChunkProcessor` (a pure function of positions), and
the main thread takes the chunks back in the order c = 0, 1, 2, ...; so the batches
are bit-identical to process workers' and to ``worker_count=0``'s.

What differs is only how a chunk travels: nothing is pickled and nothing goes
through shared memory, the result is an object in this process. Each thread works
on its own shallow copy of the processor (its own per-record generator; the source,
the sampler and the operations are shared, so they must be safe to call from
several threads at once, as pure functions and thresher's sources are).

Read-ahead is bounded as in the process pool: a thread starts chunk c only while
``c < taken + W * buffer_size`` (``taken``: the chunks the main thread took back),
so at most ``W * buffer_size`` chunks are computed and not yet taken. With
``buffer_size=None`` it is 2 per thread, fewer when the first chunk shows that would
not fit the memory budget (see autotune.read_ahead).

Failure and shutdown: an exception in a thread is raised by the main thread when it
needs that chunk, as the same exception a worker process would give (a thresher
error of the same type naming the thread and the chunk's positions, anything else
with a note; see remote_errors.thread_exception). ``close()`` (also run by a
``weakref.finalize`` when the producer is garbage collected) tells the threads to
stop and joins them: a thread in the middle of a chunk ends when that chunk is done
(an operation cannot be interrupted), waited for up to ``JOIN_S``; threads are
daemonic, so one stuck in a read never keeps the interpreter alive.

The watchdog (``timeout_s``, the loader's ``worker_timeout_s``): each thread notes when
it begins a chunk; a chunk the main thread waits for that is not done ``timeout_s``
after its thread began it is a ``WorkerStuckError`` with that thread's stack
(thresher.loader.pool.watchdog). The thread cannot be stopped: it is marked stuck (never
joined, so ``close()`` does not wait for it), the pool is closed and unusable (every
later ``next_chunk`` raises), and the thread ends by itself if its call ever returns.
"""

from __future__ import annotations

import copy
import os
import threading
import time
import weakref
from collections.abc import Callable

from thresher.errors import WorkerError, WorkerStuckError
from thresher.loader.autotune import nbytes
from thresher.loader.chunk import Chunk, ChunkProcessor
from thresher.loader.pool.remote_errors import thread_exception
from thresher.loader.pool.schedule import DEFAULT_BUFFER_SIZE, Schedule
from thresher.loader.pool.stacking import stack_batches, stacks, worker_stages
from thresher.loader.pool.watchdog import thread_stack, thread_stuck_error
from thresher.loader.profiling.stats import WAIT_WORKERS, StatsRecorder
from thresher.loader.read_ahead import ReadAhead
from thresher.loader.read_options import ReadOptions

__all__ = ["DEFAULT_BUFFER_SIZE", "JOIN_S", "ThreadPoolProducer"]

JOIN_S = 5.0
"""How long ``close()`` waits in all for threads to finish the chunk they are computing."""
_POLL_S = 1.0  # how often a blocked wait wakes up to check on the threads


class _Shared:
    """What the worker threads and the main thread share, under one condition variable."""

    def __init__(self, ahead: int) -> None:
        self.cond = threading.Condition()
        self.taken = 0  # chunks the main thread took back
        self.ahead = ahead  # chunks that may be computed and not taken
        self.results: dict[int, tuple[Chunk, list[int], int] | BaseException] = {}
        self.stopping = False
        self.threads: list[threading.Thread] = []
        self.began: dict[int, tuple[int, float]] = {}  # thread -> (the chunk it computes, when it began it)
        self.stuck: set[int] = set()  # threads the watchdog gave up on: never joined

    def shutdown(self) -> None:
        """Stops the threads and joins them (bounded by ``JOIN_S``); idempotent."""
        with self.cond:
            self.stopping = True
            self.results.clear()  # the chunks computed ahead go now, not with the producer
            self.cond.notify_all()
        deadline = time.monotonic() + JOIN_S
        me = threading.current_thread()
        for w, t in enumerate(self.threads):
            if t is not me and w not in self.stuck:
                t.join(max(0.0, deadline - time.monotonic()))


def _work(shared: _Shared, w: int, processor: ChunkProcessor, schedule: Schedule, stack: bool,
          reads: ReadOptions | None) -> None:
    """Thread ``w``'s loop: chunks w, w + W, w + 2W, ... while the read-ahead allows."""
    threads = 0 if reads is None else reads.num_threads or 0
    ahead = ReadAhead(processor, threads, None if reads is None else reads.timeout_s) if threads else None
    tid = threading.get_native_id()
    c = w
    try:
        while True:
            with shared.cond:
                while not shared.stopping and c >= shared.taken + shared.ahead:
                    shared.cond.wait()
                if shared.stopping:
                    return
                shared.began[w] = (c, time.monotonic())
            bounds = schedule.bounds(c)
            if bounds is None:
                return
            result: tuple[Chunk, list[int], int] | BaseException
            try:
                if ahead is None:
                    chunk = processor(*bounds)
                else:
                    chunk = processor.transform(ahead.finish(ahead.start(*bounds)), *bounds)
                marks = chunk.marks if chunk.marks is not None else []
                chunk.marks = None
                if stack:
                    chunk = stack_batches(processor, chunk)
                    marks.append(time.monotonic_ns())
                result = (chunk, marks, tid)
            except BaseException as e:  # raised by the main thread when it needs this chunk
                result = e
            with shared.cond:
                if shared.stopping:
                    return
                shared.results[c] = result
                shared.cond.notify_all()
            if isinstance(result, BaseException):
                return
            c += schedule.count
    finally:
        if ahead is not None:
            ahead.close()


class ThreadPoolProducer(Schedule):
    """Hands out chunks in order, computed ahead by ``worker_count`` threads of this process.

    Args:
        processor: the pipeline's ChunkProcessor (shared; each thread copies it shallowly).
        start, stop: the positions to produce (``stop=None``: forever).
        chunk_size: positions per chunk.
        worker_count: W; fewer are started when there are fewer chunks.
        buffer_size: chunks per thread computed ahead of the consumer (>= 1), or None
            to size the read-ahead by memory (see ``autotune.read_ahead``).
        stats: where to note the stage times (the iterator's StatsRecorder).
        memory_budget: bytes the read-ahead may use when ``buffer_size`` is None.
        reads: each thread's reads in flight (``num_threads`` resolved; None: inline).
        timeout_s: the watchdog: seconds a thread may keep one chunk (None: no limit).
        keys: ``keys(start, stop)``, a chunk's first record keys (for the watchdog's message).

    Example:
        >>> import thresher as th
        >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10),
        ...                        [lambda x: x * x, th.Batch(4)], worker_count=2, chunk_size=4,
        ...                        worker_mode="thread")
        >>> with iter(loader) as it:
        ...     [b.tolist() for b in it]
        [[0, 1, 4, 9], [16, 25, 36, 49], [64, 81]]
    """

    def __init__(self, processor: ChunkProcessor, start: int, stop: int | None, chunk_size: int,
                 worker_count: int, buffer_size: int | None = DEFAULT_BUFFER_SIZE,
                 stats: StatsRecorder | None = None, memory_budget: int | None = None,
                 reads: ReadOptions | None = None, timeout_s: float | None = None,
                 keys: Callable[[int, int], list[int]] | None = None) -> None:
        super().__init__(start, stop, chunk_size, worker_count, buffer_size, memory_budget)
        self._stats = stats
        self._timeout_s, self._keys = timeout_s, keys
        self._stuck: WorkerStuckError | None = None  # the watchdog's error: the pool is unusable after it
        self._stack = stacks(processor.plan, chunk_size, excluded=processor.exclusions is not None)
        self._stages = worker_stages(processor.stages, self._stack, pack=False)
        self._shared = shared = _Shared(self.ahead)
        self._finalizer = weakref.finalize(self, shared.shutdown)  # holds the shared state, never self
        # The threads get a schedule of their own, never the producer: dropping the iterator stops them.
        schedule = Schedule(start, stop, chunk_size, max(1, self.count))
        for w in range(self.count):
            t = threading.Thread(target=_work, name=f"thresher-worker-thread-{w}", daemon=True,
                                 args=(shared, w, copy.copy(processor), schedule, self._stack, reads))
            shared.threads.append(t)
            t.start()

    def _where(self, w: int, bounds: tuple[int, int]) -> str:
        count = (f"{self.count}" if self.count == self.asked else
                 f"{self.count} (of worker_count={self.asked}: the stream has only {self.count} chunks)")
        return f"worker thread {w} of {count}, computing positions [{bounds[0]}, {bounds[1]})"

    def _compute(self, index: int, bounds: tuple[int, int]) -> Chunk | None:
        if self.count == 0:
            return None
        if self._stuck is not None:
            raise WorkerError(f"the worker threads are unusable: worker thread {self._stuck.worker} is stuck on "
                              f"positions {list(self._stuck.positions or ())} (the WorkerStuckError raised "
                              "before); resume from the last get_state()")
        shared = self._shared
        w = self.worker_of(index)
        asked = time.monotonic_ns()
        waiting = time.monotonic()
        stuck_s: float | None = None
        with shared.cond:
            while index not in shared.results:
                if shared.stopping:
                    raise WorkerError("the worker threads are stopped (the iterator was closed)")
                if not shared.threads[w].is_alive():
                    raise WorkerError(f"internal error: thresher {self._where(w, bounds)} ended without it")
                wait = _POLL_S
                if self._timeout_s is not None:
                    chunk_began = shared.began.get(w)
                    began = chunk_began[1] if chunk_began is not None and chunk_began[0] == index else waiting
                    held = time.monotonic() - began
                    if held >= self._timeout_s:
                        shared.stuck.add(w)
                        stuck_s = held
                        break
                    wait = min(wait, self._timeout_s - held)
                shared.cond.wait(wait)
            else:
                result = shared.results.pop(index)
        if stuck_s is not None:
            raise self._give_up(w, bounds, stuck_s)
        there = time.monotonic_ns()
        if isinstance(result, BaseException):
            self.close()
            raise thread_exception(result, self._where(w, bounds))
        chunk, marks, tid = result
        stats = self._stats
        if stats is not None:
            stats.stage(WAIT_WORKERS, asked, there)
            if len(marks) == len(self._stages) + 1:
                stats.chunk(self._stages, marks, w, os.getpid(), index, bounds[0], bounds[1], thread=tid)
        return chunk

    def _taken(self, index: int, chunk: Chunk) -> None:
        shared = self._shared
        with shared.cond:
            if index == 0:
                self.first_chunk_holds(nbytes(chunk.batches if chunk.batches is not None else chunk.elements))
                shared.ahead = self.ahead
            shared.taken = self._index
            shared.cond.notify_all()

    def _give_up(self, w: int, bounds: tuple[int, int], stuck_s: float) -> WorkerStuckError:
        """The watchdog's error for thread ``w`` (stuck on ``bounds``); closes the pool for good."""
        assert self._timeout_s is not None
        count = f"{self.count}" if self.count == self.asked else f"{self.count} (of worker_count={self.asked})"
        keys = self._keys(*bounds) if self._keys is not None else None
        self._stuck = thread_stuck_error(f"worker thread {w} of {count}", w, bounds, keys, stuck_s,
                                         self._timeout_s, thread_stack(self._shared.threads[w]))
        self.close()
        return self._stuck

    @property
    def threads(self) -> list[threading.Thread]:
        """The worker threads (for monitoring and tests)."""
        return list(self._shared.threads)

    @property
    def pids(self) -> list[int]:
        """No worker processes: always empty (the process pool's property, for code that checks)."""
        return []

    def close(self) -> None:
        """Stops and joins the threads; safe to call more than once."""
        self._finalizer()

    def __repr__(self) -> str:
        return f"ThreadPoolProducer(worker_count={self.count}, buffer_size={self.buffer})"

