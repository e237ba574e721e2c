"""A timeline of every loader stage, in the main process and in every worker.

``thresher.trace(path)`` records, while its block is open, one event per stage of
every chunk and batch that the loaders of this process handle: ``next()`` calls and
the time between them (the training loop's own work), reading, each operation by
name, stacking, packing in a worker and the transfer to the main process. It writes
them as Chrome trace JSON (``{"traceEvents": [...]}``, complete ``"X"`` events), which
https://ui.perfetto.dev and ``chrome://tracing`` open: one process row per worker
(its real pid) and one for the main process.

Timestamps are ``time.monotonic_ns()`` in microseconds. On Linux that is
``CLOCK_MONOTONIC``, one system-wide clock, so the workers' readings and the main
process's line up. Workers always send their few readings per chunk (the stats need
them); only the main process turns them into events, so tracing adds nothing in the
workers and, when no trace is open, nothing anywhere but one check per ``next()``.

Tracing is process-wide: every iterator that runs while the block is open, in any
thread (a device-prefetch thread included), is recorded. Blocks may nest; events go
to the innermost.

Example:
    >>> import json, os, tempfile
    >>> import thresher as th
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 100), th.IndexSampler(100),
    ...                        [lambda x: x * 2, th.Batch(10)])
    >>> path = os.path.join(tempfile.mkdtemp(), "trace.json")
    >>> with th.trace(path) as tracer:
    ...     batches = list(loader)
    >>> names = {e["name"] for e in json.load(open(path))["traceEvents"] if e["ph"] == "X"}
    >>> sorted(names)
    ['Map(<lambda>)', 'batch', 'next()', 'outside next()', 'read', 'sample']
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["Tracer", "active_tracer", "trace"]

DEFAULT_MAX_EVENTS = 2_000_000
"""About 300 MB of JSON at most; past it events are counted, not kept."""

_active: list[Tracer] = []  # the open trace blocks, innermost last (only trace() changes it)
_lock = threading.Lock()


def active_tracer() -> Tracer | None:
    """The innermost open trace, or None (the only check made when tracing is off)."""
    return _active[-1] if _active else None


class Tracer:
    """Collects complete events; ``to_json()`` is the Chrome trace document.

    Example:
        >>> from thresher.loader.profiling.tracing import Tracer
        >>> t = Tracer()
        >>> t.complete("read", 1_000, 3_000, pid=1, tid=1)
        >>> [(e["name"], e["ts"], e["dur"]) for e in t.to_json()["traceEvents"] if e["ph"] == "X"]
        [('read', 1.0, 2.0)]
    """

    def __init__(self, max_events: int = DEFAULT_MAX_EVENTS) -> None:
        self.max_events = max_events
        self.events: list[dict[str, Any]] = []
        self.dropped = 0
        self.start_ns = time.monotonic_ns()
        self.end_ns: int | None = None
        self._processes: dict[int, tuple[str, int]] = {}
        self._threads: dict[tuple[int, int], str] = {}
        self.name_process(os.getpid(), f"thresher main (pid {os.getpid()})", -1)

    def name_process(self, pid: int, name: str, sort_index: int) -> None:
        if pid not in self._processes:
            self._processes[pid] = (name, sort_index)

    def name_thread(self, pid: int, tid: int, name: str) -> None:
        """Names thread ``tid`` of process ``pid`` (a worker thread recorded by the main thread)."""
        self._threads.setdefault((pid, tid), name)

    def complete(self, name: str, start_ns: int, end_ns: int, pid: int, tid: int,
                 args: dict[str, Any] | None = None) -> None:
        """One stage that ran from ``start_ns`` to ``end_ns`` (``time.monotonic_ns()``)."""
        if len(self.events) >= self.max_events:
            self.dropped += 1
            return
        if (pid, tid) not in self._threads and pid == os.getpid():
            self._threads[(pid, tid)] = threading.current_thread().name
        event: dict[str, Any] = {"name": name, "cat": "thresher", "ph": "X", "ts": start_ns / 1e3,
                                 "dur": (end_ns - start_ns) / 1e3, "pid": pid, "tid": tid}
        if args:
            event["args"] = args
        self.events.append(event)

    def to_json(self) -> dict[str, Any]:
        meta: list[dict[str, Any]] = []
        for pid, (name, index) in self._processes.items():
            meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}})
            meta.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                         "args": {"sort_index": index + 1}})
        for (pid, tid), name in self._threads.items():
            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        return {
            "traceEvents": meta + self.events,
            "displayTimeUnit": "ms",
            "otherData": {"clock": "CLOCK_MONOTONIC (time.monotonic_ns), microseconds",
                          "start_us": self.start_ns / 1e3,
                          "end_us": None if self.end_ns is None else self.end_ns / 1e3,
                          "dropped_events": self.dropped},
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the Chrome trace JSON to ``path``."""
        tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.to_json(), f, separators=(",", ":"))
        os.replace(tmp, path)


@contextlib.contextmanager
def trace(path: str | os.PathLike[str] | None = None, *,
          max_events: int = DEFAULT_MAX_EVENTS) -> Iterator[Tracer]:
    """Records a timeline of the loaders of this process while the block is open.

    Args:
        path: where to write the Chrome trace JSON when the block ends (also when it
            ends with an exception); None keeps the events only in the yielded
            :class:`Tracer` (pass it to ``plot_timeline``, or call ``save``).
        max_events: events kept at most (later ones are counted in
            ``otherData.dropped_events``).

    Open the file in https://ui.perfetto.dev, or draw it with
    :func:`thresher.plot_timeline`. See the module docstring for an example.
    """
    tracer = Tracer(max_events)
    with _lock:
        _active.append(tracer)
    try:
        yield tracer
    finally:
        with _lock:
            _active.remove(tracer)
        tracer.end_ns = time.monotonic_ns()
        if path is not None:
            tracer.save(path)
