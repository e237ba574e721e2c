"""Packed batches assembled ahead on a thread (workers): the same batches, states and stats as in process."""

from __future__ import annotations

import gc
import json
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.dataset.spec import tokens_of
from tests.helpers import digest
from tests.loader import leaks
from thresher.dataset.hand_over import HandOver

D = th.Dataset


def _packed(n: int, seq_len: int, window: int, batch: int, drop: bool) -> th.Dataset:
    return D.range(n).shuffle(seed=5).map(tokens_of).pack(seq_len, window=window).batch(batch, drop_remainder=drop)


def _walk(it: Any, limit: int = 10**6) -> list[tuple[str, str, str]]:
    """(batch digest, state after it, packing stats after it) for each batch."""
    out = []
    for _ in range(limit):
        try:
            b = next(it)
        except StopIteration:
            break
        out.append((digest(b), json.dumps(it.get_state(), sort_keys=True), str(it.packing_stats())))
    return out


def _with(ds: th.Dataset, workers: int, mode: str) -> th.Dataset:
    return ds.prefetch(worker_count=workers, worker_mode=mode) if workers else ds


@pytest.mark.parametrize(("workers", "mode"), [(1, "process"), (2, "process"), (2, "thread")])
def test_same_batches_states_and_stats_as_in_process(workers: int, mode: str) -> None:
    ds = _packed(600, 80, 37, 3, False)
    expected = _walk(iter(ds))
    assert len(expected) > 40
    with iter(_with(ds, workers, mode)) as it:
        assert it.get_state() == iter(ds).get_state()  # before the first batch too
        assert _walk(it) == expected


@settings(max_examples=12, deadline=None)
@given(n=st.integers(0, 300), seq_len=st.integers(48, 120), window=st.integers(1, 60), batch=st.integers(1, 9),
       drop=st.booleans(), workers=st.integers(1, 3), stop=st.integers(0, 30))
def test_any_chain_and_restore_point_thread_workers(n: int, seq_len: int, window: int, batch: int, drop: bool,
                                                   workers: int, stop: int) -> None:
    ds = _packed(n, seq_len, window, batch, drop)
    expected = _walk(iter(ds))
    with iter(_with(ds, workers, "thread")) as it:
        head = _walk(it, stop)
        assert head == expected[:stop]
        state = it.get_state()
    with iter(_with(ds, workers, "thread")) as it2:  # a restore with workers from a state taken with workers
        it2.set_state(json.loads(json.dumps(state)))
        # (packing_stats counts what this iterator emitted: from the restore on)
        assert [x[:2] for x in _walk(it2)] == [x[:2] for x in expected[len(head):]]


def test_restore_in_the_middle_with_worker_processes() -> None:
    ds = _packed(500, 64, 30, 4, True)
    expected = _walk(iter(ds))
    with iter(_with(ds, 2, "process")) as it:
        head = _walk(it, 7)
        state = it.get_state()
        time.sleep(0.2)  # the thread has run ahead meanwhile: the state is still the one after batch 7
        assert it.get_state() == state and head == expected[:7]
        it.set_state(json.loads(expected[2][1]))  # back to the state after batch 3, on the same iterator
        assert [x[:2] for x in _walk(it)] == [x[:2] for x in expected[3:]]


def test_close_keeps_the_state_of_the_last_batch_handed_over() -> None:
    ds = _packed(400, 64, 30, 4, False)
    expected = _walk(iter(ds))
    it = iter(_with(ds, 2, "thread"))
    _walk(it, 5)
    time.sleep(0.1)
    it.close()
    assert json.dumps(it.get_state(), sort_keys=True) == expected[4][1]
    assert str(it.packing_stats()) == expected[4][2]
    with pytest.raises(StopIteration):
        next(it)
    assert json.dumps(it.get_state(), sort_keys=True) == expected[4][1]  # still, after the StopIteration
    with iter(_with(ds, 2, "thread")) as it2:  # and it restores to the batches after it
        it2.set_state(it.get_state())
        assert [x[:2] for x in _walk(it2)] == [x[:2] for x in expected[5:]]


def _fails_at_300(k: int) -> np.ndarray:
    if k == 300:
        raise ValueError("record 300 is bad")
    return tokens_of(k)


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_an_error_comes_after_the_batches_before_it(mode: str) -> None:
    ds = D.range(600).map(_fails_at_300).pack(64, window=25).batch(2)
    got_in_process: list[str] = []
    with pytest.raises(th.errors.TransformError, match="record 300"):
        for b in ds:
            got_in_process.append(digest(b))
    got: list[str] = []
    with iter(_with(ds, 2, mode)) as it, pytest.raises(th.errors.TransformError, match="record 300"):
        for b in it:
            got.append(digest(b))
    assert got == got_in_process and len(got) > 10
    with pytest.raises(StopIteration):  # as in process, the iterator is closed after a worker's error
        next(it)


def test_a_dropped_iterator_stops_its_thread_and_workers() -> None:
    ds = _packed(10**5, 64, 30, 4, False).prefetch(worker_count=2)
    with leaks.leak_check(timeout=5.0):
        it = iter(ds)
        next(it)
        next(it)
        del it  # no close(): the hand-over thread holds the iterator only weakly
        gc.collect()
        deadline = time.monotonic() + 5.0
        while any(t.name == "thresher-hand-over" for t in _threads()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(t.name == "thresher-hand-over" for t in _threads())


def _threads() -> list[Any]:
    import threading

    return threading.enumerate()


def test_hand_over_re_raises_the_producer_error_once_then_ends() -> None:
    class Owner:
        n = 0

        def step(self) -> int:
            self.n += 1
            if self.n == 3:
                raise KeyError("third")
            return self.n

    owner = Owner()
    ahead = HandOver(owner, Owner.step, depth=1)
    assert [ahead.get(), ahead.get()] == [1, 2]
    with pytest.raises(KeyError, match="third"):
        ahead.get()
    with pytest.raises(StopIteration):
        ahead.get()
    ahead.stop()
    assert owner.n == 3  # nothing produced past the error


class _Interrupted(Exception):
    pass


def _slow_tokens(k: int) -> np.ndarray:
    time.sleep(0.002)
    return tokens_of(k)


def test_an_interrupted_next_loses_no_batch() -> None:
    import signal

    ds = D.range(300).map(_slow_tokens).pack(64, window=30).batch(12)  # next() mostly waits for the thread
    expected = [digest(b) for b in ds]

    def interrupt(signum: int, frame: Any) -> None:
        raise _Interrupted

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        with iter(_with(ds, 2, "thread")) as it:
            got = [digest(next(it))]
            signal.setitimer(signal.ITIMER_REAL, 0.01)  # while next() waits for the thread (Ctrl-C)
            interrupted = False
            try:
                while True:
                    got.append(digest(next(it)))
            except _Interrupted:
                interrupted = True
            except StopIteration:
                pass
            signal.setitimer(signal.ITIMER_REAL, 0)
            got += [digest(b) for b in it]  # the thread ran ahead meanwhile: nothing skipped or repeated
    finally:
        signal.signal(signal.SIGALRM, old)
    assert interrupted and got == expected
