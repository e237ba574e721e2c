"""it.stats(): every stage present and non-negative, the wall time split exactly, records
counted exactly, and a hint that names the bottleneck of a deliberately slow loader or
a deliberately slow training loop."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.loader import worker_helpers as wh
from thresher.loader.chunk import READ, SAMPLE
from thresher.loader.profiling.stats import BATCH, MAIN, PACK, TRANSFER, WAIT_WORKERS, WORKERS


def _drain(it: Any, step_s: float = 0.0) -> int:
    n = 0
    for batch in it:
        n += 1
        if step_s:
            time.sleep(step_s)
    return n


def _check_structure(s: th.LoaderStats) -> None:
    assert s.wall_s > 0
    assert s.waited_s >= 0 and s.outside_s >= 0
    assert s.waited_s + s.outside_s == pytest.approx(s.wall_s, abs=1e-6)
    for stage in s.stages:
        assert stage.seconds >= 0 and stage.count >= 1 and stage.share >= 0, stage
    assert all(0 <= b <= 1.05 for b in s.worker_busy), s.worker_busy


@pytest.mark.parametrize("workers", [0, 2])
def test_every_stage_is_there_and_the_wall_time_splits_exactly(records_path: str, no_leaks: None,
                                                               workers: int) -> None:
    loader = wh.build(records_path, random_map=True, batch=8, batch_op=True, workers=workers)
    with iter(loader) as it:
        batches = _drain(it)
        s = it.stats()
    _check_structure(s)
    assert (s.batches, s.records) == (batches, wh.N_RECORDS)
    where = WORKERS if workers else MAIN
    for name in (SAMPLE, READ, "Map(decode)", "RandomMap(flip)", BATCH):
        assert s.stage(name, where) is not None, (name, where, s.stages)
    assert s.stage("Map(label_sum)", MAIN) is not None  # after the Batch: always in the main process
    if workers:
        for name, side in ((PACK, WORKERS), (WAIT_WORKERS, MAIN), (TRANSFER, MAIN)):
            assert s.stage(name, side) is not None, name
        assert len(s.worker_busy) == 2 and all(b > 0 for b in s.worker_busy)
        # 200 records in chunks of 64: 4 chunks, each read once by a worker
        assert s.stage("read", WORKERS).count == 4  # type: ignore[union-attr]
    else:
        in_process = sum(st.seconds for st in s.stages)
        assert in_process <= s.waited_s + 1e-3  # the stages run inside next()
    text = str(s)
    assert "records/s" in text and "hint:" in text and "Map(decode)" in text


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, wh.N_RECORDS), batch=st.one_of(st.none(), st.integers(1, 20)), drop=st.booleans(),
       filter=st.booleans(), chunk=st.integers(1, 50))
def test_records_and_batches_are_counted_exactly(records_path: str, n: int, batch: int | None, drop: bool,
                                                 filter: bool, chunk: int) -> None:
    loader = wh.build(records_path, n=n, batch=batch, drop_remainder=drop, filter=filter, chunk_size=chunk)
    out = list(loader)
    sizes = [len(b["label"]) if batch is not None else 1 for b in out]
    with iter(loader) as it:
        _drain(it)
        s = it.stats()
    assert (s.batches, s.records) == (len(out), sum(sizes))
    if out:
        _check_structure(s)


def test_counts_with_workers_and_a_filter(records_path: str, no_leaks: None) -> None:
    ref = list(wh.build(records_path, filter=True, batch=7))
    with iter(wh.build(records_path, filter=True, batch=7, workers=2)) as it:
        _drain(it)
        s = it.stats()
    assert (s.batches, s.records) == (len(ref), sum(len(b["label"]) for b in ref))
    assert s.stage(BATCH, MAIN) is not None  # with a Filter before the Batch the main process stacks
    assert s.stage("Filter(keep)", WORKERS) is not None


def test_reset_starts_a_new_measurement() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 100), th.IndexSampler(100), [th.Batch(10)])
    with iter(loader) as it:
        for _ in range(3):
            next(it)
        first = it.stats(reset=True)
        for _ in range(5):
            next(it)
        second = it.stats()
    assert (first.batches, first.records) == (3, 30)
    assert (second.batches, second.records) == (5, 50)
    assert first.first_batch_s is not None and second.first_batch_s is None
    _check_structure(second)


def test_before_the_first_batch() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10), [th.Batch(5)])
    with iter(loader) as it:
        s = it.stats()
    assert (s.batches, s.records, s.wall_s) == (0, 0, 0.0)
    assert s.hint == "no batches yet"
    str(s)


@pytest.mark.parametrize("workers", [0, 1])
def test_a_slow_loader_is_input_bound(no_leaks: None, workers: int) -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 4096), th.IndexSampler(4096, num_epochs=None),
                           [wh.slow, th.Batch(4)], worker_count=workers, chunk_size=16)
    with iter(loader) as it:
        for _ in range(3):
            next(it)  # start-up (and the fork server) out of the measurement
        it.stats(reset=True)
        for _ in range(40):
            next(it)
        s = it.stats()
    assert s.hint.startswith("input-bound"), str(s)
    assert s.waited_fraction >= 0.5
    top = max((st for st in s.stages if st.name != WAIT_WORKERS), key=lambda st: st.seconds)
    assert top.name == "Map(slow)", str(s)
    if workers == 0:
        assert "raise worker_count" in s.hint


@pytest.mark.parametrize("workers", [0, 2])
def test_a_slow_training_loop_is_compute_bound(no_leaks: None, workers: int) -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 10**6), th.IndexSampler(10**6),
                           [th.Batch(16)], worker_count=workers, chunk_size=64)
    with iter(loader) as it:
        for _ in range(8):
            next(it)
        time.sleep(0.05)  # the workers fill their read-ahead
        it.stats(reset=True)
        for _ in range(30):
            next(it)
            time.sleep(0.005)  # the train step
        s = it.stats()
    assert s.hint.startswith("compute-bound"), str(s)
    assert s.outside_s >= 29 * 0.005  # the steps between the 30 calls
