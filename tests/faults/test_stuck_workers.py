"""Stuck, not dead: a worker or a read that never finishes is an error within the timeout, not a hang.

Real worker processes are stopped with SIGSTOP (as a worker stuck in a network filesystem
or a deadlocked C library would be) or held in the user's own function; a real source
blocks its reads on an Event. Each time the loader raises a specific error naming the
worker, the chunk's positions and record keys and where it hangs, within the timeout
plus a few seconds, and leaves no process and no /dev/shm entry behind.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from typing import Any

import numpy as np
import pytest

import thresher as th
from thresher.errors import ConfigError, ReadTimeoutError, WorkerStuckError

pytestmark = pytest.mark.usefixtures("_helpers_started")

N = 64


def _workers() -> list[Any]:
    return [p for p in multiprocessing.active_children() if p.name.startswith("thresher-worker-")]


def _loader(ops: list[Any], timeout_s: float | None, *, chunk_size: int = 8, workers: int = 2) -> th.DataLoader:
    return th.DataLoader(th.sources.RangeDataSource(0, N), th.IndexSampler(N, shuffle=True, seed=5),
                         [*ops, th.Batch(4)], worker_count=workers, chunk_size=chunk_size,
                         worker_timeout_s=timeout_s, warm_start=False)  # every chunk in a worker: their watchdog


def _thresher_shm() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if "thresher" in n} if os.path.isdir("/dev/shm") else set()


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    out.append(pid)
        except OSError:
            pass
    return out


def hang_on_13(x: int) -> int:
    """The user's function that never returns for one record."""
    if x == 13:
        time.sleep(3600)
    return x


def slow_after_8(x: int) -> int:
    """0.3 s a record, except in each worker's first chunk (whose clock also covers the worker's start)."""
    if x >= 8:
        time.sleep(0.3)
    return x


def test_sigstopped_workers_are_a_worker_stuck_error_naming_worker_chunk_and_keys() -> None:
    loader = _loader([], timeout_s=2.0)
    it = iter(loader)
    for _ in range(4):  # chunks 0 and 1 (positions [0, 16)) came: both workers have started
        next(it)
    by_index = {int(p.name.rsplit("-", 1)[1]): p.pid for p in _workers()}
    pids = sorted(by_index.values())
    assert sorted(by_index) == [0, 1]
    shm_before = _thresher_shm()
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    with pytest.raises(WorkerStuckError) as info:
        for _ in range(N):
            next(it)
    latency = time.monotonic() - stopped
    assert latency < 2.0 + 5.0, f"the error took {latency:.1f} s"
    e = info.value
    assert isinstance(e, th.errors.WorkerError)
    assert e.worker is not None and e.pid == by_index[e.worker]
    assert e.positions is not None and e.positions[1] - e.positions[0] == 8 and e.positions[0] % 8 == 0
    start, stop = e.positions
    expected = [loader.sampler[p].record_key for p in range(start, stop)]
    assert e.record_keys == expected
    message = str(e)
    assert f"worker {e.worker} of 2 (pid {e.pid})" in message
    assert f"positions [{start}, {stop})" in message and str(expected[:3])[1:-1] in message
    assert "worker_timeout_s=2" in message and "did not answer SIGUSR1" in message and "SIGSTOP" in message
    assert "State: T" in message  # /proc shows the worker is stopped
    other = 1 - e.worker
    assert f"worker {other} (pid {by_index[other]}) is stuck too: /proc/{by_index[other]}: State: T" in message
    assert e.stuck_s is not None and 2.0 <= e.stuck_s < 7.0 and e.stack is None
    assert it.get_state()["position"] == start  # every batch before the stuck chunk came: resume there
    assert _alive(pids) == [] and _workers() == []  # SIGKILL ended the stopped workers
    assert _thresher_shm() <= shm_before


def test_a_worker_stuck_in_python_shows_the_users_function_in_its_stack() -> None:
    loader = _loader([hang_on_13], timeout_s=1.5)
    started = time.monotonic()
    batches = []
    with pytest.raises(WorkerStuckError) as info:
        for b in loader:
            batches.append(b)
    assert time.monotonic() - started < 1.5 + 8.0
    e = info.value
    position = next(p for p in range(N) if loader.sampler[p].record_key == 13)
    assert e.positions == (position // 8 * 8, position // 8 * 8 + 8)
    assert 13 in (e.record_keys or [])
    assert e.stack is not None and "in hang_on_13" in e.stack and "test_stuck_workers.py" in e.stack
    assert "in hang_on_13" in str(e) and "State:" in str(e)
    assert len(batches) * 4 <= position
    assert _workers() == []


class Blocking:
    """A source whose reads of one key wait on an Event (a storage that never answers)."""

    def __init__(self, key: int) -> None:
        self.key, self.release = key, threading.Event()

    def __len__(self) -> int:
        return N

    def __getitems__(self, keys: list[int]) -> list[int]:
        if self.key in keys:
            self.release.wait(60)
        return list(keys)

    def __getitem__(self, key: int) -> int:
        return self.__getitems__([key])[0]


def test_a_read_thread_that_never_returns_is_a_read_timeout_error_with_keys_and_stack() -> None:
    source = Blocking(key=21)
    loader = th.DataLoader(source, th.IndexSampler(N, shuffle=True, seed=5), [th.Batch(4)], chunk_size=8,
                           read_options=th.ReadOptions(num_threads=2, timeout_s=1.0))
    started = time.monotonic()
    try:
        with pytest.raises(ReadTimeoutError) as info:
            for _ in loader:
                pass
        assert time.monotonic() - started < 1.0 + 8.0
    finally:
        source.release.set()
    e = info.value
    assert isinstance(e, TimeoutError) and isinstance(e, th.errors.SourceError)
    assert 21 in e.record_keys and "21" in str(e) and "timeout_s=1.0" in str(e)
    assert any("in __getitems__" in s and "release.wait" in s for s in e.stacks)
    assert "self.release.wait(60)" in str(e)


def test_a_slow_pipeline_that_keeps_delivering_never_trips_the_per_chunk_timeout() -> None:
    # 8 chunks of 4 records, 4 per worker; the slow ones take ~1.2 s each: a worker needs ~3.6 s
    # in all, more than the timeout, yet no error (the clock is per chunk).
    def loader(workers: int, timeout_s: float | None) -> th.DataLoader:
        return th.DataLoader(th.sources.RangeDataSource(0, 32), th.IndexSampler(32), [slow_after_8, th.Batch(4)],
                             worker_count=workers, chunk_size=4, worker_timeout_s=timeout_s)

    started = time.monotonic()
    got = [b.tolist() for b in loader(2, 3.0)]
    assert time.monotonic() - started > 3.0
    assert got == [list(range(i, i + 4)) for i in range(0, 32, 4)]


def test_none_waits_for_a_worker_that_is_stopped_and_continued() -> None:
    loader = _loader([], timeout_s=None)
    it = iter(loader)
    got = [next(it).tolist()]
    pids = [p.pid for p in _workers()]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    resume = threading.Timer(2.5, lambda: [os.kill(pid, signal.SIGCONT) for pid in pids])
    resume.start()
    try:
        got += [b.tolist() for b in it]
    finally:
        resume.join()
    ref = [b.tolist() for b in _loader([], timeout_s=None, workers=0)]
    assert got == ref


@pytest.mark.parametrize("bad", [0, -1.0, True, "300", float("inf"), float("nan")])
def test_worker_timeout_s_must_be_a_positive_number_or_none(bad: Any) -> None:
    with pytest.raises(ConfigError, match="worker_timeout_s"):
        _loader([], timeout_s=bad)


def test_the_default_watchdog_is_generous() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 4), th.IndexSampler(4), [np.int64])
    assert loader.worker_timeout_s == 300.0


def test_dataset_prefetch_takes_the_watchdog_limit() -> None:
    ds = th.Dataset.range(N).map(hang_on_13).batch(8).prefetch(worker_count=2, worker_timeout_s=1.5)
    assert "worker_timeout_s=1.5" in ds.nodes[-1].describe()
    started = time.monotonic()
    with pytest.raises(WorkerStuckError) as info:
        for _ in ds:
            pass
    assert time.monotonic() - started < 1.5 + 8.0
    assert info.value.stack is not None and "in hang_on_13" in info.value.stack
    assert _workers() == []
    with pytest.raises(ConfigError, match="worker_timeout_s"):
        th.Dataset.range(4).prefetch(worker_count=2, worker_timeout_s=0)
