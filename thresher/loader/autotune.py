"""``worker_count="auto"`` and read-ahead sized by memory.

With ``worker_count="auto"`` the first iterator of a DataLoader computes its first
chunk in the main process and measures it: the seconds it took and the bytes it
holds. That chunk is the first one the iterator hands out (the work is not lost: a
chunk is a pure function of its range, wherever it is computed). Then:

- workers pay only when a chunk costs clearly more to compute than to receive from
  a worker (``WORTH`` times the estimated transfer); otherwise ``worker_count=0``;
- otherwise one worker per available CPU, but no more than would keep the main
  process busy just receiving (compute time / transfer time), than there are
  chunks left, or than the memory budget holds chunks;
- read-ahead (``worker_buffer_size``): up to 2 chunks per worker, fewer when
  ``worker_count * worker_buffer_size`` chunks would not fit the memory budget
  (``READ_AHEAD_MEMORY_SHARE`` of the available memory: the cgroup limit or
  ``MemAvailable``).

Reads in flight (``ReadOptions.num_threads`` left None): the measured chunk's reads
are compared with their CPU time. Reads that mostly wait (a network filesystem, a
bucket: wall time over ``LATENCY_BOUND`` times the CPU time) get enough reads in flight
for the reads to outpace the CPU (``choose_reads``), up to ``MAX_AUTO_READS``; workers
are then chosen from the per-record operations' time alone, against the stricter
``LATENCY_WORTH`` (threads waiting in one process beat processes: measured on W7), or,
when even ``MAX_AUTO_READS`` reads in flight leave the CPU waiting and the stream is long
enough to pay for starting processes (``WORKER_START_S``), from the waits; so a
latency-bound source gets many reads in flight and few processes, a CPU-bound
pipeline processes and no read threads.

The choice is kept for the DataLoader's later iterators, reported as
``loader.autotune_report`` (also in ``it.stats()``) and logged by the ``thresher``
logger at INFO level. It can only change speed: batches are the same for every
worker count and read-ahead.

Example:
    >>> from thresher.loader.autotune import decide
    >>> r = decide(chunk_s=0.050, chunk_bytes=1 << 20, chunk_records=256, chunks_left=1000,
    ...            cpus=4, budget=1 << 30)
    >>> r.worker_count, r.worker_buffer_size
    (4, 2)
    >>> decide(chunk_s=0.0001, chunk_bytes=2048, chunk_records=256, chunks_left=1000,
    ...        cpus=4, budget=1 << 30).worker_count
    0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "LATENCY_BOUND",
    "LATENCY_WORTH",
    "MAX_AUTO_READS",
    "READ_AHEAD_MEMORY_SHARE",
    "TRANSFER_BYTES_PER_S",
    "TRANSFER_FIXED_S",
    "WORKER_START_S",
    "WORTH",
    "AutotuneReport",
    "Probe",
    "choose_reads",
    "decide",
    "latency_bound",
    "memory_available",
    "memory_budget",
    "nbytes",
    "read_ahead",
]

READ_AHEAD_MEMORY_SHARE = 0.25
"""The share of the available memory that chunks computed ahead may hold."""
UNKNOWN_MEMORY_BUDGET = 1 << 30
"""The read-ahead budget where the available memory cannot be read."""
TRANSFER_FIXED_S = 0.0003
"""The main process's cost to receive one chunk from a worker, besides its bytes (measured
on a 2-core machine under load: 0.1-0.4 ms for the message, the mapping, the unpickling)."""
TRANSFER_BYTES_PER_S = 4e9
"""... and per byte (mapping shared memory with MAP_POPULATE; the worker's copy runs in parallel)."""
WORTH = 2.0
"""Workers are used when computing a chunk costs at least this many times receiving it."""
LATENCY_BOUND = 2.0
"""Reads are latency-bound when they take this many times their CPU time, or more."""
WORKER_START_S = 0.5
"""About the seconds a worker process takes to start (fork server, imports; a loaded 2-core machine)."""
LATENCY_WORTH = 8.0
"""With latency-bound reads, workers are used when the operations cost this many times a transfer."""
MAX_AUTO_READS = 128
"""The most reads in flight ``worker_count="auto"`` gives one producer (on W7, 2 cores, 256 threads
delivered less than 128: waking threads contend for the interpreter lock)."""
MIN_WAIT_S = 200e-6
"""Reads that take less than this each are local (a busy machine can make them wait a little too):
never worth a thread."""


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def memory_available() -> int | None:
    """Bytes of memory this process can still use, or None where that cannot be read.

    The smaller of the system's available memory (``MemAvailable`` in /proc/meminfo,
    else ``psutil``) and what the cgroup (a container's limit) leaves.

    Example:
        >>> from thresher.loader.autotune import memory_available
        >>> m = memory_available()
        >>> m is None or m > 0
        True
    """
    found: list[int] = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        try:  # not Linux: psutil, when installed (its import costs ~30 ms, so only here)
            import psutil

            found.append(int(psutil.virtual_memory().available))
        except Exception:
            pass
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                          "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        lim, used = _read_int(limit), _read_int(usage)
        if lim is not None and used is not None and lim < (1 << 60):
            found.append(max(0, lim - used))
            break
    return min(found) if found else None


def memory_budget(available: int | None = None) -> int:
    """Bytes the read-ahead may hold: ``READ_AHEAD_MEMORY_SHARE`` of the available memory."""
    if available is None:
        available = memory_available()
    if available is None:
        return UNKNOWN_MEMORY_BUDGET
    return max(1, int(available * READ_AHEAD_MEMORY_SHARE))


def read_ahead(chunk_bytes: int, worker_count: int, budget: int | None = None, most: int = 2) -> int:
    """Chunks per worker to compute ahead: ``most``, fewer if they would not fit ``budget``.

    Never fewer than 1 (a worker needs one chunk to work on).

    Example:
        >>> from thresher.loader.autotune import read_ahead
        >>> read_ahead(10 << 20, 4, budget=1 << 30), read_ahead(200 << 20, 4, budget=1 << 30)
        (2, 1)
    """
    if budget is None:
        budget = memory_budget()
    fit = budget // max(1, worker_count * max(1, chunk_bytes))
    return max(1, min(most, fit))


def nbytes(tree: Any) -> int:
    """The bytes held by a pytree of arrays, bytes, strings and numbers (an estimate).

    Example:
        >>> import numpy as np
        >>> from thresher.loader.autotune import nbytes
        >>> nbytes([{"x": np.zeros(10, np.float32), "y": b"abc"}, 7])
        51
    """
    if isinstance(tree, np.ndarray):
        return int(tree.nbytes)
    if isinstance(tree, (bytes, bytearray, memoryview)):
        return len(tree)
    if isinstance(tree, str):
        return len(tree)
    if isinstance(tree, dict):
        return sum(nbytes(v) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return sum(nbytes(v) for v in tree)
    return 8


@dataclass(frozen=True)
class Probe:
    """One chunk measured in this process (``worker_count="auto"``).

    Attributes:
        chunk_s: seconds the chunk took (reads waited for + per-record operations).
        chunk_bytes, chunk_records: what it holds.
        chunks_left: chunks after it (None: forever).
        read_s: seconds its reads took, start to end; read_cpu_s: their CPU time
            (summed over the threads); read_threads: the threads they ran on (0: inline).
        ops_s: seconds its per-record operations took.
        thread_speedup: how much faster two chunks ran on two threads at once than one
            after the other (see thresher.loader.thread_probe), or None when not measured.
    """

    chunk_s: float
    chunk_bytes: int
    chunk_records: int
    chunks_left: int | None
    read_s: float = 0.0
    read_cpu_s: float = 0.0
    read_threads: int = 0
    ops_s: float = 0.0
    thread_speedup: float | None = None


def latency_bound(probe: Probe) -> bool:
    """Whether the probe's reads mostly waited (then more probes would not change the choice)."""
    wait_s = probe.read_s * max(1, probe.read_threads) / max(1, probe.chunk_records)
    return probe.read_s >= LATENCY_BOUND * probe.read_cpu_s and wait_s >= MIN_WAIT_S


def choose_reads(probe: Probe) -> tuple[int, float, str]:
    """Reads in flight for the measured chunk: ``(threads, chunk cost with them, why)``.

    The cost is what one producer spends per chunk once reads overlap: its CPU time,
    or its reads' waits spread over the threads when those take longer (then more
    processes mean more reads in flight).

    Example:
        >>> from thresher.loader.autotune import Probe, choose_reads
        >>> waits = Probe(chunk_s=0.035, chunk_bytes=1 << 14, chunk_records=256, chunks_left=50,
        ...               read_s=0.032, read_cpu_s=0.002, read_threads=16)  # ~2 ms per read
        >>> choose_reads(waits)[0]
        128
        >>> local = Probe(0.004, 1 << 14, 256, 50, read_s=0.001, read_cpu_s=0.001)
        >>> choose_reads(local)[0]
        0
    """
    n = max(1, probe.chunk_records)
    other_s = max(0.0, probe.chunk_s - probe.read_s)
    wait_s = probe.read_s * max(1, probe.read_threads) / n  # one read, start to end
    cpu_s = probe.read_cpu_s / n
    if not latency_bound(probe):
        return 0, other_s + probe.read_cpu_s, (f"reads are CPU-bound ({1e6 * wait_s:.0f} us each, "
                                               f"{1e6 * cpu_s:.0f} us CPU): no read threads")
    per_record_cpu = cpu_s + other_s / n
    threads = max(1, min(MAX_AUTO_READS, math.ceil(2 * wait_s / max(per_record_cpu, 1e-6))))
    cost = max(other_s + probe.read_cpu_s, n * wait_s / threads)
    why = (f"reads wait {1e3 * wait_s:.2f} ms each for {1e6 * cpu_s:.0f} us of CPU: {threads} reads in flight "
           f"{'(the most auto gives)' if threads == MAX_AUTO_READS else 'outpace the CPU'}")
    return threads, cost, why


@dataclass(frozen=True)
class AutotuneReport:
    """What ``worker_count="auto"`` chose, and from what.

    Attributes:
        worker_count: the workers used (0: in process).
        worker_buffer_size: chunks each worker computes ahead.
        cpus: the CPUs available to this process.
        chunk_records: records in the measured chunk.
        chunk_s: seconds the measured chunk took in this process (read + per-record ops).
        chunk_bytes: bytes it holds (what a worker would send).
        memory_budget: bytes the read-ahead may hold.
        reason: why, in words.
        read_threads: reads in flight in each producer (0: inline).
        read_wait_s: one read's measured time, start to end.
        worker_mode: ``"process"`` or ``"thread"``: how the workers run.
        thread_speedup: the measured speedup of two chunks on two threads (None: not measured).
    """

    worker_count: int
    worker_buffer_size: int
    cpus: int
    chunk_records: int
    chunk_s: float
    chunk_bytes: int
    memory_budget: int
    reason: str
    read_threads: int = 0
    read_wait_s: float = 0.0
    worker_mode: str = "process"
    thread_speedup: float | None = None

    def __str__(self) -> str:
        mode = f", worker_mode={self.worker_mode!r}" if self.worker_count else ""
        return (f"autotune: worker_count={self.worker_count}, worker_buffer_size={self.worker_buffer_size}{mode}, "
                f"read_threads={self.read_threads}: "
                f"{self.reason} (a chunk of {self.chunk_records} records took {1e3 * self.chunk_s:.2f} ms "
                f"and holds {self.chunk_bytes / 2**20:.2f} MiB; {self.cpus} CPUs; read-ahead budget "
                f"{self.memory_budget / 2**20:,.0f} MiB)")


def decide(chunk_s: float, chunk_bytes: int, chunk_records: int, chunks_left: int | None, cpus: int,
           budget: int, unusable: str | None = None, worth: float = WORTH) -> AutotuneReport:
    """The worker count and read-ahead for a pipeline whose chunk took ``chunk_s`` here.

    Args:
        chunk_s, chunk_bytes, chunk_records: the measured chunk.
        chunks_left: chunks after it (None: forever).
        cpus: CPUs available.
        budget: bytes the read-ahead may hold.
        unusable: why workers cannot be used at all (e.g. the pipeline cannot be
            pickled), or None.
        worth: workers are used when ``chunk_s`` is this many times a transfer.
    """
    def report(w: int, b: int, reason: str) -> AutotuneReport:
        return AutotuneReport(w, b, cpus, chunk_records, chunk_s, chunk_bytes, budget, reason)

    default_buffer = 2
    if unusable is not None:
        return report(0, default_buffer, f"workers cannot be used: {unusable}")
    if chunks_left == 0:
        return report(0, default_buffer, "the stream ends with the measured chunk")
    transfer_s = TRANSFER_FIXED_S + chunk_bytes / TRANSFER_BYTES_PER_S
    ratio = chunk_s / transfer_s
    if ratio < worth:
        return report(0, default_buffer,
                      f"computing a chunk here costs {ratio:.1f}x receiving it from a worker "
                      f"(~{1e3 * transfer_s:.2f} ms): workers would not pay")
    w = min(cpus, max(1, math.ceil(ratio)))
    why = "one worker per CPU" if w == cpus else f"{w} workers keep the main process busy receiving"
    if chunks_left is not None and chunks_left < w:
        w, why = chunks_left, f"only {chunks_left} chunks left"
    fit = budget // max(1, chunk_bytes)
    if fit < w:
        w, why = max(1, fit), f"{max(1, fit)} chunks fit the memory budget"
    b = read_ahead(chunk_bytes, w, budget, default_buffer)
    return report(w, b, f"{why}; computing a chunk costs {ratio:.0f}x receiving it")
