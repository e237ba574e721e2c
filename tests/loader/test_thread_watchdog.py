"""worker_mode="thread" has the watchdog too: a chunk a worker thread does not deliver within
worker_timeout_s is a WorkerStuckError with that thread's stack, never a hang.

Real threads run a real function that blocks on an Event for one record; each test sets the
Event at its end, so the stuck thread (which the loader leaves behind: a thread cannot be
stopped) ends before the next test. The blocking wait itself has a bound (``HANG_S``) far above
the watchdog's limit, so that a regression fails the test instead of hanging the suite.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import thresher as th
from thresher.errors import WorkerError, WorkerStuckError
from thresher.loader.thread_probe import measure_pair

N = 64
TIMEOUT_S = 1.0
HANG_S = 60.0  # "never" for the watchdog; a bound for the test if the watchdog fails


class Hang:
    """A map that never returns (until released) for one record, sleeping ``sleep_s`` on the others."""

    def __init__(self, key: int, sleep_s: float = 0.0) -> None:
        self.key, self.sleep_s = key, sleep_s
        self.release = threading.Event()
        self.entered = threading.Event()

    def __call__(self, x: int) -> int:
        if x == self.key:
            self.entered.set()
            self.wait_for_release()
        elif self.sleep_s:
            time.sleep(self.sleep_s)  # releases the interpreter lock: threads pay
        return x

    def wait_for_release(self) -> None:
        self.release.wait(HANG_S)


@pytest.fixture
def hang() -> Iterator[Hang]:
    h = Hang(13)
    yield h
    h.release.set()  # the stuck thread returns and ends


def _stuck_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("thresher-") and t.is_alive()]


def _run_until_stuck(it: Any) -> tuple[list[Any], WorkerStuckError, float]:
    got: list[Any] = []
    while True:
        started = time.monotonic()
        try:
            got.append(next(it))
        except WorkerStuckError as e:
            return got, e, time.monotonic() - started


def _assert_names_the_stuck_thread(e: WorkerStuckError, waited: float) -> None:
    assert e.positions == (8, 16) and e.record_keys == list(range(8, 16)), (e.positions, e.record_keys)
    assert e.worker == 1  # chunk 1 of 2 threads
    assert TIMEOUT_S <= e.stuck_s <= waited + 0.1
    assert waited < TIMEOUT_S + 5.0, waited
    assert e.stack is not None and "in wait_for_release" in e.stack, e.stack
    text = str(e)
    assert "worker thread 1 of 2" in text and "worker_timeout_s=1" in text and "left behind" in text, text
    assert "in wait_for_release" in text


def test_a_thread_that_never_returns_is_a_worker_stuck_error_with_its_stack(hang: Hang) -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, N), th.IndexSampler(N), [hang, th.Batch(4)],
                           worker_count=2, worker_mode="thread", chunk_size=8, worker_timeout_s=TIMEOUT_S)
    it = iter(loader)
    got, e, waited = _run_until_stuck(it)
    assert [b.tolist() for b in got] == [[0, 1, 2, 3], [4, 5, 6, 7]]  # chunk 0 came, chunk 1 is stuck
    _assert_names_the_stuck_thread(e, waited)
    assert it.get_state()["position"] == 8  # resume there once the cause is fixed
    with pytest.raises(StopIteration):  # the iterator is closed
        next(it)
    stuck = [t for t in _stuck_threads() if t.name == "thresher-worker-thread-1"]
    assert stuck, "the stuck thread is left behind (documented): a thread cannot be stopped"
    hang.release.set()
    for t in stuck:
        t.join(5.0)
        assert not t.is_alive(), "released, the stuck thread returns and ends"
    state = it.get_state()
    with iter(th.DataLoader(th.sources.RangeDataSource(0, N), th.IndexSampler(N), [hang, th.Batch(4)],
                            worker_count=2, worker_mode="thread", chunk_size=8)) as it2:
        it2.set_state(state)
        assert np.concatenate(list(it2)).tolist() == list(range(8, N))


def test_the_pool_is_unusable_after_the_watchdog_fired(hang: Hang) -> None:
    from thresher.loader.producers.threads import ThreadPoolProducer

    loader = th.DataLoader(th.sources.RangeDataSource(0, N), th.IndexSampler(N), [hang, th.Batch(4)])
    pool = ThreadPoolProducer(loader.engine.processor, 0, N, 8, 2, timeout_s=TIMEOUT_S)
    assert pool.next_chunk() is not None
    started = time.monotonic()
    with pytest.raises(WorkerStuckError):
        pool.next_chunk()
    closed = time.monotonic()
    assert closed - started < TIMEOUT_S + 3.5  # close() does not wait for the stuck thread (JOIN_S is 5 s)
    with pytest.raises(WorkerError, match="unusable: worker thread 1 is stuck on positions \\[8, 16\\]"):
        pool.next_chunk()
    pool.close()


def test_dataset_prefetch_on_threads_has_the_watchdog(hang: Hang) -> None:
    ds = (th.Dataset.range(N).map(hang).batch(4)
          .prefetch(worker_count=2, worker_mode="thread", worker_timeout_s=TIMEOUT_S))
    it = iter(ds)
    got, e, waited = _run_until_stuck(it)
    assert [x for b in got for x in b.tolist()] == list(range(len(got) * 4))
    assert e.record_keys is not None and 13 in range(*e.positions), e.positions
    assert waited < TIMEOUT_S + 5.0 and e.stack is not None and "in wait_for_release" in e.stack
    assert "worker thread" in str(e) and "left behind" in str(e)


def test_worker_count_auto_on_threads_has_the_watchdog() -> None:
    hang = Hang(200, sleep_s=0.002)  # past the chunks measured here; the sleep makes workers pay
    try:
        loader = th.DataLoader(th.sources.RangeDataSource(0, 4 * N), th.IndexSampler(4 * N), [hang, th.Batch(4)],
                               worker_count="auto", worker_mode="thread", chunk_size=8, worker_timeout_s=TIMEOUT_S)
        it = iter(loader)
        got, e, waited = _run_until_stuck(it)
        stats = it.stats()
        assert stats.worker_mode == "thread" and stats.worker_count >= 1, stats
        assert e.positions == (200, 208) and waited < TIMEOUT_S + 5.0
        assert e.stack is not None and "in wait_for_release" in e.stack
        assert np.concatenate(got).tolist() == list(range(200))
    finally:
        hang.release.set()


def test_the_helper_thread_of_the_mode_measurement_has_the_watchdog() -> None:
    """worker_count="auto" without a worker_mode computes two chunks at once to choose one: the helper
    thread's chunk is watched like a worker thread's (the one on the calling thread cannot be)."""
    hang = Hang(3)
    try:
        loader = th.DataLoader(th.sources.RangeDataSource(0, N), th.IndexSampler(N), [hang, th.Batch(4)])
        processor = loader.engine.processor
        started = time.monotonic()
        with pytest.raises(WorkerStuckError) as info:
            measure_pair(processor, (0, 8), (8, 16), worker_timeout_s=TIMEOUT_S,
                         keys=loader.engine.first_keys)
        assert time.monotonic() - started < TIMEOUT_S + 5.0
        e = info.value
        assert e.positions == (0, 8) and e.record_keys == list(range(8)) and e.worker is None
        assert e.stack is not None and "in wait_for_release" in e.stack
        assert "measuring threads against processes" in str(e)
    finally:
        hang.release.set()


def test_without_a_timeout_a_slow_thread_is_waited_for() -> None:
    """worker_timeout_s=None waits forever (here: for a chunk that takes twice a short limit)."""
    slow = Hang(13)
    threading.Timer(0.5, slow.release.set).start()
    loader = th.DataLoader(th.sources.RangeDataSource(0, N), th.IndexSampler(N), [slow, th.Batch(4)],
                           worker_count=2, worker_mode="thread", chunk_size=8, worker_timeout_s=None)
    with iter(loader) as it:
        assert np.concatenate(list(it)).tolist() == list(range(N))
