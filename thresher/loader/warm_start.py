"""Warm start: the first batches of an iterator come from this process while its workers start.

Starting worker processes takes time: the first DataLoader with workers in a process
starts the fork server, a fresh interpreter that imports thresher (and jax, when the
main process uses it) before it can fork a single worker (0.3-1 s in a process that has
imported jax and torch, on an idle machine), and every iterator (a new epoch, a
``set_state``) then forks its workers, which load the pipeline before their first chunk.

With ``warm_start=True`` (the default) none of that is time to the first batch:
:class:`WarmStartProducer` computes the first chunk in this process, exactly as
``worker_count=0`` would; when the next one is asked for it starts the fork server in a
background thread (:func:`begin`; a heavy first chunk starts it sooner), and the workers
(deferred) as soon as it can fork, and computes chunks here until every worker of the new
pool has loaded the pipeline. The pool then takes the stream from the chunk after the one
this process computes last: it watches the start-up while it computes, so the workers
begin as soon as they are ready, not when a heavy chunk here ends. Each
chunk is a pure function of its positions, so the batches are the same as with workers
from the start, or with none.

Process-wide registry: one readiness event (and the thread that sets it) per
interpreter, like the fork server it tracks.

Example:
    >>> import thresher as th
    >>> from thresher.loader import warm_start
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 12), th.IndexSampler(12),
    ...                        [lambda x: x * 2, th.Batch(4)], worker_count=2, chunk_size=4,
    ...                        warm_start=True)
    >>> [b.tolist() for b in loader]
    [[0, 2, 4, 6], [8, 10, 12, 14], [16, 18, 20, 22]]
    >>> _ = warm_start.wait(60.0)
    >>> warm_start.is_ready()
    True
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Protocol

import numpy as np

from thresher.errors import WorkerStuckError
from thresher.loader.chunk import Chunk, ChunkProcessor
from thresher.loader.producer import InProcessProducer, chunk_bounds
from thresher.loader.profiling.stats import StatsRecorder

__all__ = ["Deferred", "WarmStartProducer", "begin", "is_ready", "start_early", "wait"]

_lock = threading.Lock()
_ready = threading.Event()
_thread: threading.Thread | None = None


def _probe() -> None:
    """Runs in a process forked by the server: it exists only to prove the server forks."""


def _start_server() -> None:
    from thresher.loader.pool.worker_start import context, prestart

    try:
        prestart()
        # The server answers its first request only once its preloads are imported:
        # one no-op process makes the wait happen here, not in the first worker start.
        proc = context().Process(target=_probe, name="thresher-warm-start", daemon=True)
        proc.start()
        proc.join(60.0)
        if proc.exitcode is not None:
            proc.close()  # its descriptors now, not at garbage collection
    except BaseException:  # the worker pool will meet (and report) the same failure
        pass
    finally:
        _ready.set()


def begin() -> None:
    """Starts the fork server in a background thread (once per process); returns at once.

    Example:
        >>> from thresher.loader import warm_start
        >>> warm_start.begin()
        >>> warm_start.wait(60.0)
        True
    """
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_start_server, name="thresher-warm-start", daemon=True)
            _thread.start()


def start_early() -> bool:
    """Starts the fork server in the background now if worker processes can start here; returns at once.

    A DataLoader with worker processes calls it when it is constructed, so that the fork
    server (a fresh interpreter that imports thresher, and what the script imports at its
    top level) starts while the user builds and compiles the model, not at the first
    ``next()``. Nothing runs a user operation: the server only imports modules. Not in a
    worker process, nor where workers could not start (a script without the ``__main__``
    guard, one read from standard input: the first iteration says why), nor without a
    fork server (``spawn``). Returns whether it was started (or already was).

    Example:
        >>> from thresher.loader import warm_start
        >>> warm_start.start_early()
        True
    """
    import multiprocessing

    from thresher.loader.main_module import guard_error, unimportable_main
    from thresher.loader.pool.worker_start import start_method

    if (start_method() != "forkserver" or multiprocessing.parent_process() is not None
            or unimportable_main() is not None or guard_error() is not None):
        return False
    begin()
    return True


def is_ready() -> bool:
    """Whether workers can be started without waiting for the fork server.

    Example:
        >>> from thresher.loader import warm_start
        >>> isinstance(warm_start.is_ready(), bool)
        True
    """
    return _ready.is_set()


def wait(timeout: float | None = None) -> bool:
    """Waits until the fork server is ready (after :func:`begin`); returns :func:`is_ready`.

    Example:
        >>> from thresher.loader import warm_start
        >>> warm_start.begin()
        >>> warm_start.wait(60.0)
        True
    """
    begin()
    return _ready.wait(timeout)


class Deferred(Protocol):
    """A worker pool whose workers start at once and take chunks only from ``begin(position)``."""

    def workers_ready(self) -> bool: ...

    def begin(self, start: int) -> None: ...

    def next_chunk(self) -> Chunk | None: ...

    def close(self) -> None: ...


class WarmStartProducer:
    """Chunks computed here until the worker processes can take over, then by them.

    The first chunk, then every chunk until the fork server is ready and every worker
    of ``make_pool(position)`` (started deferred) has loaded the pipeline, is computed in
    this process, on a helper thread. The fork server starts when the second chunk is
    asked for, or ``heavy_s`` into the first one, whichever comes first: cheap chunks
    keep the first batch free of start-up work, heavy ones (a batch of JPEG decodes)
    overlap it. While a chunk is computed here this process keeps watching the start-up
    (every ``poll_s``): the pool is made as soon as the fork server is ready, and is
    given the chunks after the one in progress as soon as its workers are ready (from the
    second chunk on: workers computing alongside the first would slow the first batch), so
    they never wait for this process to finish a heavy chunk before they begin.

    Args:
        processor, start, stop, chunk_size, stats: as for ``InProcessProducer``.
        make_pool: the deferred worker pool (positions from its argument on; the same chunk
            size, so the chunks are those of one producer).
        ready: whether the fork server is ready (default: :func:`is_ready`).
        timeout_s: seconds a chunk computed here may take before a WorkerStuckError (None:
            no limit), as the watchdog allows a worker's chunk.
        heavy_s, poll_s: see above.

    Example:
        >>> import thresher as th
        >>> from thresher.loader.chunk import ChunkProcessor
        >>> from thresher.loader.producer import InProcessProducer
        >>> from thresher.loader.warm_start import WarmStartProducer
        >>> from thresher.transforms import plan_operations
        >>> proc = ChunkProcessor(th.sources.RangeDataSource(0, 6), th.IndexSampler(6), plan_operations([]))
        >>> class Pool(InProcessProducer):  # a stand-in that is ready at once
        ...     def workers_ready(self): return True
        ...     def begin(self, at): self.__init__(proc, at, 6, 2)
        >>> p = WarmStartProducer(proc, 0, 6, 2, None, lambda at: Pool(proc, at, 6, 2))
        >>> [p.next_chunk().elements for _ in range(3)], p.next_chunk()
        ([[0, 1], [2, 3], [4, 5]], None)
    """

    def __init__(self, processor: ChunkProcessor, start: int, stop: int | None, chunk_size: int,
                 stats: StatsRecorder | None, make_pool: Callable[[int], Deferred],
                 ready: Callable[[], bool] = is_ready, timeout_s: float | None = None,
                 heavy_s: float = 0.02, poll_s: float = 0.01) -> None:
        self._local = InProcessProducer(processor, start, stop, chunk_size, stats)
        self._processor, self._timeout_s = processor, timeout_s
        self._heavy_s, self._poll_s = heavy_s, poll_s
        self._start, self._stop, self._chunk_size = start, stop, chunk_size
        self._make_pool = make_pool
        self._ready = ready
        self._begun = False  # the fork server has been asked to start
        self._done = 0  # chunks computed here
        self._pool: Deferred | None = None  # started, maybe not yet given chunks
        self._handed = False  # the pool has been given the chunks after the local ones
        self.local_chunks = 0  # chunks this process computed (for tests and stats)

    @property
    def rest(self) -> Deferred | None:
        """The worker pool producer, once it has taken over (None before)."""
        return self._pool if self._handed else None

    def next_chunk(self) -> Chunk | None:
        if self._handed:
            assert self._pool is not None
            return self._pool.next_chunk()
        if self._done:  # after the first chunk: starting never slows a cheap first batch
            self._begin()
        self._advance()
        return self._local_chunk()

    def _begin(self) -> None:
        if not self._begun:
            self._begun = True
            begin()

    def _advance(self) -> None:
        """Never waits: makes the pool once the fork server is ready, and hands it the chunks after
        the one computed here now (or next) once its workers are ready."""
        if self._handed or not self._begun:
            return
        if self._pool is None:
            if not self._ready():
                return
            self._pool = self._make_pool(self._start)
        if self._done and self._pool.workers_ready():  # never during the first chunk: it would compete with it
            after = chunk_bounds(self._start, self._stop, self._chunk_size, self._done + 1)
            if after is not None:  # the workers take the chunks after this one, computed here
                self._pool.begin(after[0])
                self._handed = True

    def _local_chunk(self) -> Chunk | None:
        chunk = self._watched()
        if chunk is not None:
            self._done += 1
            self.local_chunks += 1
        return chunk

    def _watched(self) -> Chunk | None:
        """The next local chunk, computed on a helper thread while this one watches the workers'
        start-up (``_advance``) and the watchdog's limit: a chunk that takes longer than
        ``timeout_s`` is a WorkerStuckError, never a hang."""
        box: list[Chunk | BaseException | None] = []
        done = threading.Event()

        def work() -> None:
            try:
                box.append(self._local.next_chunk())
            except BaseException as e:
                box.append(e)
            finally:
                done.set()

        thread = threading.Thread(target=work, name="thresher-warm-start-chunk", daemon=True)
        began = time.monotonic()
        thread.start()
        failed: BaseException | None = None  # the pool's start-up error: after this chunk, as before it
        while True:
            watching = failed is None and not self._handed
            step = (self._poll_s if self._begun else self._heavy_s) if watching else None
            if self._timeout_s is not None:
                left = max(0.0, self._timeout_s - (time.monotonic() - began))
                step = left if step is None else min(step, left)
            if done.wait(step):
                break
            waited = time.monotonic() - began
            if self._timeout_s is not None and waited >= self._timeout_s:
                raise self._stuck(thread, waited)
            if watching:
                if waited >= self._heavy_s:
                    self._begin()
                try:
                    self._advance()
                except Exception as e:
                    failed = e
        if failed is not None:
            raise failed
        result = box[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _stuck(self, thread: threading.Thread, waited: float) -> WorkerStuckError:
        frame = sys._current_frames().get(thread.ident or -1)
        stack = None if frame is None else "".join(traceback.format_stack(frame))
        bounds = chunk_bounds(self._start, self._stop, self._chunk_size, self._done) or (self._start, self._start)
        sampler = self._processor.sampler
        keys = sampler.keys(sampler.to_global(np.arange(bounds[0], min(bounds[1], bounds[0] + 8))))
        return WorkerStuckError(
            f"the warm start's chunk of positions [{bounds[0]}, {bounds[1]}) (record keys {keys.tolist()}"
            f"{'...' if bounds[1] - bounds[0] > 8 else ''}), computed in this process while the workers "
            f"start, took {waited:.1f} s, longer than worker_timeout_s={self._timeout_s:g}: it is stuck (a "
            "read that never returns, a deadlock); its thread is left behind and the iterator is closed. Fix "
            "the cause (or raise worker_timeout_s), then resume from the last get_state(). Its Python stack "
            f"(most recent call last):\n{stack}",
            pid=os.getpid(), positions=bounds, record_keys=keys.tolist(), stuck_s=waited, stack=stack)

    def close(self) -> None:
        self._local.close()
        if self._pool is not None:
            self._pool.close()
