"""The watchdog: a chunk that does not come back within ``worker_timeout_s`` is an error, not a hang.

A dead worker wakes the main process at once (its process sentinel); a *stuck* one
(stopped with SIGSTOP, deadlocked in a C library, waiting on a read that never
returns) stays alive and silent. So while the main process waits for chunk c of
worker w, it also keeps the time since the chunk became w's current work: the latest
of the moment it was handed to w, the moment w's previous result was taken back and
the moment w said it had started (its first message, once the pipeline is loaded):
the worker cannot have begun the chunk before. A worker that never says so is given
at least ``START_TIMEOUT_S`` to start, since a loaded machine starts
processes slowly. Past ``worker_timeout_s`` the pool
raises a ``WorkerStuckError`` built here, after it asked the worker for its stack:

- each worker registers ``faulthandler`` on SIGUSR1 at start, writing into its own
  pipe (``stack_pipe``); the main process sends SIGUSR1 and reads the dump back
  (``ask_for_stack``). faulthandler answers from its C signal handler, so a worker
  blocked in Python or in C code answers; a stopped one (SIGSTOP, or an
  uninterruptible wait in the kernel) cannot, and the message says so and shows
  the process's state from ``/proc/<pid>/status`` and ``/proc/<pid>/wchan``.
- then the iterator closes, which kills the workers (SIGKILL ends stopped ones too);
  their results travel in anonymous memory that the kernel frees with them.

The clock is per chunk, never per epoch: a slow pipeline that keeps delivering never
fires it.

Worker threads (``worker_mode="thread"``, thresher.loader.producers.threads) have the same
clock. A thread cannot be killed, so past the limit the pool raises a
``WorkerStuckError`` built by ``thread_stuck_error`` with the thread's stack
(``thread_stack``: ``faulthandler.dump_traceback``, the public dump that worker
processes answer SIGUSR1 with, so both modes show stacks alike) and the thread is left
behind: a daemon, it ends when its call returns, and never keeps the process alive.

Example:
    >>> import os, signal
    >>> from thresher.loader.pool.watchdog import process_state
    >>> "State:" in process_state(os.getpid())
    True
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import select
import signal
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from thresher.errors import WorkerStuckError
from thresher.loader.options import DEFAULT_WORKER_TIMEOUT_S

__all__ = ["ANSWER_S", "DEFAULT_WORKER_TIMEOUT_S", "START_TIMEOUT_S", "ask_for_stack", "exit_reason",
           "listen_for_stack_requests", "process_state", "stack_pipe", "stuck_error", "thread_stack",
           "thread_stuck_error"]

ANSWER_S = 1.0
"""How long a worker has to answer SIGUSR1 with its stack."""

START_TIMEOUT_S = 120.0
"""The least time a worker gets to start (import the main module, load the pipeline) before the
watchdog calls it stuck: ``max(worker_timeout_s, START_TIMEOUT_S)``; a loaded machine starts slowly."""

_QUIET_S = 0.1  # the dump is complete once the pipe stays quiet this long
_MAX_STACK_BYTES = 1 << 20
_SIGNAL = getattr(signal, "SIGUSR1", None)
_THREAD_HEADER = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-fA-F]+)")


def stack_pipe(ctx: Any) -> tuple[Connection, Connection]:
    """A pipe for one worker's stack dumps: (the main process's reading end, the worker's end)."""
    reader, writer = ctx.Pipe(duplex=False)
    os.set_blocking(reader.fileno(), False)
    return reader, writer


def listen_for_stack_requests(writer: Connection | None) -> None:
    """In a worker: on SIGUSR1, print every thread's Python stack into ``writer``.

    The caller keeps ``writer`` open for the worker's life (faulthandler writes to its
    descriptor from a signal handler).
    """
    if writer is None or _SIGNAL is None:
        return
    with contextlib.suppress(AttributeError, ValueError, OSError, RuntimeError):
        faulthandler.register(_SIGNAL, file=writer.fileno(), all_threads=True)


def _drain(fd: int) -> bytes:
    out = b""
    with contextlib.suppress(BlockingIOError, OSError):
        while len(out) < _MAX_STACK_BYTES:
            data = os.read(fd, 65536)
            if not data:
                break
            out += data
    return out


def ask_for_stack(pid: int, reader: Connection, answer_s: float = ANSWER_S) -> str | None:
    """The Python stack of the worker ``pid`` (all threads), or None if it did not answer in time."""
    if _SIGNAL is None:
        return None
    fd = reader.fileno()
    _drain(fd)  # an earlier, unread answer
    try:
        os.kill(pid, _SIGNAL)
    except OSError:
        return None
    deadline = time.monotonic() + answer_s
    out = b""
    while len(out) < _MAX_STACK_BYTES:
        wait = deadline - time.monotonic() if not out else _QUIET_S
        if wait <= 0:
            break
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            if out:
                break
            continue
        data = _drain(fd)
        if not data:
            break
        out += data
    return out.decode(errors="replace").rstrip() or None


def process_state(pid: int) -> str:
    """The process's scheduler state and kernel wait channel, as /proc shows them ("" elsewhere)."""
    parts = []
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("State:"):
                parts.append(" ".join(line.split()))
                break
    with contextlib.suppress(OSError), open(f"/proc/{pid}/wchan") as f:
        wchan = f.read().strip()
        if wchan and wchan != "0":
            parts.append(f"wchan: {wchan}")
    return "; ".join(parts)


def stuck_error(where: str, worker: int, pid: int, bounds: tuple[int, int], keys: list[int] | None,
                stuck_s: float, timeout_s: float, stack: str | None, others: list[str],
                starting: bool = False) -> WorkerStuckError:
    """The error for a chunk that did not come back: who, what, how long, and where it hangs.

    ``others``: a line for each other worker that is stuck too; ``starting``: the worker
    never said it had loaded the pipeline (it hangs while starting).
    """
    start, stop = bounds
    shown = "" if keys is None else f" (record keys {keys[:8]}{'...' if stop - start > 8 else ''})"
    state = process_state(pid)
    if stack is None:
        answer = (f"The worker did not answer SIGUSR1 within {ANSWER_S:g} s: it is stopped (SIGSTOP) or in an "
                  "uninterruptible wait in the kernel (a hung filesystem or device), so it has no Python stack "
                  "to show")
    else:
        answer = f"The worker's Python stack (faulthandler, most recent call first):\n{stack}"
    doing = ("has not finished starting (importing the main module, loading the pipeline) to compute "
             if starting else "has not delivered ")
    lines = [
        f"thresher {where} {doing}positions [{start}, {stop}){shown} for {stuck_s:.1f} s, longer "
        f"than worker_timeout_s={timeout_s:g}: it is stuck (a read that never returns, a deadlock, a stopped "
        "process). The workers are stopped and the iterator is closed; fix the cause (or raise "
        "worker_timeout_s if a chunk can take this long; None waits forever), then resume from the last "
        "get_state().",
        answer,
    ]
    if state:
        lines.append(f"/proc/{pid}: {state}")
    lines += others
    return WorkerStuckError("\n".join(lines), worker=worker, pid=pid, positions=bounds,
                            record_keys=None if keys is None else keys[:8], stuck_s=stuck_s, stack=stack)


def thread_stack(thread: threading.Thread) -> str | None:
    """The Python stack of ``thread`` (of this process), most recent call first; None if it ended.

    Read with ``faulthandler.dump_traceback`` (every thread's stack, as a worker process
    answers SIGUSR1), keeping the part of ``thread``.

    Example:
        >>> import threading
        >>> from thresher.loader.pool.watchdog import thread_stack
        >>> release = threading.Event()
        >>> t = threading.Thread(target=release.wait)
        >>> t.start()
        >>> "in wait" in thread_stack(t)
        True
        >>> release.set(); t.join()
    """
    ident = thread.ident
    if ident is None or not thread.is_alive():
        return None
    with tempfile.TemporaryFile() as f:
        faulthandler.dump_traceback(f, all_threads=True)
        f.seek(0)
        dump = f.read().decode(errors="replace")
    for part in dump.split("\n\n"):
        lines = part.strip("\n").splitlines()
        m = _THREAD_HEADER.match(lines[0]) if lines else None
        if m is not None and int(m.group(1), 16) == ident:
            return "\n".join(lines[1:]).rstrip() or None
    return None


def thread_stuck_error(who: str, worker: int | None, bounds: tuple[int, int], keys: list[int] | None, stuck_s: float,
                       timeout_s: float, stack: str | None) -> WorkerStuckError:
    """The error for a chunk that a worker thread did not deliver in time (``stuck_error`` for threads).

    ``who``: the thread, in words ("worker thread 1 of 2").
    """
    start, stop = bounds
    shown = "" if keys is None else f" (record keys {keys[:8]}{'...' if stop - start > 8 else ''})"
    answer = ("The thread ended as it was asked for its stack" if stack is None else
              f"The thread's Python stack (faulthandler, most recent call first):\n{stack}")
    message = (
        f"thresher {who} has not delivered positions [{start}, {stop}){shown} for {stuck_s:.1f} s, longer than "
        f"worker_timeout_s={timeout_s:g}: it is stuck (a read that never returns, a deadlock, an endless loop). "
        "A thread cannot be stopped: it is left behind (a daemon thread: it ends when its call returns, and it "
        "never keeps the process alive), the worker threads are unusable and the iterator is closed. Fix the "
        "cause (or raise worker_timeout_s if a chunk can take this long; None waits forever), then resume from "
        f"the last get_state().\n{answer}")
    return WorkerStuckError(message, worker=worker, pid=os.getpid(), positions=bounds,
                            record_keys=None if keys is None else keys[:8], stuck_s=stuck_s, stack=stack)


def exit_reason(code: int | None) -> str:
    """Why a worker's process ended, from its exit code (None: it did not exit).

    Example:
        >>> from thresher.loader.pool.watchdog import exit_reason
        >>> exit_reason(3)
        'exit code 3'
    """
    if code is None:
        return "its connection closed and it did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        crashes = (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL)
        hint = (" (the out-of-memory killer sends SIGKILL too)" if -code == signal.SIGKILL else
                " (a crash: the worker printed its Python stack to stderr)" if -code in crashes else "")
        return f"exit code {code}: killed by {name}{hint}"
    return f"exit code {code}"
