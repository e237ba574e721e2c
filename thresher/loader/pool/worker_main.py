"""What runs inside a worker process: compute chunks, send them back.

A worker receives ``(chunk_index, start, stop, released)`` tasks on its socket (``released``:
the result files the main process has dropped since its last message, which the worker may
make again, see :class:`~thresher.loader.pool.shm.ResultArena`; a negative index carries only
those), runs the
pipeline's pure :class:`~thresher.loader.chunk.ChunkProcessor` on them, in the order
received, and sends each result back (see :mod:`thresher.loader.pool.shm`: arrays travel
in shared memory). When the pipeline has a Batch and no Filter before it, the worker
also stacks the batches itself, so the main process receives finished batches whose
arrays are views onto shared memory: no copy at all in the main process.

A worker never decides anything: which chunks it computes and in which order they
are used is the main process's business, which is why the results do not depend on
the number of workers. It stops when its socket is closed (the main process closed
the pool, or died) and ignores SIGINT (Ctrl-C is the main process's to handle).
Its first message says it has loaded the pipeline (READY), for the watchdog.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
import signal
import socket
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle  # noqa: F401  (the payload needs it: imported once, in the fork server)
import numpy as np

from thresher.errors import TransformError, WorkerError
from thresher.loader.chunk import Chunk, ChunkProcessor, Reading
from thresher.loader.pool.remote_errors import describe_exception
from thresher.loader.pool.shm import RESULTS, Packed, pack, shared_memory_available
from thresher.loader.pool.stacking import stack_batches, worker_stages
from thresher.loader.pool.watchdog import listen_for_stack_requests
from thresher.loader.pool.wire import send
from thresher.loader.read_ahead import Pending, ReadAhead
from thresher.loader.read_options import ReadOptions
from thresher.transforms.batch import set_array_allocator

with contextlib.suppress(ImportError):  # what an ArrayRecordSource reads with: imported once, in the fork server
    from array_record.python import array_record_module  # noqa: F401

__all__ = ["ERROR", "OK", "WorkerSpec", "compute", "run", "worker_stages"]

OK, ERROR, READY = "ok", "error", "ready"  # READY: sent once, when the pipeline is loaded


@dataclass(frozen=True)
class WorkerSpec:
    """What every worker of a DataLoader needs; built once per DataLoader.

    Attributes:
        payload: the cloudpickled ChunkProcessor (without the operations after the Batch,
            which run in the main process).
        stack: workers stack whole batches (a Batch, no Filter before it, and chunks
            that are a whole number of batches).
        description: the pipeline, for messages.
        stages: the names of the stages whose end times a worker sends with each
            chunk (the processor's, then ``batch`` when it stacks, then ``pack``).
    """

    payload: bytes
    stack: bool
    description: str = ""
    stages: tuple[str, ...] = ()


def _record_key(processor: ChunkProcessor, position: int) -> int:
    sampler = processor.sampler
    keys, _ = sampler.record_keys(sampler.to_global(np.array([position], dtype=np.int64)))
    return int(keys[0])


def _unpicklable(processor: ChunkProcessor, chunk: Chunk, error: Exception) -> TransformError:
    ops = processor.plan.record_ops
    producer = ops[-1].name if ops else "the data source"
    for element, position in zip(chunk.elements, chunk.positions.tolist(), strict=False):
        try:
            pickle.dumps(element, protocol=5, buffer_callback=lambda _: False)
        except Exception as e:
            key = _record_key(processor, position)
            err = TransformError(
                f"the element at position {position} (record key {key}) cannot be sent from a worker "
                f"process to the main process: {type(e).__name__}: {e}. With worker_count > 0, what the "
                f"per-record operations return (last: {producer}) must be picklable: arrays, numbers, "
                "strings, bytes, and dicts, lists or tuples of them", record_key=key, position=position
            )
            err.__cause__ = e
            return err
    return TransformError(f"the results of positions [{chunk.start}, {chunk.stop}) cannot be sent from a "
                          f"worker process to the main process: {type(error).__name__}: {error}")


def compute(processor: ChunkProcessor, stack: bool, start: int, stop: int,
            reading: Reading | None = None) -> tuple[Packed, list[int]]:
    """Computes positions [start, stop) and packs the result for sending.

    ``reading``: the chunk's records, already read (see ReadAhead), or None to read
    them here. Returns the packed result and the stage end times
    (``time.monotonic_ns()``): the chunk's marks, then the end of stacking (when
    ``stack``) and of packing.
    """
    chunk = processor(start, stop) if reading is None else processor.transform(reading, start, stop)
    marks = chunk.marks if chunk.marks is not None else []
    chunk.marks = None
    out = chunk
    if stack:
        out = stack_batches(processor, chunk)
        marks.append(time.monotonic_ns())
    try:
        packed = pack(out)
    except Exception as e:
        raise _unpicklable(processor, chunk, e) from e
    marks.append(time.monotonic_ns())
    return packed, marks


def _send_error(sock: socket.socket, index: int, e: BaseException) -> None:
    send(sock, (ERROR, index, describe_exception(e)))


def _load(spec: WorkerSpec) -> ChunkProcessor:
    try:
        processor = pickle.loads(spec.payload)
    except BaseException as e:
        err = WorkerError(
            f"could not load the pipeline {spec.description} in the worker: {type(e).__name__}: {e}. "
            "Functions and classes defined in a module are sent by reference: that module must be "
            "importable in the worker (the main process's sys.path is used)"
        )
        err.__cause__ = e
        raise err from e
    return processor


_NOT_STARTED = object()  # a task queued beyond the read-ahead depth: its reads start when it comes within it


class _Tasks:
    """The tasks queued on the worker's connection, with their reads started ahead.

    The main process hands each worker a few chunks ahead (its buffer); the worker
    takes those already waiting on its socket (never waiting for more) and starts
    their reads, up to ``1 + ReadOptions.chunks_ahead`` chunks, so the reads of the
    next chunks wait while this one is transformed. The order is the order received.

    A message with a negative index carries only released result files (see
    :class:`~thresher.loader.pool.shm.ResultArena`): the main process sends it as soon
    as it has dropped a batch, and the worker reads every waiting message before each
    chunk, so the files are free for that chunk already.
    """

    def __init__(self, conn: Connection, ahead: ReadAhead | None, reads: ReadOptions | None) -> None:
        self._conn, self._ahead, self._reads = conn, ahead, reads
        self._queue: deque[tuple[int, int, int, Any]] = deque()
        self._depth = 1
        self._ended = False

    def _take(self) -> None:
        task = self._conn.recv()
        if task is None:
            self._ended = True
            return
        index, start, stop, released = task
        if released:  # result files the main process has dropped: this worker may make them again
            RESULTS.release(released)
        if index < 0:
            return
        if self._ahead is not None and self._reads is not None and not self._queue and self._depth == 1:
            self._depth = 1 + self._reads.chunks_ahead(stop - start)
        self._queue.append((index, start, stop, _NOT_STARTED if self._ahead is not None else None))

    def _start_reads(self) -> None:
        if self._ahead is None:
            return
        for i in range(min(self._depth, len(self._queue))):
            index, start, stop, started = self._queue[i]
            if started is _NOT_STARTED:
                try:
                    started = self._ahead.start(start, stop)
                except Exception as e:  # raised when the chunk is computed, in order
                    started = e
                self._queue[i] = (index, start, stop, started)

    def next(self) -> tuple[int, int, int, Pending | BaseException | None] | None:
        """The next task (None: the main process is done), after starting the reads of those queued."""
        while not self._queue:
            if self._ended:
                return None
            self._take()
        while not self._ended and self._conn.poll(0):  # what is waiting now: tasks, and files to make again
            self._take()
        self._start_reads()
        return self._queue.popleft()


def run(index: int, spec: WorkerSpec, conn: Connection, reads: ReadOptions | None = None,
        stacks: Connection | None = None) -> None:
    """The worker's main loop (the target of its Process).

    ``stacks``: where to print the worker's Python stack when the main process asks
    (SIGUSR1, see watchdog); kept open for the worker's life.
    """
    listen_for_stack_requests(stacks)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if shared_memory_available():  # batches stacked into the memory they are sent in: no copy to pack them
        set_array_allocator(RESULTS.empty)
    with contextlib.suppress(AttributeError, ValueError, OSError):
        faulthandler.enable()  # a crash in an operation (segfault, abort) prints the worker's Python stack
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    processor: ChunkProcessor | None = None
    load_error: BaseException | None = None
    try:
        processor = _load(spec)
    except BaseException as e:
        load_error = e
    threads = 0 if reads is None else reads.num_threads or 0
    ahead = ReadAhead(processor, threads, reads.timeout_s) if processor is not None and threads and reads else None
    tasks = _Tasks(conn, ahead, reads)
    try:
        # The watchdog's clock for the first chunk starts now, not at the fork; a pipeline that could not
        # be loaded is said at once (a warm start asks before it hands out a chunk), and again per task.
        send(sock, (READY, -1, None if load_error is None else describe_exception(load_error)))
        while True:
            task = tasks.next()
            if task is None:
                return
            chunk_index, start, stop, started = task
            try:
                if processor is None:
                    assert load_error is not None
                    raise load_error
                if isinstance(started, BaseException):
                    raise started
                reading = None if started is None or ahead is None else ahead.finish(started)
                packed, marks = compute(processor, spec.stack, start, stop, reading)
            except BaseException as e:
                _send_error(sock, chunk_index, e)
                continue
            try:
                send(sock, (OK, chunk_index, packed.layout, packed.sizes, marks, packed.idents), packed.meta,
                     packed.fds)
            finally:
                packed.close()
    except (EOFError, OSError):
        return  # the main process closed the pool (or died): nothing more to do
    finally:
        if ahead is not None:
            ahead.close()
        sock.close()
