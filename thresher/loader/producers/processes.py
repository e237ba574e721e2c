"""WorkerPoolProducer: chunks computed ahead in worker processes, handed out in order.

Chunk c (a fixed range of positions, counted from where the iterator starts) is
computed by worker ``c mod W``, and the main process takes the chunks back in the
order c = 0, 1, 2, ...: each worker's results arrive in the order it computed them,
so chunk c is always the next message of worker ``c mod W``. Because a chunk is a
pure function of its range, the batches are bit-identical for every W.

Read-ahead is bounded: each worker has at most ``buffer_size`` chunks given to it and
not yet taken by the main process. When the main process takes chunk c it hands
chunk ``c + W * buffer_size`` to the same worker. The main process never waits for
a chunk that is ready: it reads the next in-order message as soon as it is there.
With ``buffer_size=None`` the read-ahead is sized by memory: 2 chunks per worker,
fewer when the first chunk shows that ``W * 2`` chunks would not fit the budget
(see autotune.read_ahead).

Each message carries the worker's stage times for its chunk; the producer adds them,
and its own waiting and transfer times, to the iterator's StatsRecorder.

Failure and shutdown: see thresher.loader.pool.workers, which runs the processes.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable

from thresher.errors import WorkerError
from thresher.loader.chunk import Chunk
from thresher.loader.pool.schedule import DEFAULT_BUFFER_SIZE, Schedule
from thresher.loader.pool.watchdog import DEFAULT_WORKER_TIMEOUT_S
from thresher.loader.pool.worker_main import WorkerSpec
from thresher.loader.pool.workers import WorkerProcesses
from thresher.loader.profiling.stats import TRANSFER, WAIT_WORKERS, StatsRecorder
from thresher.loader.read_options import ReadOptions

__all__ = ["WorkerPoolProducer"]


class WorkerPoolProducer(Schedule):
    """Hands out chunks in order, computed ahead by ``worker_count`` processes.

    Args:
        spec: the pickled pipeline (``make_worker_spec``).
        start, stop: the positions to produce (``stop=None``: forever).
        chunk_size: positions per chunk.
        worker_count: W; fewer are started when there are fewer chunks.
        buffer_size: chunks per worker computed ahead of the consumer (>= 1), or None
            to size the read-ahead by memory (see ``autotune.read_ahead``).
        stats: where to note the stage times (the iterator's StatsRecorder).
        memory_budget: bytes the read-ahead may use when ``buffer_size`` is None
            (default: ``autotune.memory_budget()``).
        reads: each worker's reads in flight (``num_threads`` resolved; None: inline).
        timeout_s: seconds a chunk may stay a worker's current work before a
            WorkerStuckError (None: wait forever; see watchdog).
        keys: the first record keys of positions [start, stop) (named by that error).
        deferred: start the workers but hand out nothing until ``begin(position)``
            (see ``workers_ready``; thresher.loader.producers.warm_start).

    Example:
        >>> import thresher as th
        >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10),
        ...                        [lambda x: x * x, th.Batch(4)], worker_count=2, chunk_size=4)
        >>> with iter(loader) as it:
        ...     [b.tolist() for b in it]
        [[0, 1, 4, 9], [16, 25, 36, 49], [64, 81]]
    """

    def __init__(self, spec: WorkerSpec, start: int, stop: int | None, chunk_size: int,
                 worker_count: int, buffer_size: int | None = DEFAULT_BUFFER_SIZE,
                 stats: StatsRecorder | None = None, memory_budget: int | None = None,
                 reads: ReadOptions | None = None, timeout_s: float | None = DEFAULT_WORKER_TIMEOUT_S,
                 keys: Callable[[int, int], list[int]] | None = None, deferred: bool = False) -> None:
        super().__init__(start, stop, chunk_size, worker_count, buffer_size, memory_budget)
        self._spec = spec
        self._handed = 0  # chunks handed out so far
        self._stats = stats
        self._pool: WorkerProcesses | None = None
        self._finalizer: weakref.finalize | None = None
        if self.count == 0:
            return
        pool = self._pool = WorkerProcesses(spec, self.count, worker_count, reads, timeout_s, keys)
        # The finalizer holds the pool, never the producer: dropping the iterator stops the workers.
        self._finalizer = weakref.finalize(self, pool.shutdown)
        self._begun = not deferred
        if self._begun:
            self._hand_out()

    def workers_ready(self) -> bool:
        """Whether every worker has loaded the pipeline (a deferred pool: before ``begin``); never waits."""
        return self._pool is None or self._pool.poll_ready()

    def begin(self, start: int) -> None:
        """Hands out the chunks from position ``start`` on (a deferred pool, once)."""
        if self._begun:
            raise ValueError("this worker pool has begun already")
        self._begun, self.start = True, start
        self._hand_out()

    def _hand_out(self) -> None:
        """Hands out chunks until ``ahead`` of them are out and not taken back."""
        pool = self._pool
        while pool is not None and self._handed < self._index + self.ahead:
            bounds = self.bounds(self._handed)
            if bounds is None:
                return
            pool.send(self.worker_of(self._handed), (self._handed, *bounds))
            self._handed += 1

    def _compute(self, index: int, bounds: tuple[int, int]) -> Chunk | None:
        if self._pool is None:
            return None
        if not self._begun:
            self.begin(self.start)
        if self._pool.closed:
            raise WorkerError("the worker pool is closed")
        w = self.worker_of(index)
        asked = time.monotonic_ns()
        self._pool.send_released()  # the batches dropped since the last chunk (the caller's previous one)
        chunk, marks, there, nbytes = self._pool.receive(w, index, bounds)
        stats = self._stats
        if stats is not None:
            done = time.monotonic_ns()
            stats.stage(WAIT_WORKERS, asked, there)
            stats.stage(TRANSFER, there, done)
            if len(marks) == len(self._spec.stages) + 1:
                stats.chunk(self._spec.stages, marks, w, self._pool.pids[w], index, bounds[0], bounds[1])
        if index == 0:
            self.first_chunk_holds(nbytes)
        return chunk

    def _taken(self, index: int, chunk: Chunk) -> None:
        self._hand_out()

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids (for monitoring and tests)."""
        return [] if self._pool is None else list(self._pool.pids)

    def close(self) -> None:
        """Stops the workers; safe to call more than once."""
        if self._finalizer is not None:
            self._finalizer()
