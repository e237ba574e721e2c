"""DevicePrefetchIterator: prepare the next batches in a background thread.

The thread takes batches from the wrapped iterator, applies ``transform`` (for
:func:`thresher.jax.global_batches`, the host-to-device copy) and keeps up to
``size`` of them ready, so copies overlap the train step. Beside each batch it keeps
the wrapped iterator's state taken right after that batch; ``get_state()`` returns
the state of the last batch handed to the caller, never of what is only prefetched,
so a checkpoint taken through the prefetcher resumes exactly.

Process-wide registry: the running prefetchers (a weak set), stopped by an ``atexit``
hook registered when the first thread starts. A prefetch thread is a daemon so that it
never keeps the process alive, but a daemon thread still inside jax when the interpreter
finalises aborts the process ("terminate called ..."); the hook stops the threads first,
so a script that ends without closing its iterator exits cleanly.
"""

from __future__ import annotations

import atexit
import copy
import queue
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any

from thresher._validate import check_count
from thresher.loader.profiling.stats import LoaderStats
from thresher.loader.resumable import HasState

__all__ = ["DevicePrefetchIterator"]

_ITEM, _END, _ERROR = 0, 1, 2
_POLL_S = 0.05
_RUNNING: weakref.WeakSet[DevicePrefetchIterator] = weakref.WeakSet()


def _halt_all() -> None:
    """Stops every prefetch thread still running (at interpreter exit)."""
    for it in list(_RUNNING):
        it._halt()


def _identity(x: Any) -> Any:
    return x


def _put(q: queue.Queue[tuple[int, Any, Any]], stop: threading.Event, item: tuple[int, Any, Any]) -> None:
    while not stop.is_set():
        try:
            q.put(item, timeout=_POLL_S)
            return
        except queue.Full:
            continue


def _produce(source: Iterator[Any], transform: Callable[[Any], Any], stateful: HasState | None,
             q: queue.Queue[tuple[int, Any, Any]], stop: threading.Event) -> None:
    # Runs in the prefetch thread. It holds no reference to the DevicePrefetchIterator,
    # so dropping the last reference to that closes it (its __del__ stops this thread).
    try:
        while not stop.is_set():
            try:
                batch = next(source)
            except StopIteration:
                _put(q, stop, (_END, None, None))
                return
            state = stateful.get_state() if stateful is not None else None
            _put(q, stop, (_ITEM, transform(batch), state))
    except BaseException as e:  # handed to the caller's thread and raised there
        _put(q, stop, (_ERROR, e, None))


class DevicePrefetchIterator:
    """Iterates over ``transform(batch)`` for the batches of ``iterator``, ``size`` ahead.

    Args:
        iterator: an iterable of batches; its ``get_state``/``set_state`` (a
            DataLoaderIterator has them) pass through, adjusted for prefetching.
        transform: applied to each batch in the background thread (e.g. the copy to
            the devices). The default is the identity.
        size: how many transformed batches to keep ready; 0 transforms each batch in
            the caller's thread when it is asked for (no thread).

    ``get_state()`` describes the last batch returned by ``next``: restoring it
    continues with the batch after it, however many were prefetched. ``set_state``
    stops the thread, restores the wrapped iterator and starts again; ``close`` (or
    leaving a ``with`` block, or dropping the iterator) stops the thread and closes
    the wrapped iterator. An exception in the thread is raised by ``next``.

    Example:
        >>> import thresher as th
        >>> from thresher.jax import DevicePrefetchIterator
        >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10), [th.Batch(2)])
        >>> with DevicePrefetchIterator(iter(loader), lambda b: b * 10, size=2) as it:
        ...     first = next(it).tolist()
        ...     state = it.get_state()      # after the first batch, whatever is prefetched
        >>> first, state["position"]
        ([0, 10], 2)
        >>> it = DevicePrefetchIterator(iter(loader), size=2)
        >>> it.set_state(state)
        >>> [b.tolist() for b in it]
        [[2, 3], [4, 5], [6, 7], [8, 9]]
    """

    def __init__(self, iterator: Iterable[Any], transform: Callable[[Any], Any] = _identity, *,
                 size: int = 2) -> None:
        size = check_count(size, "size (the prefetch depth)", minimum=0, error=ValueError)
        self._source: Iterator[Any] = iter(iterator)
        self._transform = transform
        self._size = size
        self._stateful = self._source if isinstance(self._source, HasState) else None
        self._state: dict[str, Any] | None = self._stateful.get_state() if self._stateful is not None else None
        self._queue: queue.Queue[tuple[int, Any, Any]] | None = None
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._done = False

    @property
    def size(self) -> int:
        """The prefetch depth."""
        return self._size

    @property
    def iterator(self) -> Iterator[Any]:
        """The wrapped iterator (do not advance it while this one is in use)."""
        return self._source

    # -- the thread -----------------------------------------------------------------------
    def _start(self) -> None:
        self._queue = queue.Queue(maxsize=self._size)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=_produce, args=(self._source, self._transform, self._stateful, self._queue, self._stop),
            name="thresher-device-prefetch", daemon=True)
        self._thread.start()
        _RUNNING.add(self)
        atexit.unregister(_halt_all)  # registered once, whichever iterator starts first
        atexit.register(_halt_all)

    def _halt(self) -> None:
        """Stops the thread and drops what it prepared; the wrapped iterator is idle after."""
        thread, stop, q = self._thread, self._stop, self._queue
        self._thread = self._stop = self._queue = None
        _RUNNING.discard(self)
        if thread is None or stop is None or q is None:
            return
        stop.set()
        while thread.is_alive():
            thread.join(timeout=_POLL_S)
        while True:
            try:
                q.get_nowait()
            except queue.Empty:
                break

    # -- iteration ----------------------------------------------------------------------------
    def __iter__(self) -> DevicePrefetchIterator:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        if self._size == 0:
            try:
                batch = next(self._source)
            except StopIteration:
                self._done = True
                raise
            out = self._transform(batch)
            if self._stateful is not None:
                self._state = self._stateful.get_state()
            return out
        if self._thread is None:
            self._start()
        assert self._queue is not None and self._thread is not None
        while True:
            try:
                kind, value, state = self._queue.get(timeout=1.0)
                break
            except queue.Empty:
                if not self._thread.is_alive():  # cannot happen unless the thread was killed
                    self._done = True
                    raise RuntimeError("the device prefetch thread ended without a result") from None
        if kind == _ITEM:
            if self._stateful is not None:
                self._state = state
            return value
        self._done = True
        self._halt()
        if kind == _ERROR:
            raise value
        raise StopIteration

    # -- state --------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """The wrapped iterator's state right after the last batch returned by ``next``."""
        if self._state is None:
            raise TypeError(f"the wrapped iterator {type(self._source).__name__} has no get_state()")
        return copy.deepcopy(self._state)

    def set_state(self, state: dict[str, Any], *, allow_approximate: bool = False,
                  operations_changed: bool = False) -> None:
        """Restores the wrapped iterator (see ``DataLoaderIterator.set_state``); drops prefetched batches."""
        setter = getattr(self._source, "set_state", None)
        if not callable(setter):
            raise TypeError(f"the wrapped iterator {type(self._source).__name__} has no set_state()")
        self._halt()
        options = {k: True for k, v in (("allow_approximate", allow_approximate),
                                        ("operations_changed", operations_changed)) if v}
        setter(state, **options)
        self._state = self._stateful.get_state() if self._stateful is not None else None
        self._done = False

    def stats(self, reset: bool = False) -> LoaderStats:
        """The wrapped iterator's ``stats()`` (see ``DataLoaderIterator.stats``).

        The time the training loop waits here for a prefetched batch is not in it;
        the loader's work in the prefetch thread is.
        """
        stats = getattr(self._source, "stats", None)
        if not callable(stats):
            raise TypeError(f"the wrapped iterator {type(self._source).__name__} has no stats()")
        out: LoaderStats = stats(reset)
        return out

    # -- life cycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Stops the prefetch thread and closes the wrapped iterator (if it has ``close``)."""
        self._done = True
        self._halt()
        close = getattr(self._source, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> DevicePrefetchIterator:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        try:  # noqa: SIM105 - not contextlib: at interpreter exit its module global may be None
            self._halt()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"DevicePrefetchIterator({self._source!r}, size={self._size})"
