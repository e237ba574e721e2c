"""Batches assembled ahead on a thread, so that ``next()`` only hands over a ready one.

With worker processes, a packed dataset's workers pack windows, but the main process
still receives each window, maps its rows and cuts them into batches (a batch of
rows usually spans two windows: a concatenation of a few MB). Done inside
``next()`` that is about a millisecond, with a tail whenever a window arrives.
``HandOver`` moves it to one daemon thread that keeps ``depth`` batches ready, each
with the iterator's cursor after it; ``next()`` then takes the next one from a queue.

The thread calls the same synchronous code, in the same order, so the batches and
the cursors are those of the synchronous path; ``get`` re-raises an error at the
batch where the synchronous path would have raised it. The thread holds its owner
only through a weak reference between batches: an iterator dropped without
``close()`` is collected as before (its workers stop), and the thread ends.

Example:
    >>> from thresher.dataset.hand_over import HandOver
    >>> class Counter:
    ...     def __init__(self) -> None:
    ...         self.n = 0
    ...     def step(self) -> int:
    ...         if self.n == 3:
    ...             raise StopIteration
    ...         self.n += 1
    ...         return self.n
    >>> owner = Counter()
    >>> ahead = HandOver(owner, Counter.step, depth=2)
    >>> [ahead.get() for _ in range(3)]
    [1, 2, 3]
    >>> ahead.get()
    Traceback (most recent call last):
    ...
    StopIteration
    >>> ahead.stop()
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["HandOver"]

_POLL_S = 0.05
_FULL_POLL_S = 0.002  # how often a thread with ``depth`` results ready looks for room again
_CLOSE_WAIT_S = 2.0  # close() waits this long for a batch in progress (a stuck worker: the watchdog's)

Owner = TypeVar("Owner")
T = TypeVar("T")


class _Shared:
    """The results made ahead (a deque: taking one wakes nobody) and the flags between the threads."""

    def __init__(self, depth: int) -> None:
        self.items: deque[tuple[int, Any]] = deque()
        self.depth = depth
        self.ready = threading.Event()  # set when an item was added (the consumer waits on it when empty)
        self.stop = threading.Event()


def _run(ref: weakref.ref[Any], produce: Callable[[Any], Any], shared: _Shared) -> None:
    """The thread: produce, queue, until the end, an error, ``stop`` or the owner's collection."""
    items, stop = shared.items, shared.stop
    while not stop.is_set():
        while len(items) >= shared.depth:
            # Room is looked for on a timer, not signalled by the consumer: a next() that takes a
            # result wakes no thread, so it is never preempted by one it woke (the p99 of next()).
            if stop.wait(_FULL_POLL_S) or ref() is None:
                return
        owner = ref()
        if owner is None:
            return
        try:
            item: tuple[int, Any] = (0, produce(owner))
        except StopIteration:
            item = (1, None)
        except BaseException as e:  # handed to the consumer, raised there
            item = (2, e)
        del owner  # between results the thread holds no strong reference to its owner
        if stop.is_set():
            return
        items.append(item)
        shared.ready.set()
        if item[0]:
            return


class HandOver(Generic[Owner, T]):
    """``produce(owner)`` run ahead on a thread, ``depth`` results deep (see the module docstring)."""

    def __init__(self, owner: Owner, produce: Callable[[Owner], T], depth: int = 2) -> None:
        self._shared = _Shared(max(1, depth))
        self.finished = False  # the end or an error was handed over: the thread has ended
        self._thread = threading.Thread(target=_run, args=(weakref.ref(owner), produce, self._shared),
                                        name="thresher-hand-over", daemon=True)
        self._thread.start()

    def get(self) -> T:
        """The next result; raises StopIteration at the end and the producer's error where it came."""
        if self.finished:
            raise StopIteration
        shared = self._shared
        while True:
            try:
                kind, value = shared.items.popleft()
                break
            except IndexError:
                shared.ready.clear()
                if shared.items:
                    continue
                if not self._thread.is_alive() and not shared.items:
                    self.finished = True
                    raise StopIteration from None
                shared.ready.wait(_POLL_S)
        if kind == 0:
            return value
        self.finished = True
        if kind == 1:
            raise StopIteration
        raise value

    def stop(self, wait_s: float | None = None) -> None:
        """Stops the thread and drops what it made ahead; waits for a result in progress
        (``wait_s`` at most; None: until it is done, so the owner is free to use)."""
        self._shared.stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(wait_s)
        self._shared.items.clear()

    def stop_soon(self) -> None:
        """``stop`` with the short wait of a ``close()``."""
        self.stop(_CLOSE_WAIT_S)
