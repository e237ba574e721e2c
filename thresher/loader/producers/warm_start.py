"""WarmStartProducer: chunks computed here while the worker processes start, then by them.

The warm start (``warm_start=True``) is described in thresher.loader.warm_start, which also
starts the fork server early (``begin``) and says when it is ready (``is_ready``); this
module is its producer, a ``SwitchingLoop`` that hands the chunks after the switch to the
worker pool.
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
from thresher.loader.producers.base import SwitchingLoop
from thresher.loader.producers.in_process import InProcessProducer
from thresher.loader.profiling.stats import StatsRecorder
from thresher.loader.warm_start import begin, is_ready

__all__ = ["Deferred", "WarmStartProducer"]


class Deferred(Protocol):
    """A worker pool whose workers start at once and take chunks only from ``begin(position)``."""

    def workers_ready(self) -> bool: ...

    def begin(self, start: int) -> None: ...

    def next_chunk(self) -> Chunk | None: ...

    def close(self) -> None: ...


class WarmStartProducer(SwitchingLoop):
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
        ready: whether the fork server is ready (default: ``thresher.loader.warm_start.is_ready``).
        timeout_s: seconds a chunk computed here may take before a WorkerStuckError (None:
            no limit), as the watchdog allows a worker's chunk.
        heavy_s, poll_s: see above.

    Example:
        >>> import thresher as th
        >>> from thresher.loader.chunk import ChunkProcessor
        >>> from thresher.loader.producers.in_process import InProcessProducer
        >>> from thresher.loader.producers.warm_start import WarmStartProducer
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
        super().__init__(start, stop, chunk_size)
        self._local = InProcessProducer(processor, start, stop, chunk_size, stats)
        self._processor, self._timeout_s = processor, timeout_s
        self._heavy_s, self._poll_s = heavy_s, poll_s
        self._make_pool = make_pool
        self._ready = ready
        self._begun = False  # the fork server has been asked to start
        self._pool: Deferred | None = None  # started, maybe not yet given chunks (``rest`` once it is)

    @property
    def local_chunks(self) -> int:
        """Chunks this process computed (for tests and stats)."""
        switch = self.switched_at
        return self._index if switch is None else min(self._index, switch)

    def _here(self, index: int, bounds: tuple[int, int]) -> Chunk | None:
        if index:  # after the first chunk: starting never slows a cheap first batch
            self._begin()
        self._advance()
        return self._watched(bounds)

    def _begin(self) -> None:
        if not self._begun:
            self._begun = True
            begin()

    def _advance(self) -> None:
        """Never waits: makes the pool once the fork server is ready, and hands it the chunks after
        the one computed here now (or next) once its workers are ready."""
        if self._rest is not None or not self._begun:
            return
        if self._pool is None:
            if not self._ready():
                return
            self._pool = self._make_pool(self.start)
        now = self._index  # the chunk computed here now (or next)
        if now and self._pool.workers_ready():  # never during the first chunk: it would compete with it
            after = self.bounds(now + 1)
            if after is not None:  # the workers take the chunks after this one, computed here
                self._pool.begin(after[0])
                self.hand_over(self._pool, now + 1)

    def _watched(self, bounds: tuple[int, int]) -> Chunk | None:
        """The next local chunk (positions ``bounds``), computed on a helper thread while this one watches the workers'
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
            watching = failed is None and self._rest is None
            step = (self._poll_s if self._begun else self._heavy_s) if watching else None
            if self._timeout_s is not None:
                left = max(0.0, self._timeout_s - (time.monotonic() - began))
                step = left if step is None else min(step, left)
            if done.wait(step):
                break
            waited = time.monotonic() - began
            if self._timeout_s is not None and waited >= self._timeout_s:
                raise self._stuck(thread, waited, bounds)
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

    def _stuck(self, thread: threading.Thread, waited: float, bounds: tuple[int, int]) -> WorkerStuckError:
        frame = sys._current_frames().get(thread.ident or -1)
        stack = None if frame is None else "".join(traceback.format_stack(frame))
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
