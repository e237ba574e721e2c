"""worker_count="auto" and read-ahead sized by memory change speed only: the batches and states
are those of worker_count=0; the choice is reported."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.loader import worker_helpers as wh
from tests.loader.leaks import leak_check
from thresher.loader import autotune
from thresher.loader.autotune import decide, read_ahead
from thresher.loader.chunk import READ
from thresher.loader.profiling.stats import MAIN, WORKERS

configs = st.fixed_dictionaries({
    "n": st.integers(1, wh.N_RECORDS),
    "shuffle": st.booleans(),
    "seed": st.integers(0, 2**64 - 1),
    "num_epochs": st.sampled_from([1, 2]),
    "shards": st.integers(1, 2).flatmap(lambda p: st.tuples(st.integers(0, p - 1), st.just(p))),
    "batch": st.one_of(st.none(), st.integers(1, 12)),
    "drop_remainder": st.booleans(),
    "filter": st.booleans(),
    "random_map": st.booleans(),
    "chunk_size": st.one_of(st.none(), st.integers(8, 40)),
    "slow": st.booleans(),
})


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])  # shrinking real processes takes minutes
@given(cfg=configs)
def test_auto_gives_the_batches_and_states_of_worker_count_0(records_path: str, _helpers_started: None,
                                                            cfg: dict[str, Any]) -> None:
    cfg = dict(cfg)
    extra = (wh.slow,) if cfg.pop("slow") else ()
    with leak_check():
        ref, ref_states = wh.run(wh.build(records_path, **cfg, extra=extra, workers=0))
        loader = wh.build(records_path, **cfg, extra=extra, workers="auto", buffer=None)
        for epoch in range(2):  # the first iterator measures and decides; the second reuses the choice
            got, states = wh.run(loader)
            wh.assert_all_same(ref, got, f"auto, iterator {epoch}")
            assert states == ref_states
            assert loader.autotune_report is not None or not ref  # an empty stream: nothing to measure
            del got  # batches from workers are views onto their shared memory
        loader.data_source.close()  # the measured chunks opened the file in this process


def test_a_slow_pipeline_gets_workers_and_the_choice_is_reported(records_path: str, no_leaks: None,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    loader = wh.build(records_path, extra=(wh.slow,), workers="auto", buffer=None, chunk_size=16)
    with caplog.at_level(logging.INFO, logger="thresher"):
        with iter(loader) as it:
            first = [next(it) for _ in range(4)]
            report = loader.autotune_report
            assert report is not None and report.worker_count >= 1
            rest = list(it)
            s = it.stats()
    assert any("autotune: worker_count=" in r.getMessage() for r in caplog.records)
    assert str(report) in str(s) and str(report) in s.notes
    assert s.worker_count == report.worker_count
    assert report.chunk_records == 16 and report.chunk_s >= 16 * 0.002 * 0.9 and report.chunk_bytes > 16 * 4096
    # the two measured chunks, and the two that measured threads against processes, were computed here
    # and handed out; the others came from workers
    assert s.stage(READ, MAIN).count == 4 and s.stage(READ, WORKERS).count == 13 - 4  # type: ignore[union-attr]
    assert report.thread_speedup is not None
    wh.assert_all_same(list(wh.build(records_path, extra=(wh.slow,), chunk_size=16)), first + rest)
    with iter(loader) as it:  # a later iterator: no measurement, straight to the workers
        next(it)
        assert it.stats().stage(READ, MAIN) is None


def test_a_cheap_pipeline_stays_in_process(no_leaks: None) -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 10_000), th.IndexSampler(10_000),
                           [th.Batch(100)], worker_count="auto")
    assert [b.sum() for b in loader] == [b.sum() for b in th.DataLoader(loader.data_source, loader.sampler,
                                                                        [th.Batch(100)])]
    report = loader.autotune_report
    assert report is not None and report.worker_count == 0 and "would not pay" in report.reason


def test_auto_with_a_pipeline_that_cannot_be_pickled_runs_in_process(records_path: str) -> None:
    lock = threading.Lock()

    def locked(x: Any) -> Any:
        with lock:
            return x

    loader = wh.build(records_path, extra=(locked,), workers="auto")
    got = list(loader)
    wh.assert_all_same(list(wh.build(records_path, extra=(locked,))), got)
    assert loader.autotune_report is not None and loader.autotune_report.worker_count == 0
    assert "cannot be sent to worker processes" in loader.autotune_report.reason
    with pytest.raises(th.errors.ConfigError, match="worker_count"):
        wh.build(records_path, workers="many")


def test_read_ahead_is_sized_by_memory(records_path: str, no_leaks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = list(wh.build(records_path, batch=8))
    monkeypatch.setattr(autotune, "memory_budget", lambda available=None: 1)  # nothing fits: 1 chunk each
    loader = wh.build(records_path, batch=8, workers=2, buffer=None)
    with iter(loader) as it:
        got = [next(it)]
        assert it._producer.buffer_size == 1  # type: ignore[union-attr]
        got.extend(it)
    wh.assert_all_same(ref, got)
    with iter(wh.build(records_path, batch=8, workers=2, buffer=3)) as it:  # an explicit size is kept
        next(it)
        assert it._producer.buffer_size == 3  # type: ignore[union-attr]


def test_decide() -> None:
    mib = 1 << 20
    big = decide(chunk_s=0.1, chunk_bytes=mib, chunk_records=256, chunks_left=None, cpus=8, budget=1 << 30)
    assert (big.worker_count, big.worker_buffer_size) == (8, 2)
    few = decide(chunk_s=0.1, chunk_bytes=mib, chunk_records=256, chunks_left=3, cpus=8, budget=1 << 30)
    assert few.worker_count == 3 and "3 chunks left" in few.reason
    # receiving a chunk (~0.55 ms for 1 MiB) caps the useful workers: 2 ms of compute -> 4 workers
    capped = decide(chunk_s=0.002, chunk_bytes=mib, chunk_records=256, chunks_left=None, cpus=64, budget=1 << 30)
    assert 2 <= capped.worker_count <= 5
    tight = decide(chunk_s=0.1, chunk_bytes=100 * mib, chunk_records=256, chunks_left=None, cpus=8,
                   budget=350 * mib)
    assert (tight.worker_count, tight.worker_buffer_size) == (3, 1) and "memory" in tight.reason
    none = decide(chunk_s=0.1, chunk_bytes=mib, chunk_records=256, chunks_left=None, cpus=8, budget=1 << 30,
                  unusable="a lock")
    assert none.worker_count == 0 and "a lock" in none.reason
    assert decide(0.1, mib, 256, 0, 8, 1 << 30).worker_count == 0
    assert "autotune: worker_count=8, worker_buffer_size=2" in str(big)
    assert read_ahead(10 * mib, 4, budget=1 << 30) == 2
    assert read_ahead(10 * mib, 4, budget=50 * mib) == 1
    assert read_ahead(10 * mib, 4, budget=1 << 30, most=8) == 8
