"""Starting workers: the start method, the fork server, and the pickled pipeline.

Workers are started with the ``forkserver`` method (``spawn`` where there is none),
never with a bare ``fork``: forking a process that runs JAX's threads can deadlock.
The fork server is a small single-threaded process started once per interpreter
(in the background when the first DataLoader with worker processes is constructed, or
by ``prestart()``) with thresher's worker module preloaded (and jax when a pipeline
refers to it): thresher sets multiprocessing's forkserver preload list through its
public API; name modules of your own with ``preload_in_workers``. Workers (the first
iterator's, the next epoch's, a set_state's) are forked from it in milliseconds.

The main module is not run again in the server or the workers unless something looks
a name up in it (see main_preload): the pipeline is shipped by value, so a script's
``import torch`` and ``import jax`` cost no worker anything. Keep the training loop
under ``if __name__ == "__main__":`` all the same, as with any multiprocessing code
(without it the first iteration is an error).
"""

from __future__ import annotations

import io
import multiprocessing
import os
import sys
import types
from collections import ChainMap
from dataclasses import replace
from typing import Any

import cloudpickle

from thresher.errors import ConfigError
from thresher.loader.chunk import ChunkProcessor
from thresher.loader.pool.stacking import stacks, worker_stages
from thresher.loader.pool.worker_main import WorkerSpec

__all__ = ["context", "dumps", "make_worker_spec", "preload_in_workers", "preload_modules", "prestart",
           "start_method"]

_PRELOAD = "thresher.loader.pool.worker_main"
_MAIN_PRELOAD = "thresher.loader.pool.main_preload"  # the main module, imported once (see main_preload)


def start_method() -> str:
    """``forkserver`` where the platform has it (Linux, macOS), else ``spawn``.

    Example:
        >>> from thresher.loader.pool.worker_start import start_method
        >>> start_method() in ("forkserver", "spawn")
        True
    """
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def preload_modules() -> list[str]:
    """The modules the fork server imports before it forks workers.

    The main module (as multiprocessing does by default; run lazily, see main_preload),
    thresher's worker module, and the modules given to :func:`preload_in_workers` (jax
    among them when a pipeline shipped to workers refers to it: its import starts no
    thread, so the fork server stays safe to fork, and it would otherwise cost every
    worker about a second).

    Example:
        >>> from thresher.loader.pool.worker_start import preload_modules
        >>> preload_modules()[:3]
        ['__main__', 'thresher.loader.pool.main_preload', 'thresher.loader.pool.worker_main']
    """
    return ["__main__", _MAIN_PRELOAD, _PRELOAD, *_Preload.extra]


class _Preload:
    """Process-wide, like the fork server itself: the modules users asked to preload,
    and the list thresher last gave multiprocessing."""

    extra: list[str] = []  # noqa: RUF012 - a deliberate process-wide registry
    last: list[str] | None = None


def preload_in_workers(modules: list[str]) -> None:
    """Imports ``modules`` in the fork server, once, instead of in every worker.

    Call it before the first DataLoader with worker processes is constructed (it starts
    the fork server); only for modules
    whose import starts no threads. (thresher sets multiprocessing's forkserver
    preload list itself, so name your modules here rather than in
    ``multiprocessing.set_forkserver_preload``.)

    Example:
        >>> import thresher as th
        >>> th.loader.preload_in_workers(["json"])
        >>> "json" in th.loader.pool.worker_start.preload_modules()
        True
    """
    _Preload.extra += [m for m in modules if m not in _Preload.extra]


def context() -> Any:
    """The multiprocessing context workers start in (the fork server set up for them).

    Sets the fork server's preload list (``preload_modules()``) through
    multiprocessing's public ``set_forkserver_preload``, again only when the list
    changes (jax imported since, modules added).
    """
    ctx = multiprocessing.get_context(start_method())
    if start_method() == "forkserver":
        wanted = preload_modules()
        if wanted != _Preload.last:
            ctx.set_forkserver_preload(wanted)
            _Preload.last = wanted
    return ctx


def prestart() -> None:
    """Starts the fork server now, so that the first iterator's workers start sooner.

    The server imports thresher, and the main module (see main_preload), while the caller
    goes on (builds its model, ...).
    """
    context()
    if start_method() == "forkserver":
        from multiprocessing import forkserver

        from thresher.loader.pool import main_preload

        main = sys.modules.get("__main__")
        name = getattr(getattr(main, "__spec__", None), "name", None)
        path = getattr(main, "__file__", None)
        var, value = (main_preload.ENV_NAME, name) if name else (main_preload.ENV_PATH, path)
        if not isinstance(value, str) or os.environ.get(var) is not None:
            forkserver.ensure_running()
            return
        os.environ[var] = f"{os.getpid()}:{os.path.abspath(value) if var == main_preload.ENV_PATH else value}"
        try:  # the server, if it starts now, inherits it (and takes it out of its own environment)
            forkserver.ensure_running()
        finally:
            os.environ.pop(var, None)


_DYNAMIC = "<dynamic-code>"  # the file name cloudpickle gives the code it pickles by value


def _code_reduce(code: types.CodeType) -> Any:
    """cloudpickle's reduction of a code object, with the code's own file name kept.

    cloudpickle (>= 3.1) names every function it pickles by value (those of ``__main__``)
    ``<dynamic-code>``, so a worker's traceback could not say where the user's function
    is; with the real name it shows the file, the line and (read from the file) the source.
    """
    func, args = _CLOUDPICKLE_CODE(code)
    return func, tuple(code.co_filename if a == _DYNAMIC else a for a in args)


_CLOUDPICKLE_CODE = cloudpickle.Pickler.dispatch_table.get(types.CodeType)


class _Pickler(cloudpickle.Pickler):
    """cloudpickle, keeping the file names of the code it pickles by value (see ``_code_reduce``)."""

    if _CLOUDPICKLE_CODE is not None:
        dispatch_table = ChainMap({types.CodeType: _code_reduce}, cloudpickle.Pickler.dispatch_table)


def dumps(obj: Any) -> bytes:
    """``cloudpickle.dumps``, keeping the file names of functions pickled by value (``__main__``'s).

    Example:
        >>> import pickle
        >>> from thresher.loader.pool.worker_start import dumps
        >>> f = pickle.loads(dumps(lambda x: x + 1))
        >>> f(1), f.__code__.co_filename != "<dynamic-code>"
        (2, True)
    """
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(obj)
    return buffer.getvalue()


def _pickle_or_none(obj: Any) -> Exception | None:
    try:
        cloudpickle.dumps(obj)
    except Exception as e:
        return e
    return None


def _thresher_modules(payload: bytes) -> list[str]:
    """thresher's modules that the pickled pipeline names (its source's, its operations'):
    a worker imports them when it loads the pipeline, so the fork server imports them once
    for all (thresher's modules import no optional library and start no thread on import).
    Only modules this process has imported; a name that is part of a longer one costs nothing."""
    return sorted(m for m in list(sys.modules) if m.startswith("thresher.") and m.encode() in payload)


def _unpicklable_part(processor: ChunkProcessor) -> str:
    for op in processor.plan.record_ops:
        if _pickle_or_none(op.fn) is not None:
            return f"operation {op.index} {op.name}"
    batch = processor.plan.batch
    if batch is not None and _pickle_or_none(batch) is not None:
        return f"the {batch!r}"
    if _pickle_or_none(processor.source) is not None:
        return f"the data source {processor.source!r}"
    return f"the sampler {processor.sampler!r}"


def make_worker_spec(processor: ChunkProcessor, chunk_size: int) -> WorkerSpec:
    """Pickles the pipeline for the workers (once per DataLoader).

    Raises ConfigError naming the operation (or the source) that cannot be pickled.

    Example:
        >>> import threading, thresher as th
        >>> from thresher.loader.chunk import ChunkProcessor
        >>> from thresher.loader.pool.worker_start import make_worker_spec
        >>> from thresher.transforms import plan_operations
        >>> lock = threading.Lock()
        >>> def locked(x):
        ...     with lock:
        ...         return x
        >>> proc = ChunkProcessor(th.sources.RangeDataSource(0, 4), th.IndexSampler(4),
        ...                       plan_operations([lambda x: x + 1, locked]))
        >>> try:
        ...     make_worker_spec(proc, 64)
        ... except th.errors.ConfigError as e:
        ...     print(str(e).split(":")[0])
        operation 1 Map(locked) cannot be sent to worker processes
    """
    plan = processor.plan
    shipped = ChunkProcessor(processor.source, processor.sampler, replace(plan, batch_ops=()),
                             skip_errors=processor.skip_errors, exclusions=processor.exclusions)
    try:
        payload = dumps(shipped)
    except Exception as e:
        raise ConfigError(
            f"{_unpicklable_part(shipped)} cannot be sent to worker processes: "
            f"{type(e).__name__}: {e}. "
            "With worker_count > 0 the source and the operations before the Batch are pickled "
            "(with cloudpickle: lambdas and closures are fine) and sent to each worker. Create "
            "locks, open files, clients and the like lazily inside the operation, or use "
            "worker_count=0"
        ) from e
    if b"jax" in payload and "jax" in sys.modules:  # the workers will import it: once, in the fork server
        preload_in_workers(["jax"])
    preload_in_workers(_thresher_modules(payload))
    stack = stacks(plan, chunk_size, excluded=processor.exclusions is not None)
    return WorkerSpec(payload, stack, "[" + ", ".join(plan.descriptions) + "]",
                      worker_stages(processor.stages, stack))
