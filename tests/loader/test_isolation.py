"""Isolation by default: with worker processes, no operation runs in the training process.

An operation that calls ``os._exit``, segfaults (``ctypes.string_at(0)``) or raises, in the
very first chunk or a later one, with 1 or 2 workers, through a DataLoader or
``Dataset.prefetch``: the training process (this one) goes on, and gets a WorkerError naming
the worker, its exit reason and the chunk's positions and record keys (or the operation's own
error, with its record key). Real worker processes; nothing may be left behind (no_leaks).
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np
import pytest

import thresher as th
from thresher.errors import TransformError, WorkerError

pytestmark = pytest.mark.usefixtures("no_leaks")

SEED = 11
N = {"loader": 64, "dataset": 1024}
CHUNK = {"loader": 8, "dataset": 256}  # the Dataset's default chunk: a multiple of 256


class CrashOn:
    """Fails on one record key: ``exit`` (os._exit(3)), ``segfault`` or ``raise``; else the
    element with the pid of the process that computed it."""

    def __init__(self, key: int, how: str) -> None:
        self.key, self.how = key, how

    def __call__(self, x: int) -> np.ndarray:
        if x == self.key:
            if self.how == "exit":
                os._exit(3)
            elif self.how == "segfault":
                ctypes.string_at(0)
            else:
                raise ValueError(f"cannot handle record {x}")
        return np.array([x, os.getpid()], dtype=np.int64)


def _build(front: str, key: int, how: str, workers: int) -> Any:
    n = N[front]
    if front == "loader":
        return th.DataLoader(th.sources.RangeDataSource(0, n), th.IndexSampler(n, shuffle=True, seed=SEED),
                             [CrashOn(key, how), th.Batch(4)], worker_count=workers, chunk_size=CHUNK[front])
    return (th.Dataset.source(th.sources.RangeDataSource(0, n)).shuffle(SEED).map(CrashOn(key, how)).batch(4)
            .prefetch(worker_count=workers))


def _stream(front: str) -> list[int]:
    """The record keys in stream order (worker_count=0): position p holds key stream[p]."""
    return [int(k) for b in _build(front, -1, "raise", 0) for k in np.asarray(b)[:, 0]]


def _collect(iterable: Any) -> tuple[list[Any], BaseException]:
    got: list[Any] = []
    it = iter(iterable)
    try:
        for batch in it:
            got.append(batch)
    except Exception as e:
        return got, e
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
    raise AssertionError("the stream ended without an error")


@pytest.mark.parametrize("front", ["loader", "dataset"])
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("position", [0, 21], ids=["first-chunk", "later-chunk"])
@pytest.mark.parametrize("how, reason", [("exit", "exit code 3"), ("segfault", "killed by SIGSEGV"),
                                         ("raise", None)])
def test_a_crash_in_an_operation_is_the_workers_never_the_training_process(
        front: str, workers: int, position: int, how: str, reason: str | None) -> None:
    stream = _stream(front)
    position *= CHUNK[front] // 8  # the same chunk of either front
    key, chunk = stream[position], CHUNK[front]
    got, e = _collect(_build(front, key, how, workers))
    for batch in got:  # every batch before the error came from a worker
        assert os.getpid() not in np.asarray(batch)[:, 1].tolist()
    start = position // chunk * chunk
    worker = (position // chunk) % workers
    chunk_keys = stream[start:start + 8]  # the first 8 are named
    if how == "raise":
        assert isinstance(e, TransformError) and isinstance(e.__cause__, ValueError)
        assert f"record key {key}" in str(e) and f"worker {worker} of {workers}" in str(e)
        return
    assert isinstance(e, WorkerError), repr(e)
    message = str(e)
    assert f"worker {worker} of {workers}" in message and reason in message
    more = "..." if chunk > 8 else ""
    assert f"while computing positions [{start}, {start + chunk}) (record keys {chunk_keys}{more})" in message
    assert (e.worker, e.positions, e.record_keys) == (worker, (start, start + chunk), chunk_keys)
    assert e.exit_code == (3 if how == "exit" else -11) and e.pid is not None and e.pid != os.getpid()
    assert len(got) <= start // 4  # no batch at or after the crashed chunk


def test_the_loader_goes_on_after_a_crash_from_the_last_state() -> None:
    stream = _stream("loader")
    loader = _build("loader", stream[21], "exit", 2)
    it = iter(loader)
    states = []
    with pytest.raises(WorkerError):
        while True:
            next(it)
            states.append(it.get_state())
    fixed = th.DataLoader(loader.data_source, loader.sampler, [CrashOn(-1, "exit"), th.Batch(4)], worker_count=2,
                          chunk_size=CHUNK["loader"])
    with iter(fixed) as again:
        again.set_state(states[-1])
        rest = [k for b in again for k in np.asarray(b)[:, 0].tolist()]
    assert rest == stream[4 * len(states):]
