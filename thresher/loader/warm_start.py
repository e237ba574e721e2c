"""Warm start: the first batches of an iterator come from this process while its workers start.

Starting worker processes takes time: the first DataLoader with workers in a process
starts the fork server, a fresh interpreter that imports thresher (and jax, when the
main process uses it) before it can fork a single worker (0.3-1 s in a process that has
imported jax and torch, on an idle machine), and every iterator (a new epoch, a
``set_state``) then forks its workers, which load the pipeline before their first chunk.

With ``warm_start=True`` none of that is time to the first batch: ``WarmStartProducer``
(thresher.loader.producers.warm_start) computes the first chunk in this process, exactly as
``worker_count=0`` would; when the next one is asked for it starts the fork server in a
background thread (:func:`begin`; a heavy first chunk starts it sooner), and the workers
(deferred) as soon as it can fork, and computes chunks here until every worker of the new
pool has loaded the pipeline. The pool then takes the stream from the chunk after the one
this process computes last: it watches the start-up while it computes, so the workers
begin as soon as they are ready, not when a heavy chunk here ends. Each
chunk is a pure function of its positions, so the batches are the same as with workers
from the start, or with none.

This module starts the fork server early (:func:`begin`, :func:`start_early`) and says
when it is ready (:func:`is_ready`, :func:`wait`). Process-wide registry: one readiness
event (and the thread that sets it) per interpreter, like the fork server it tracks.

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

__all__ = ["begin", "is_ready", "start_early", "wait"]

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
