"""Carrying an exception from a worker (process or thread) to the main process, with its traceback.

The worker sends the exception and its cause (cloudpickled when they can be), their
type names and messages, and the formatted traceback text. The main process raises
an exception of the *same type* as worker_count=0 would have raised:

- a thresher error (TransformError, SourceNotFoundError, BatchError, ...) is rebuilt
  with the worker's name, pid and traceback appended to its message, its attributes
  (``record_key``, ``position``) kept and its cause (the user's original exception,
  e.g. a ValueError) chained as ``__cause__``;
- any other exception is re-raised as itself with a note (``add_note``) giving the
  worker and its traceback;
- an exception that cannot be pickled becomes a WorkerError that quotes it.

Example:
    >>> from thresher.loader.pool.remote_errors import describe_exception, rebuild_exception
    >>> try:
    ...     raise KeyError("k")
    ... except KeyError as e:
    ...     info = describe_exception(e)
    >>> err = rebuild_exception(info, "worker 0 of 2 (pid 1)")
    >>> type(err).__name__, "worker 0 of 2" in err.__notes__[0]
    ('KeyError', True)
"""

from __future__ import annotations

import pickle
import traceback
from typing import Any

from thresher.errors import ThresherError, WorkerError

__all__ = ["describe_exception", "rebuild_exception", "thread_exception"]


def _dumps(obj: object) -> bytes | None:
    try:
        import cloudpickle

        return cloudpickle.dumps(obj)
    except Exception:
        return None


def _loads(data: bytes | None) -> BaseException | None:
    if data is None:
        return None
    try:
        out = pickle.loads(data)
    except Exception:
        return None
    return out if isinstance(out, BaseException) else None


def describe_exception(e: BaseException) -> dict[str, Any]:
    """What the worker sends for an exception: picklable, plain data."""
    cause = e.__cause__ if e.__cause__ is not None else e.__context__
    return {
        "type": f"{type(e).__module__}.{type(e).__qualname__}",
        "message": str(e),
        "traceback": "".join(traceback.format_exception(type(e), e, e.__traceback__)),
        "exception": _dumps(e),
        "cause": None if cause is None else _dumps(cause),
    }


def rebuild_exception(info: dict[str, Any], where: str) -> BaseException:
    """The exception to raise in the main process for ``info`` from the worker ``where``.

    ``where`` names the worker, e.g. ``"worker 1 of 2 (pid 1234)"``.
    """
    tb = info["traceback"].rstrip()
    exc = _loads(info.get("exception"))
    if exc is not None:
        return _with_origin(exc, _loads(info.get("cause")), tb, where)
    err = WorkerError(f"thresher {where} raised {info['type']}: {info['message']} "
                      f"(the exception could not be sent to the main process as it is); "
                      f"the worker's traceback follows\n{tb}")
    err.worker_traceback = tb
    return err


def thread_exception(e: BaseException, where: str) -> BaseException:
    """The exception to raise in the main thread for ``e``, raised in the worker thread ``where``.

    The same as ``rebuild_exception`` gives for a worker process (no pickling: the
    exception is at hand): a thresher error of the same type naming ``where`` in its
    message, any other exception itself with a note.

    Example:
        >>> from thresher.errors import TransformError
        >>> from thresher.loader.pool.remote_errors import thread_exception
        >>> err = thread_exception(TransformError("bad record", position=3), "worker thread 0 of 2")
        >>> type(err).__name__, err.position, "worker thread 0 of 2" in str(err)
        ('TransformError', 3, True)
    """
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip()
    return _with_origin(e, e.__cause__ if e.__cause__ is not None else e.__context__, tb, where)


def _with_origin(exc: BaseException, cause: BaseException | None, tb: str, where: str) -> BaseException:
    """``exc`` (or a thresher error of its type) telling that it was raised in ``where``, with ``tb``."""
    if isinstance(exc, ThresherError):
        try:
            rebuilt = type(exc)(f"{exc}\n[raised in thresher {where}; the worker's traceback follows]\n{tb}")
        except Exception:
            rebuilt = None
        if rebuilt is not None:
            rebuilt.__dict__.update(exc.__dict__)
            rebuilt.worker_traceback = tb
            rebuilt.__cause__ = cause
            return rebuilt
    if cause is not None:
        exc.__cause__ = cause
    note = f"[raised in thresher {where}; the worker's traceback follows]\n{tb}"
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:  # Python 3.10
        exc.__notes__ = [note]  # type: ignore[attr-defined]
    return exc
