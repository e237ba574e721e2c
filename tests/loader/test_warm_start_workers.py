"""The warm start (opt-in: ``warm_start=True``) with real worker processes: each iterator (a
first one, a restore) computes its first chunks here while its workers start, then the workers
take over, and the batches are those of worker_count=0. Without it (the default) every chunk
comes from a worker."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.loader import worker_helpers as wh
from tests.loader.leaks import leak_check


def with_pid(x: dict[str, Any]) -> dict[str, Any]:
    return {**x, "pid": np.int64(os.getpid())}


def _loader(path: str, workers: int, seed: int, chunk: int, warm: bool = True) -> th.DataLoader:
    source = th.sources.ArrayRecordSource(path)
    sampler = th.IndexSampler(len(source), shuffle=True, seed=seed, num_epochs=None)
    return th.DataLoader(source, sampler, [wh.decode, th.RandomMapTransform(wh.flip), with_pid, th.Batch(8)],
                         worker_count=workers, chunk_size=chunk, warm_start=warm)


def _same_but_pid(a: dict[str, Any], b: dict[str, Any], where: str) -> None:
    wh.assert_same({k: v for k, v in a.items() if k != "pid"}, {k: v for k, v in b.items() if k != "pid"}, where)


def _until_workers(it: Any, first: int, limit_s: float = 60.0) -> list[dict[str, Any]]:
    """Batches until one comes from a worker (and 3 more), at most ``limit_s`` seconds."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        got.append(next(it))
        workers = [i for i, b in enumerate(got) if int(b["pid"][0]) != os.getpid()]
        if workers and len(got) >= workers[0] + 3:
            break
    return got


def test_warm_start_is_opt_in() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 8), th.IndexSampler(8), [th.Batch(4)])
    assert loader.warm_start is False
    assert th.DataLoader(loader.data_source, loader.sampler, [th.Batch(4)], warm_start=True).warm_start is True


@given(seed=st.integers(0, 2**32), chunk=st.sampled_from([8, 16, 24]), step=st.integers(0, 60))
@settings(max_examples=5, deadline=None)
def test_first_batches_here_then_workers_and_a_restore_the_same(records_path: str, _helpers_started: None,
                                                                seed: int, chunk: int, step: int) -> None:
    with leak_check():
        _first_batches_and_restore(records_path, seed, chunk, step)


def _first_batches_and_restore(records_path: str, seed: int, chunk: int, step: int) -> None:
    ref_it = iter(_loader(records_path, 0, seed, chunk))
    loader = _loader(records_path, 2, seed, chunk)
    with iter(loader) as it:
        got = _until_workers(it, 0)
        for _ in range(max(0, step - len(got))):
            got.append(next(it))
    ref: list[dict[str, Any]] = []

    def reference(i: int) -> dict[str, Any]:  # batch i of worker_count=0
        while len(ref) <= i:
            ref.append(next(ref_it))
        return ref[i]

    assert int(got[0]["pid"][0]) == os.getpid()  # the first batch was computed here
    pids = {int(b["pid"][0]) for b in got}
    assert len(pids) >= 2, "the workers never took over"
    for i, b in enumerate(got):
        _same_but_pid(b, reference(i), f"batch {i}")
    # A restore deep in the run: a fresh iterator, its first batch here again, then its workers.
    with iter(loader) as first:
        for _ in range(step):
            next(first)
        state = first.get_state()
    with iter(loader) as again:
        again.set_state(state)
        after = _until_workers(again, step)
    assert int(after[0]["pid"][0]) == os.getpid()
    assert {int(b["pid"][0]) for b in after} - {os.getpid()}, "the restored iterator's workers never took over"
    for i, b in enumerate(after):
        _same_but_pid(b, reference(step + i), f"restored batch {step + i}")


def test_without_warm_start_every_chunk_comes_from_a_worker(records_path: str, no_leaks: None) -> None:
    with iter(_loader(records_path, 2, 3, 16, warm=False)) as it:
        pids = {int(next(it)["pid"][0]) for _ in range(10)}
    assert os.getpid() not in pids and len(pids) == 2
    source = th.sources.ArrayRecordSource(records_path)  # the default: the same, from the first batch on
    default = th.DataLoader(source, th.IndexSampler(len(source)), [wh.decode, with_pid, th.Batch(8)], worker_count=2,
                            chunk_size=16)
    with iter(default) as it:
        pids = {int(next(it)["pid"][0]) for _ in range(10)}
    assert os.getpid() not in pids and len(pids) == 2


_RELEASE = threading.Event()


def hang_on_5(x: int) -> int:
    if x == 5:
        _RELEASE.wait(120)  # a read or a lock that never returns (released at the end of the test)
    return x


def test_a_warm_start_chunk_that_hangs_is_a_stuck_error(no_leaks: None) -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 64), th.IndexSampler(64), [hang_on_5, th.Batch(4)],
                           worker_count=2, chunk_size=8, worker_timeout_s=1, warm_start=True)
    began = time.monotonic()
    try:
        with pytest.raises(th.errors.WorkerStuckError) as err, iter(loader) as it:
            next(it)
        assert time.monotonic() - began < 30
        e = err.value
        assert e.positions == (0, 8) and e.record_keys == list(range(8)) and e.pid == os.getpid()
        assert e.stack is not None and "in hang_on_5" in e.stack
        assert "warm start" in str(e) and "worker_timeout_s=1" in str(e)
    finally:
        _RELEASE.set()
