"""Where the loader's time goes: per-stage times, records/s and a bottleneck hint.

Every DataLoaderIterator keeps a :class:`StatsRecorder`. It is always on because it
is cheap: a few clock readings per chunk (each stage of a chunk: sample, read, each
per-record operation, and in a worker the stacking and packing into shared memory)
and per batch (the time inside ``next()``, the stacking and the operations after
the Batch in this process). Workers measure their own stages and send the readings
back with each chunk: a few integers per chunk, never anything per record.

``it.stats()`` turns these into a :class:`LoaderStats`: seconds per stage and where
it ran, how long the training loop waited inside ``next()`` and how long it spent
outside it (its own step), records/s, and a hint naming the bottleneck.

Example:
    >>> import thresher as th
    >>> loader = th.DataLoader(th.sources.RangeDataSource(0, 1000), th.IndexSampler(1000),
    ...                        [lambda x: x + 1, th.Batch(100)])
    >>> with iter(loader) as it:
    ...     total = sum(int(b.sum()) for b in it)
    ...     stats = it.stats()
    >>> stats.batches, stats.records
    (10, 1000)
    >>> [s.name for s in stats.stages]
    ['sample', 'read', 'Map(<lambda>)', 'batch']
    >>> abs(stats.waited_s + stats.outside_s - stats.wall_s) < 1e-6
    True
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from thresher.loader.profiling.tracing import Tracer, active_tracer

__all__ = [
    "BATCH",
    "MAIN",
    "NEXT",
    "OUTSIDE",
    "PACK",
    "TRANSFER",
    "WAIT_WORKERS",
    "WORKERS",
    "LoaderStats",
    "StageTime",
    "StatsRecorder",
    "available_cpus",
    "bottleneck_hint",
]

MAIN, WORKERS = "main", "workers"
BATCH = "batch"
PACK = "pack"
TRANSFER = "transfer"
WAIT_WORKERS = "wait for workers"
NEXT = "next()"
OUTSIDE = "outside next()"

INPUT_BOUND = 0.5
"""The train loop is input-bound when it waits in ``next()`` at least this share of the time."""
COMPUTE_BOUND = 0.2
"""... and compute-bound when it waits less than this share."""
BUSY = 0.75
"""Workers busy at least this share of the time cannot give more."""


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask; ``os.cpu_count()`` elsewhere).

    Example:
        >>> from thresher.loader.profiling.stats import available_cpus
        >>> available_cpus() >= 1
        True
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class StageTime:
    """The time one stage took, summed over the run.

    Attributes:
        name: ``sample`` (positions to record keys), ``read``, an operation's name
            (``Map(decode)``), ``batch`` (stacking), ``pack`` (a worker writing its
            result into shared memory), ``transfer`` (the main process receiving and
            mapping a worker's result), ``wait for workers`` (the main process idle,
            waiting for the next chunk).
        where: ``"main"`` or ``"workers"`` (summed over all workers).
        seconds: the total.
        count: how many times it ran (chunks or batches).
        share: ``seconds`` over the wall time of that side (times the number of
            workers for ``"workers"``): how busy the stage kept its processes.
    """

    name: str
    where: str
    seconds: float
    count: int
    share: float


@dataclass(frozen=True)
class LoaderStats:
    """A snapshot of where an iterator's time went (see ``DataLoaderIterator.stats``).

    ``wall_s`` runs from the first ``next()`` call to the end of the last one, and is
    exactly ``waited_s`` (inside ``next()``) plus ``outside_s`` (between calls: the
    training loop's own work). ``first_batch_s`` is the iterator's first ``next()``
    call (start-up included), when the measurement includes it (else None).
    """

    wall_s: float
    waited_s: float
    outside_s: float
    first_batch_s: float | None
    batches: int
    records: int
    worker_count: int
    cpus: int
    stages: tuple[StageTime, ...]
    worker_busy: tuple[float, ...] = ()
    notes: tuple[str, ...] = ()
    hint: str = field(default="")
    skipped_records: int = 0  # records dropped by errors="skip"
    worker_mode: str = "process"  # how the workers ran: "process" or "thread"

    @property
    def records_per_s(self) -> float:
        """Records handed to the training loop per second of wall time."""
        return self.records / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def batches_per_s(self) -> float:
        return self.batches / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def waited_fraction(self) -> float:
        """The share of the wall time the training loop spent inside ``next()``."""
        return self.waited_s / self.wall_s if self.wall_s > 0 else 0.0

    def stage(self, name: str, where: str | None = None) -> StageTime | None:
        """The stage called ``name`` (on ``where``, if given), or None."""
        for s in self.stages:
            if s.name == name and (where is None or s.where == where):
                return s
        return None

    def __str__(self) -> str:
        kind = " thread" if self.worker_mode == "thread" else ""
        workers = f"{self.worker_count} worker{kind}{'s' if self.worker_count != 1 else ''}" \
            if self.worker_count else "in process"
        lines = [f"thresher loader: {self.batches:,} batches, {self.records:,} records in {self.wall_s:.3f} s"
                 f" = {self.records_per_s:,.0f} records/s ({workers}, {self.cpus} CPUs)"]
        first = f"; first batch {self.first_batch_s:.3f} s" if self.first_batch_s is not None else ""
        lines.append(f"train loop: waited in next() {self.waited_s:.3f} s ({self.waited_fraction:.0%}), "
                     f"outside next() {self.outside_s:.3f} s ({1 - self.waited_fraction:.0%}){first}")
        per = max(self.batches, 1)
        width = max([len(s.name) for s in self.stages] + [5])
        lines.append(f"  {'stage':<{width}}  {'where':<7}  {'total s':>8}  {'ms/batch':>8}  {'busy':>5}")
        for s in self.stages:
            lines.append(f"  {s.name:<{width}}  {s.where:<7}  {s.seconds:>8.3f}  {1e3 * s.seconds / per:>8.3f}"
                         f"  {s.share:>5.0%}")
        if self.worker_busy:
            lines.append("worker busy: " + ", ".join(f"w{i} {b:.0%}" for i, b in enumerate(self.worker_busy)))
        lines.extend(self.notes)
        lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


def _top(stages: Sequence[StageTime], where: str, exclude: tuple[str, ...] = ()) -> StageTime | None:
    candidates = [s for s in stages if s.where == where and s.name not in exclude]
    return max(candidates, key=lambda s: s.seconds) if candidates else None


def bottleneck_hint(stats: LoaderStats) -> str:
    """One line: input-bound, compute-bound or balanced, and what to change.

    Example:
        >>> from thresher.loader.profiling.stats import LoaderStats, StageTime, bottleneck_hint
        >>> s = LoaderStats(10.0, 6.3, 3.7, 0.1, 100, 12800, 0, 8,
        ...                 (StageTime("read", "main", 5.0, 50, 0.5),))
        >>> print(*bottleneck_hint(s).split("; "), sep="\\n")
        input-bound: the train loop waited 63% of the time
        the loader runs in the train loop's process (worker_count=0): raise worker_count (8 CPUs)
        slowest stage: read (50% of the time)
    """
    if stats.batches == 0 or stats.wall_s <= 0:
        return "no batches yet"
    waited = stats.waited_fraction
    w = stats.worker_count
    busy = sum(stats.worker_busy) / len(stats.worker_busy) if stats.worker_busy else 0.0
    if waited >= INPUT_BOUND:
        head = f"input-bound: the train loop waited {waited:.0%} of the time"
        if stats.first_batch_s is not None and stats.first_batch_s > 0.5 * stats.waited_s:
            return (f"{head}, mostly for the first batch ({stats.first_batch_s:.2f} s of start-up): "
                    "measure over a longer run")
        if w == 0:
            top = _top(stats.stages, MAIN)
            slowest = f"; slowest stage: {top.name} ({top.share:.0%} of the time)" if top else ""
            return (f"{head}; the loader runs in the train loop's process (worker_count=0): raise worker_count "
                    f"({stats.cpus} CPUs){slowest}")
        top_w = _top(stats.stages, WORKERS)
        slowest = f"; slowest stage: {top_w.name} in the workers" if top_w else ""
        if busy >= BUSY:
            if w < stats.cpus:
                return (f"{head}; raise worker_count (the {w} workers were busy {busy:.0%} of the time; "
                        f"{stats.cpus} CPUs){slowest}")
            return (f"{head}; the {w} workers were busy {busy:.0%} of the time on {stats.cpus} CPUs: the machine "
                    f"is the limit, make the per-record work cheaper (batched reads, batch-then-map){slowest}")
        top_m = _top(stats.stages, MAIN, exclude=(WAIT_WORKERS,))
        if top_m is not None and top_m.share >= 0.25:
            return (f"{head}; the main process is the limit: {top_m.name} takes {top_m.share:.0%} of its time "
                    f"(the workers were busy only {busy:.0%})")
        return (f"{head}; the workers were busy only {busy:.0%} of the time: the machine is shared or "
                "slowed down, or the read-ahead (worker_buffer_size, chunk_size) is too short for uneven chunks")
    if waited < COMPUTE_BOUND:
        tail = f"; fewer workers would do (busy {busy:.0%})" if w > 1 and busy < 0.3 else ""
        return (f"compute-bound: the loader was ready ahead of the train loop (it waited {waited:.0%} of "
                f"the time){tail}")
    return (f"balanced: the train loop waited {waited:.0%} of the time; a faster loader "
            f"({'more workers' if w else 'worker_count > 0'}) would gain at most that")


class StatsRecorder:
    """Accumulates stage times for one iterator (and writes trace events while tracing).

    ``order`` lists the stage names in pipeline order, for the table.
    """

    def __init__(self, worker_count: int, order: Sequence[str] = (), notes: Sequence[str] = ()) -> None:
        self.worker_count = worker_count
        self.worker_mode = "process"
        self.order = tuple(order)
        self.notes: list[str] = list(notes)
        self.tracer: Tracer | None = None
        self._first_done = False  # the iterator's first next() has returned (kept by reset)
        self.reset()

    def reset(self) -> None:
        self._stages: dict[str, list[int]] = {}  # a main-process stage -> [ns, count]
        self._chunks: tuple[dict[tuple[str, ...], list[int]], dict[tuple[str, ...], list[int]]] = ({}, {})
        # ^ main, workers: the stage names of a chunk -> [ns of each stage..., count]
        self.busy: dict[int, int] = {}  # worker index -> ns computing
        self.next_ns = 0
        self.outside_ns = 0
        self.first_enter = 0
        self.last_exit = 0
        self.first_batch_ns: int | None = None
        self.batches = 0
        self.records = 0
        self.skipped_records = 0

    # -- recording (the hot path: a few operations per batch or chunk) ----------------------
    def enter(self) -> int:
        """Called first thing in ``next()``: returns the start time."""
        self.tracer = tracer = active_tracer()
        now = time.monotonic_ns()
        last = self.last_exit
        if last and self.first_enter:
            self.outside_ns += now - last
            if tracer is not None:
                tracer.complete(OUTSIDE, last, now, os.getpid(), threading.get_native_id())
        elif not self.first_enter:
            self.first_enter = now
        return now

    def exit(self, start: int) -> None:
        """Called last thing in ``next()``."""
        self.last_exit = now = time.monotonic_ns()
        self.next_ns += now - start
        if not self._first_done:
            self._first_done = True
            self.first_batch_ns = now - start
        if self.tracer is not None:
            self.tracer.complete(NEXT, start, now, os.getpid(), threading.get_native_id())

    def stage(self, name: str, start: int, end: int) -> None:
        """A stage that ran in this process from ``start`` to ``end`` (monotonic ns)."""
        t = self._stages.get(name)
        if t is None:
            t = self._stages[name] = [0, 0]
        t[0] += end - start
        t[1] += 1
        if self.tracer is not None:
            self.tracer.complete(name, start, end, os.getpid(), threading.get_native_id())

    def chunk(self, names: tuple[str, ...], marks: Sequence[int], worker: int | None = None,
              pid: int | None = None, index: int = -1, start: int = 0, stop: int = 0,
              thread: int | None = None) -> None:
        """Chunk ``index`` (positions [start, stop)): ``marks[i]`` to ``marks[i + 1]`` is stage
        ``names[i]``. ``worker`` is None for a chunk computed in this process by the iterator
        itself; ``thread`` is the native id of the worker thread that computed it (thread workers).
        """
        side = self._chunks[worker is not None]
        t = side.get(names)
        if t is None:
            t = side[names] = [0] * (len(names) + 1)
        prev = marks[0]
        for i, m in enumerate(marks[1:]):
            t[i] += m - prev
            prev = m
        t[-1] += 1
        if worker is not None:
            self.busy[worker] = self.busy.get(worker, 0) + prev - marks[0]
        tracer = self.tracer
        if tracer is not None:
            if worker is None:
                pid, tid = os.getpid(), threading.get_native_id()
            elif thread is not None:
                pid, tid = os.getpid(), thread
                tracer.name_thread(pid, tid, f"thresher worker thread {worker}")
            else:
                assert pid is not None
                tid = pid
                tracer.name_process(pid, f"thresher worker {worker} (pid {pid})", worker)
            args = {"chunk": index, "positions": f"[{start}, {stop})"}
            for i, name in enumerate(names):
                tracer.complete(name, marks[i], marks[i + 1], pid, tid, args)

    def _totals(self) -> dict[tuple[str, str], list[int]]:
        """(where, stage) -> [ns, count]."""
        out: dict[tuple[str, str], list[int]] = {}
        for where, side in ((MAIN, self._chunks[0]), (WORKERS, self._chunks[1])):
            for names, t in side.items():
                for i, name in enumerate(names):
                    acc = out.setdefault((where, name), [0, 0])
                    acc[0] += t[i]
                    acc[1] += t[-1]
        for name, (ns, count) in self._stages.items():
            acc = out.setdefault((MAIN, name), [0, 0])
            acc[0] += ns
            acc[1] += count
        return out

    # -- reading ------------------------------------------------------------------------
    def snapshot(self, cpus: int | None = None) -> LoaderStats:
        wall_ns = self.last_exit - self.first_enter if self.first_enter and self.last_exit else 0
        wall = wall_ns / 1e9
        w = max(self.worker_count, 1)
        rank = {name: i for i, name in enumerate(self.order)}
        totals = self._totals()
        keys = sorted(totals, key=lambda k: (k[0] != WORKERS, rank.get(k[1], len(rank))))
        stages = tuple(
            StageTime(name, where, ns / 1e9, count,
                      (ns / 1e9) / (wall * (w if where == WORKERS else 1)) if wall > 0 else 0.0)
            for (where, name), (ns, count) in ((k, totals[k]) for k in keys))
        busy = tuple(self.busy.get(i, 0) / wall_ns if wall_ns else 0.0 for i in range(self.worker_count)) \
            if self.busy else ()
        stats = LoaderStats(
            wall_s=wall, waited_s=self.next_ns / 1e9, outside_s=self.outside_ns / 1e9,
            first_batch_s=None if self.first_batch_ns is None else self.first_batch_ns / 1e9,
            batches=self.batches, records=self.records, worker_count=self.worker_count,
            cpus=cpus if cpus is not None else available_cpus(), stages=stages, worker_busy=busy,
            notes=tuple(self.notes), skipped_records=self.skipped_records, worker_mode=self.worker_mode)
        return LoaderStats(**{**stats.__dict__, "hint": bottleneck_hint(stats)})
