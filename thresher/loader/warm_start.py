"""Warm start: the first batches of a process come from the main process while the workers' fork server starts.

The first DataLoader with workers in a process starts the fork server: a fresh
interpreter that imports thresher (and jax, when the main process uses it) before it
can fork a single worker. In a process that has already imported jax and torch that
takes 0.3-1 s on an idle machine, and all of it used to be time to the first batch.

With ``DataLoader(..., warm_start=True)`` the fork server is started in a background
thread (:func:`begin`, called when the first workers are asked for), and until it can fork,
:class:`WarmStartProducer` computes chunks in the main process, exactly as ``worker_count=0``
would. At the first chunk boundary after the server is ready it hands the rest of the stream to a worker pool starting
there. Each chunk is a pure function of its positions, so the batches are the same as
with workers from the start, or with none. Later iterators (next epoch, set_state) find
the server running and start their workers directly.

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

import threading
from collections.abc import Callable

from thresher.loader.chunk import Chunk, ChunkProcessor
from thresher.loader.producer import InProcessProducer, Producer, chunk_bounds
from thresher.loader.profiling.stats import StatsRecorder

__all__ = ["WarmStartProducer", "begin", "is_ready", "wait"]

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


class WarmStartProducer:
    """Chunks computed here until the fork server is ready, then by ``make_pool(position)``.

    Args:
        processor, start, stop, chunk_size, stats: as for ``InProcessProducer``.
        make_pool: the worker pool producer for the positions from its argument on (the
            same chunk size, so the chunks are those of one producer).
        ready: whether to hand over now (default: the fork server is ready).

    Example:
        >>> import thresher as th
        >>> from thresher.loader.chunk import ChunkProcessor
        >>> from thresher.loader.producer import InProcessProducer
        >>> from thresher.loader.warm_start import WarmStartProducer
        >>> from thresher.transforms import plan_operations
        >>> proc = ChunkProcessor(th.sources.RangeDataSource(0, 6), th.IndexSampler(6), plan_operations([]))
        >>> p = WarmStartProducer(proc, 0, 6, 2, None, lambda at: InProcessProducer(proc, at, 6, 2))
        >>> [p.next_chunk().elements for _ in range(3)], p.next_chunk()
        ([[0, 1], [2, 3], [4, 5]], None)
    """

    def __init__(self, processor: ChunkProcessor, start: int, stop: int | None, chunk_size: int,
                 stats: StatsRecorder | None, make_pool: Callable[[int], Producer],
                 ready: Callable[[], bool] = is_ready) -> None:
        self._local = InProcessProducer(processor, start, stop, chunk_size, stats)
        self._start, self._stop, self._chunk_size = start, stop, chunk_size
        self._make_pool = make_pool
        self._ready = ready
        self._done = 0  # chunks computed here
        self._rest: Producer | None = None
        begin()

    @property
    def rest(self) -> Producer | None:
        """The worker pool producer, once it has taken over (None before)."""
        return self._rest

    def next_chunk(self) -> Chunk | None:
        if self._rest is None and self._ready():
            bounds = chunk_bounds(self._start, self._stop, self._chunk_size, self._done)
            if bounds is None:
                return None
            self._rest = self._make_pool(bounds[0])
        if self._rest is not None:
            return self._rest.next_chunk()
        chunk = self._local.next_chunk()
        if chunk is not None:
            self._done += 1
        return chunk

    def close(self) -> None:
        if self._rest is not None:
            self._rest.close()
