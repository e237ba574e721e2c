"""Threads or processes: what ``worker_count="auto"`` measures to choose ``worker_mode``.

Once the first chunks are measured one by one and workers pay (see autotune), the
next two chunks are computed at the same time, one on a helper thread and one on
the calling thread, and the time they take together is compared with the time one
chunk took alone: the *thread speedup*. Work that holds the interpreter lock
(pure-Python maps) gets about 1x, work that releases it (JPEG decode in Pillow,
array_record reads, NumPy on large arrays, reads that wait on storage, any work on
free-threaded Python) up to 2x. The rule (``choose_mode``):

- the speedup is at least ``THREAD_SPEEDUP``: **threads** (the work runs in parallel
  on threads, and threads pay no pickling, no shared memory, no start-up);
- else **processes**; and where processes cannot run the pipeline (it cannot be
  pickled) threads if they gain anything at all (``MIN_GAIN``), else no workers;
- not measured (too little of the stream left for two more chunks): processes, or
  no workers where processes cannot run the pipeline;
- reads so slow that even the most reads in flight ``"auto"`` gives leave the CPU
  waiting (autotune's case for more producers): processes, without measuring (one
  interpreter cannot wake that many reading threads fast enough).

Both chunks are ordinary chunks of the stream, handed out in order afterwards (a
chunk is a pure function of its range: the batches do not depend on the choice).

Example:
    >>> from thresher.loader.autotune import AutotuneReport
    >>> from thresher.loader.thread_probe import choose_mode
    >>> report = AutotuneReport(2, 2, 2, 256, 0.02, 1 << 20, 1 << 30, "one worker per CPU")
    >>> choose_mode(report, speedup=1.9, processes=True).worker_mode
    'thread'
    >>> choose_mode(report, speedup=1.05, processes=True).worker_mode
    'process'
    >>> choose_mode(report, speedup=1.05, processes=False).worker_count
    0
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from thresher.loader.autotune import AutotuneReport
from thresher.loader.chunk import Chunk, ChunkProcessor
from thresher.loader.read_ahead import ReadAhead

__all__ = ["MIN_GAIN", "THREAD_SPEEDUP", "choose_mode", "measure_pair"]

THREAD_SPEEDUP = 1.5
"""Threads are chosen when two chunks on two threads run at least this much faster than one
after the other (1.0: no parallelism at all, 2.0: perfect). 1.5 means at least two thirds of
the chunk's time runs without the interpreter lock (Amdahl: 1 / ((1 - p) + p / 2))."""
MIN_GAIN = 1.15
"""Where processes cannot run the pipeline, threads are used when they gain at least this much."""


def measure_pair(processor: ChunkProcessor, first: tuple[int, int], second: tuple[int, int],
                 read_threads: int = 0, timeout_s: float | None = None, worker_timeout_s: float | None = None,
                 keys: Callable[[int, int], list[int]] | None = None,
                 ) -> tuple[list[Chunk | BaseException], float]:
    """Computes two chunks at once on two threads: ``([chunk or error, ...], seconds for both)``.

    Each thread has its own shallow copy of ``processor`` (its own per-record
    generator) and, with ``read_threads``, its own reads in flight, as a worker thread has.
    The helper thread's chunk (``first``) is watched as a worker thread's is: not done
    ``worker_timeout_s`` after it began, it is a WorkerStuckError with the helper's stack
    (the helper is left behind; ``keys`` gives the chunk's first record keys for the message).
    """
    out: list[Chunk | BaseException] = [BaseException("not computed"), BaseException("not computed")]

    def compute(i: int, bounds: tuple[int, int]) -> None:
        proc = copy.copy(processor)
        ahead = ReadAhead(proc, read_threads, timeout_s)
        try:
            out[i] = proc.transform(ahead.finish(ahead.start(*bounds)), *bounds)
        except BaseException as e:  # raised when this chunk's turn comes
            out[i] = e
        finally:
            ahead.close()

    helper = threading.Thread(target=compute, args=(0, first), name="thresher-probe", daemon=True)
    started = time.monotonic_ns()
    helper.start()
    compute(1, second)
    waited = (time.monotonic_ns() - started) / 1e9
    helper.join(None if worker_timeout_s is None else max(0.0, worker_timeout_s - waited))
    if helper.is_alive():
        from thresher.loader.pool.watchdog import thread_stack, thread_stuck_error  # only for this error

        assert worker_timeout_s is not None
        stuck_s = (time.monotonic_ns() - started) / 1e9
        raise thread_stuck_error('the helper thread measuring threads against processes (worker_count="auto")',
                                 None, first, None if keys is None else keys(*first), stuck_s, worker_timeout_s,
                                 thread_stack(helper))
    return out, (time.monotonic_ns() - started) / 1e9


def choose_mode(report: AutotuneReport, speedup: float | None, processes: bool,
                reason: str = "") -> AutotuneReport:
    """The report with its ``worker_mode`` chosen from the measured thread ``speedup``.

    ``processes``: whether worker processes can run the pipeline (it can be pickled).
    ``speedup`` None: not measured (processes, where they can run it). ``reason``
    overrides the words for a choice made without measuring.
    """
    if not report.worker_count:
        return report
    if speedup is None and not processes:
        return replace(report, worker_count=0,
                       reason=f"{report.reason}; but {reason or 'processes cannot run this pipeline'}, and too "
                              "little of the stream was left to measure whether threads gain: no workers")
    if speedup is None:
        mode, why = "process", reason or "the thread speedup was not measured"
    elif speedup >= THREAD_SPEEDUP:
        mode, why = "thread", f"two chunks on two threads ran {speedup:.2f}x as fast as one (>= {THREAD_SPEEDUP})"
    elif processes:
        mode, why = "process", f"two chunks on two threads ran only {speedup:.2f}x as fast as one: the work holds " \
                               "the interpreter lock"
    elif speedup >= MIN_GAIN:
        mode, why = "thread", f"two chunks on two threads ran {speedup:.2f}x as fast as one; processes cannot " \
                              "run this pipeline"
    else:
        return replace(report, worker_count=0, thread_speedup=speedup,
                       reason=f"{report.reason}; but processes cannot run this pipeline and two chunks on two "
                              f"threads ran only {speedup:.2f}x as fast as one: no workers")
    plural = "processes" if mode == "process" else "threads"
    return replace(report, worker_mode=mode, thread_speedup=speedup, reason=f"{report.reason}; {plural}: {why}")
