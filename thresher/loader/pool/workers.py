"""The worker processes behind ``WorkerPoolProducer`` (thresher.loader.producers.processes).

``WorkerProcesses`` starts the processes (see worker_start), hands each its tasks (a chunk's
index and positions) through its socket and takes the results back in order, through
shared memory (see wire, shm).

Failure and shutdown (docs/architecture.md, invariants 6 and 7):

- the main process waits on the worker's socket *and* every worker's process
  sentinel, so a worker that dies (SIGKILL, os._exit, a segfault, the OOM killer)
  is a WorkerError naming it and its exit code at once, never a hang;
- a worker that is alive but stuck (stopped, deadlocked, a read that never returns)
  is a WorkerStuckError after ``worker_timeout_s`` without the chunk, with the
  worker's Python stack (see watchdog);
- an exception in a worker comes back with its traceback (see remote_errors);
- ``shutdown()`` (run by the producer's ``close()``, by a ``weakref.finalize`` when the
  producer is garbage collected, and at interpreter exit) closes the sockets, which ends
  idle workers, then terminates and finally kills what is left: no worker outlives it by
  more than about a second. Workers are daemonic processes and also exit on their own when
  the main process dies (their socket closes). Shared memory cannot leak (memfd,
  see shm).

How workers are started (forkserver, preloads): see worker_start.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from thresher.errors import WorkerError
from thresher.loader.chunk import Chunk
from thresher.loader.main_module import GUARD_HINT, missing_guard, unimportable_main
from thresher.loader.pool import wire
from thresher.loader.pool.remote_errors import rebuild_exception
from thresher.loader.pool.shm import unpack
from thresher.loader.pool.watchdog import (
    DEFAULT_WORKER_TIMEOUT_S,
    START_TIMEOUT_S,
    ask_for_stack,
    exit_reason,
    process_state,
    stack_pipe,
    stuck_error,
)
from thresher.loader.pool.worker_main import ERROR, READY, WorkerSpec, run
from thresher.loader.pool.worker_start import context, prestart
from thresher.loader.read_options import ReadOptions

__all__ = ["WorkerProcesses"]

_POLL_S = 1.0  # how often a blocked wait wakes up (worker deaths wake it at once anyway)
_GRACE_S = 0.05  # idle workers exit on their own this fast once their socket closes
_TERM_S = 1.0


class WorkerProcesses:
    """The worker processes and the main process's ends of their sockets and stack pipes.

    ``timeout_s``: seconds a chunk may stay a worker's current work (None: no limit);
    ``keys(start, stop)``: the first record keys of positions [start, stop), for the errors.
    """

    def __init__(self, spec: WorkerSpec, count: int, asked: int | None = None,
                 reads: ReadOptions | None = None, timeout_s: float | None = DEFAULT_WORKER_TIMEOUT_S,
                 keys: Callable[[int, int], list[int]] | None = None) -> None:
        why = unimportable_main()
        if why is not None:
            raise WorkerError(f"thresher cannot start worker processes: {why}")
        prestart()  # the fork server, with the main module preloaded (see main_preload), if not yet there
        ctx = context()
        self.count = count
        self.asked = count if asked is None else asked
        self.delivered = [False] * count  # whether worker w ever sent a message
        self.conns: list[Connection] = []
        self.socks: list[socket.socket] = []
        self.procs: list[Any] = []
        self.pids: list[int] = []
        self.given: list[deque[tuple[int, int, int]]] = [deque() for _ in range(count)]  # not yet taken back
        # the result files worker w may make again: their arrays are gone here (see shm.ResultArena)
        self.released: list[deque[int]] = [deque() for _ in range(count)]
        self.given_at: list[deque[float]] = [deque() for _ in range(count)]  # when each was handed out
        self.taken_at = [0.0] * count  # when worker w's last result was taken back
        self.ready_at: list[float | None] = [None] * count  # when worker w said it loaded the pipeline
        self.stacks: list[Connection] = []
        self.timeout_s, self.keys = timeout_s, keys
        self.closed = False
        self.owner = os.getpid()
        try:
            for w in range(count):
                parent, child = ctx.Pipe(duplex=True)  # a socket pair: it can carry descriptors
                self.conns.append(parent)
                stacks, stack_writer = stack_pipe(ctx)
                self.stacks.append(stacks)
                try:
                    proc = ctx.Process(target=run, args=(w, spec, child, reads, stack_writer),
                                       name=f"thresher-worker-{w}", daemon=True)
                    proc.start()
                    self.procs.append(proc)
                    self.pids.append(proc.pid)
                finally:
                    child.close()
                    stack_writer.close()
                self.socks.append(socket.socket(fileno=os.dup(parent.fileno())))
        except BaseException:
            self.shutdown()
            raise

    def poll_ready(self) -> bool:
        """Whether every worker has loaded the pipeline (or died: ``receive`` reports that); never waits.

        Only before the first task: a worker's first message is always READY. Raises the
        worker's error when it could not load the pipeline.
        """
        for w in range(self.count):
            if self.ready_at[w] is not None:
                continue
            if self.procs[w].exitcode is not None:
                return True
            try:
                if not self.conns[w].poll(0):
                    return False
                header, _, fds = wire.receive(self.socks[w])
            except (EOFError, OSError):
                return True
            for fd in fds:
                os.close(fd)
            self.ready_at[w] = time.monotonic()
            if len(header) > 2 and header[2] is not None:  # the worker could not load the pipeline
                raise rebuild_exception(header[2], self.where(w))
        return True

    def where(self, w: int) -> str:
        if self.count == self.asked:
            return f"worker {w} of {self.count} (pid {self.pids[w]})"
        return (f"worker {w} (pid {self.pids[w]}; {self.count} of the worker_count={self.asked} workers "
                f"were started, as the stream has only {self.count} chunk{'s' if self.count > 1 else ''})")

    def send(self, w: int, task: tuple[int, int, int]) -> None:
        self.given[w].append(task)
        self.given_at[w].append(time.monotonic())
        with contextlib.suppress(OSError):  # the worker is gone; receive() reports it
            self.conns[w].send((*task, self._released(w)))

    def _released(self, w: int) -> list[int]:
        released, free = self.released[w], []
        while released:  # filled from any thread (a finalizer): take what is there now
            free.append(released.popleft())
        return free

    def send_released(self) -> None:
        """Tells every worker at once which of its result files this process has dropped (a
        message of their own, index -1), so that its next chunk can be made in them."""
        for w in range(self.count):
            if self.released[w]:
                with contextlib.suppress(OSError):  # the worker is gone; receive() reports it
                    self.conns[w].send((-1, 0, 0, self._released(w)))

    def _last_task(self, w: int) -> tuple[str, tuple[int, int] | None]:
        """What the dead worker ``w`` was doing, and the positions of the first task it did not deliver."""
        delivered = set()
        sock = self.socks[w]
        try:
            while self.conns[w].poll(0):
                header, _, fds = wire.receive(sock)
                delivered.add(header[1])
                for fd in fds:
                    os.close(fd)
        except (EOFError, OSError, ValueError):
            pass
        for index, start, stop in self.given[w]:
            if index not in delivered:
                return f"while computing positions [{start}, {stop})", (start, stop)
        return "while idle", None

    def _keys(self, bounds: tuple[int, int]) -> list[int] | None:
        if self.keys is not None:
            with contextlib.suppress(Exception):  # the error is about the worker: never hide it
                return self.keys(*bounds)
        return None

    def _died(self, w: int, bounds: tuple[int, int]) -> WorkerError:
        """The error for worker ``w``, dead while the loader waited for positions ``bounds``.

        It names the worker, its exit reason (the signal's name for a crash) and the positions
        and first record keys of the chunk it was computing (attributes too: ``worker``, ``pid``,
        ``exit_code``, ``positions``, ``record_keys``).
        """
        proc = self.procs[w]
        proc.join(_TERM_S)
        doing, computing = self._last_task(w)
        positions = computing or bounds
        keys = self._keys(positions)
        if keys is not None:
            more = "..." if positions[1] - positions[0] > len(keys) else ""
            doing += f" (record keys {keys}{more})"
        needed = f"positions [{bounds[0]}, {bounds[1]})"
        if computing != bounds:
            doing += f"; the loader needed {needed} next"
        if not self.delivered[w] and proc.exitcode == 1 and missing_guard():
            err = WorkerError(
                f"thresher {self.where(w)} exited (exit code 1) before its first chunk: {GUARD_HINT}. "
                "The iterator is closed")
        else:
            err = WorkerError(
                f"thresher {self.where(w)} died ({exit_reason(proc.exitcode)}) {doing}. A worker dies "
                "like this when an operation calls os._exit or crashes the interpreter (segmentation fault), "
                "or when the system kills it (out of memory). The training process is unharmed: the "
                "iterator is closed; to go on, restore the last get_state() into a new iterator"
            )
        err.worker, err.pid, err.exit_code = w, self.pids[w], proc.exitcode
        err.positions, err.record_keys = positions, keys
        return err

    def receive(self, w: int, index: int, bounds: tuple[int, int]) -> tuple[Chunk, list[int], int, int]:
        """Chunk ``index`` (positions ``bounds``), the next message of worker ``w``.

        Returns the chunk, the worker's stage end times, the time (monotonic ns) the
        message was there to read, and its size in bytes (pickle and shared memory).
        """
        while True:
            self._wait(w, bounds)
            there = time.monotonic_ns()
            try:
                header, meta, fds = wire.receive(self.socks[w])
            except wire.TooManyDescriptors as e:  # the worker lives: not a death
                raise WorkerError(f"internal error: {self.where(w)} sent the result of positions "
                                  f"[{bounds[0]}, {bounds[1]}) in a message that could not be received ({e}). "
                                  "The iterator is closed; please report it") from None
            except (EOFError, OSError):
                raise self._died(w, bounds) from None
            if header[0] != READY:
                break
            self.ready_at[w] = time.monotonic()
        self.given[w].popleft()
        self.given_at[w].popleft()
        self.taken_at[w] = time.monotonic()
        self.delivered[w] = True
        if header[0] == ERROR:
            for fd in fds:
                os.close(fd)
            raise rebuild_exception(header[2], self.where(w))
        _, got, layout, sizes, marks, idents = header
        if len(fds) != len(sizes):
            for fd in fds:
                os.close(fd)
            raise self._died(w, bounds)
        if got != index:
            for fd in fds:
                os.close(fd)
            raise WorkerError(f"internal error: {self.where(w)} sent chunk {got}, expected {index}")
        chunk = unpack(meta, layout, sizes, fds, idents, self.released[w].append)
        assert isinstance(chunk, Chunk)
        return chunk, marks, there, len(meta) + sum(sizes)

    def _wait(self, w: int, bounds: tuple[int, int]) -> None:
        """Waits for worker ``w``'s next message; raises if a worker dies or ``w`` is stuck."""
        conn = self.conns[w]
        if conn.poll(0):
            return
        sentinels = {p.sentinel: i for i, p in enumerate(self.procs)}
        waitables: list[Any] = [conn, *sentinels]
        # The chunk became w's current work when w had started, the chunk was handed out and
        # w's previous result was taken back, whichever came last (the clock never starts early).
        ready = self.ready_at[w]
        since = max(self.given_at[w][0] if self.given_at[w] else time.monotonic(), self.taken_at[w], ready or 0.0)
        limit = self.timeout_s
        if limit is not None and ready is None:
            limit = max(limit, START_TIMEOUT_S)
        while True:
            left = None if limit is None else since + limit - time.monotonic()
            if left is not None and left <= 0:
                raise self._stuck(w, bounds, time.monotonic() - since)
            got = wait(waitables, timeout=_POLL_S if left is None else min(_POLL_S, left))
            if conn in got or (got and conn.poll(0)):  # what w sent before any death is delivered first
                return
            dead = [sentinels[s] for s in got if s in sentinels]
            if dead:
                raise self._died(dead[0], bounds)
            if got:
                return

    def _stuck(self, w: int, bounds: tuple[int, int], stuck_s: float) -> WorkerError:
        """The error for worker ``w``, alive but without the chunk ``bounds`` for ``stuck_s`` seconds."""
        assert self.timeout_s is not None
        pid = self.pids[w]
        stack = ask_for_stack(pid, self.stacks[w])
        keys = self._keys(bounds)
        others = [f"worker {i} (pid {p}) is stuck too: /proc/{p}: {state}" for i, p in enumerate(self.pids)
                  if i != w and (state := process_state(p)).startswith(("State: T", "State: t", "State: D"))]
        return stuck_error(self.where(w), w, pid, bounds, keys, stuck_s, self.timeout_s, stack, others,
                           starting=self.ready_at[w] is None)

    def shutdown(self) -> None:
        """Stops every worker (idempotent, bounded: about a second at most)."""
        if self.closed:
            return
        self.closed = True
        for s in self.socks:
            s.close()
        for r in self.stacks:
            r.close()
        for c in self.conns:
            c.close()  # idle workers see the end of their socket and exit
        if os.getpid() != self.owner:
            return  # a fork of the main process: the workers are not its children
        deadline = time.monotonic() + _GRACE_S
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.exitcode is None:  # a stopped worker (SIGSTOP) would not see SIGTERM until continued
                stopped = process_state(p.pid).startswith(("State: T", "State: t"))
                p.kill() if stopped else p.terminate()
        deadline = time.monotonic() + _TERM_S
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.exitcode is None:
                p.kill()
                p.join(_TERM_S)
        for p in self.procs:
            with contextlib.suppress(ValueError):
                p.close()
