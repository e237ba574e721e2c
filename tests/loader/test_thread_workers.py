"""worker_mode="thread": the same batches and states as processes and as worker_count=0, exact resume
across modes and worker counts, the same errors, bounded read-ahead, stats, and no leaked threads."""

from __future__ import annotations

import gc
import json
import threading
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.forensics.pipelines import bad_specs
from tests.loader import worker_helpers as wh
from tests.loader.test_workers_equivalence import _clean, configs
from thresher.errors import ConfigError, TransformError
from thresher.loader.autotune import Probe
from thresher.loader.chunk import READ, SAMPLE
from thresher.loader.profiling.stats import BATCH, MAIN, PACK, TRANSFER, WAIT_WORKERS, WORKERS, available_cpus
from thresher.loader.thread_probe import THREAD_SPEEDUP

MODES = ("process", "thread")


def _worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("thresher-")]


def _wait_no_worker_threads(before: set[threading.Thread], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while set(_worker_threads()) - before and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.01)
    assert not set(_worker_threads()) - before, set(_worker_threads()) - before


@pytest.mark.parametrize("mode", ["fiber", "Thread", 1, "auto"])
def test_worker_mode_is_checked_and_named(mode: Any) -> None:
    source = th.sources.RangeDataSource(0, 4)
    with pytest.raises(ConfigError, match="worker_mode"):
        th.DataLoader(source, th.IndexSampler(4), worker_count=2, worker_mode=mode)
    with pytest.raises(ConfigError, match="worker_mode"):
        th.Dataset.range(4).prefetch(worker_count=2, worker_mode=mode)


def test_the_default_mode_is_processes_and_auto_is_measured() -> None:
    source = th.sources.RangeDataSource(0, 4)
    assert th.DataLoader(source, th.IndexSampler(4), worker_count=2).worker_mode == "process"
    assert th.DataLoader(source, th.IndexSampler(4), worker_count="auto").worker_mode == "auto"
    assert th.DataLoader(source, th.IndexSampler(4), worker_count="auto", worker_mode="thread").worker_mode == "thread"


# Each example runs up to four loaders; processes start once per iterator, threads cost nothing.
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cfg=configs, wa=st.integers(0, 3), wb=st.integers(0, 3), ma=st.sampled_from(MODES),
       mb=st.sampled_from(MODES), where=st.floats(0, 1))
def test_a_state_saved_in_one_mode_restores_exactly_in_the_other(
        records_path: str, _helpers_started: None, cfg: dict[str, Any], wa: int, wb: int, ma: str, mb: str,
        where: float) -> None:
    cfg = _clean(cfg)
    threads = cfg.pop("threads")
    ref, ref_states = wh.run(wh.build(records_path, **cfg))
    k = int(where * len(ref))
    state = wh.checkpoint(wh.build(records_path, **cfg, workers=wa, mode=ma, threads=threads), k)
    json.dumps(state)
    assert state == (ref_states[k - 1] if k else wh.checkpoint(wh.build(records_path, **cfg), 0))
    with iter(wh.build(records_path, **cfg, workers=wb, mode=mb, threads=threads)) as it:
        it.set_state(state)
        rest = list(it)
        end = it.get_state()
    wh.assert_all_same(ref[k:], rest, f"saved with {wa} {ma} workers, restored with {wb} {mb} workers")
    if ref_states:
        assert end == ref_states[-1]


def test_an_exception_in_a_thread_is_the_error_a_process_gives(records_path: str, no_leaks: None) -> None:
    before = set(_worker_threads())
    errors = {}
    for mode in MODES:
        it = iter(wh.build(records_path, batch=8, extra=(wh.FailOn(77),), chunk_size=16, workers=2, mode=mode))
        got = 0
        with pytest.raises(TransformError) as info:
            for _ in it:
                got += 1
        assert got == 64 // 8  # the batches before the failing chunk came first, as with worker_count=0
        errors[mode] = info.value
    e = errors["thread"]
    assert type(e) is type(errors["process"]) is TransformError
    assert (e.record_key, e.position) == (77, 77) == (errors["process"].record_key, errors["process"].position)
    assert isinstance(e.__cause__, ValueError) and "cannot handle label 77" in str(e.__cause__)
    message = str(e)
    assert "record key 77" in message and "FailOn" in message
    assert "worker thread 0 of 2, computing positions [64, 80)" in message  # chunk 4 is thread 4 mod 2
    assert "Traceback (most recent call last)" in message and "in map" in message
    assert "raise ValueError" in (e.worker_traceback or "")
    _wait_no_worker_threads(before)


class _KeyFails:
    def __len__(self) -> int:
        return 40

    def __getitem__(self, key: int) -> int:
        if key == 33:
            raise KeyError(f"record {key} is gone")
        return key


def test_any_other_exception_keeps_its_type_with_a_note_naming_the_thread() -> None:
    before = set(_worker_threads())
    loader = th.DataLoader(_KeyFails(), th.IndexSampler(40), [th.Batch(4)], worker_count=3, chunk_size=8,
                           worker_mode="thread")
    with pytest.raises(KeyError) as info:
        list(loader)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "worker thread 1 of 3, computing positions [32, 40)" in notes
    assert "while reading positions [32, 40)" in notes
    _wait_no_worker_threads(before)


def test_pipelines_and_elements_that_cannot_be_pickled_run_on_threads(records_path: str, no_leaks: None) -> None:
    lock = threading.Lock()

    def locked(x: dict[str, Any]) -> dict[str, Any]:  # a closure over a lock: cannot be pickled
        with lock:
            return {"label": x["label"]}

    sampler = th.IndexSampler(wh.N_RECORDS, shuffle=True, seed=3)
    source = th.sources.ArrayRecordSource(records_path)
    with pytest.raises(ConfigError, match="cannot be sent to worker processes"):
        th.DataLoader(source, sampler, [wh.decode, locked, th.Batch(8)], worker_count=2)
    ref = [b["label"].tolist() for b in th.DataLoader(source, sampler, [wh.decode, locked, th.Batch(8)])]
    got = [b["label"].tolist() for b in th.DataLoader(source, sampler, [wh.decode, locked, th.Batch(8)],
                                                      worker_count=2, worker_mode="thread")]
    assert got == ref
    # elements holding a lock cannot travel from a process; from a thread they need not travel at all
    with_lock = [wh.decode, wh.with_lock]
    with pytest.raises(TransformError, match="cannot be sent from a worker process"):
        list(th.DataLoader(source, sampler, with_lock, worker_count=2, warm_start=False))
    elements = list(th.DataLoader(source, sampler, with_lock, worker_count=2, worker_mode="thread"))
    assert [int(e["label"]) for e in elements] == [int(e["label"]) for e in th.DataLoader(source, sampler,
                                                                                          with_lock)]
    unpicklable = wh.Unpicklable(50)
    ref2 = [b.tolist() for b in th.DataLoader(unpicklable, th.IndexSampler(50), [th.Batch(5)])]
    got2 = [b.tolist() for b in th.DataLoader(unpicklable, th.IndexSampler(50), [th.Batch(5)], worker_count=3,
                                              chunk_size=5, worker_mode="thread")]
    assert got2 == ref2


@pytest.mark.parametrize("how", ["close", "break", "del", "exhaust", "with"])
def test_every_way_out_joins_the_threads_promptly(records_path: str, how: str) -> None:
    before = set(_worker_threads())
    endless = how != "exhaust"
    loader = wh.build(records_path, batch=8, num_epochs=None if endless else 1, extra=(wh.slow,), workers=3,
                      mode="thread", chunk_size=16)
    it = iter(loader)
    next(it)
    assert len(set(_worker_threads()) - before) == 3
    start = time.monotonic()
    if how == "close":
        it.close()
        with pytest.raises(StopIteration):
            next(it)
    elif how == "break":
        for i, _ in enumerate(it):
            if i == 5:
                break
        del it
    elif how == "del":
        del it
    elif how == "exhaust":
        assert sum(1 for _ in it) == 24
    else:
        with pytest.raises(RuntimeError, match="training failed"):
            with it:
                next(it)
                raise RuntimeError("training failed")
    _wait_no_worker_threads(before, timeout=2.0)
    assert time.monotonic() - start < 2.0


def test_read_ahead_is_bounded_by_workers_times_buffer() -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def note(x: int) -> int:
        with lock:
            seen.append(x)
        return x

    loader = th.DataLoader(th.sources.RangeDataSource(0, 400), th.IndexSampler(400), [note, th.Batch(8)],
                           worker_count=2, worker_buffer_size=1, chunk_size=8, worker_mode="thread")
    with iter(loader) as it:
        assert next(it).tolist() == list(range(8))
        time.sleep(0.3)  # time enough to run far ahead, were it not bounded
        with lock:
            computed = len(seen)
        assert computed <= 8 * (1 + 2 * 1)  # the chunk taken, then W * buffer chunks ahead of it
        assert [b.tolist()[0] for b in it][:3] == [8, 16, 24]


def test_stats_show_each_worker_thread(records_path: str) -> None:
    loader = wh.build(records_path, random_map=True, batch=8, batch_op=True, workers=2, mode="thread")
    with iter(loader) as it:
        batches = sum(1 for _ in it)
        s = it.stats()
    assert (s.batches, s.records, s.worker_count, s.worker_mode) == (batches, wh.N_RECORDS, 2, "thread")
    for name in (SAMPLE, READ, "Map(decode)", "RandomMap(flip)", BATCH):
        assert s.stage(name, WORKERS) is not None, (name, s.stages)
    assert s.stage(WAIT_WORKERS, MAIN) is not None and s.stage("Map(label_sum)", MAIN) is not None
    assert s.stage(PACK) is None and s.stage(TRANSFER) is None  # nothing is pickled or mapped
    assert s.stage(READ, WORKERS).count == 4  # type: ignore[union-attr]  # 200 records in chunks of 64
    assert len(s.worker_busy) == 2 and all(b > 0 for b in s.worker_busy)
    assert "2 worker threads" in str(s)


def test_a_trace_names_the_worker_threads(records_path: str, tmp_path: Any) -> None:
    path = tmp_path / "trace.json"
    with th.trace(str(path)):
        list(wh.build(records_path, batch=8, workers=2, mode="thread"))
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert {"thresher worker thread 0", "thresher worker thread 1"} <= names
    chunks = [e for e in events if e.get("ph") == "X" and e["name"] == "Map(decode)"]
    assert len(chunks) == 4 and len({e["tid"] for e in chunks}) == 2


def _probe(speedup: float | None) -> Probe:
    return Probe(chunk_s=0.05, chunk_bytes=1 << 20, chunk_records=256, chunks_left=1000, ops_s=0.04,
                 thread_speedup=speedup)


def test_auto_chooses_threads_when_the_measured_work_runs_in_parallel_on_threads() -> None:
    source = th.sources.RangeDataSource(0, 10**6)
    auto = th.DataLoader(source, th.IndexSampler(10**6), [abs], worker_count="auto").engine
    assert auto.decide(_probe(1.9)).worker_mode == "thread"
    assert auto.decide(_probe(THREAD_SPEEDUP)).worker_mode == "thread"
    assert auto.decide(_probe(1.05)).worker_mode == "process"
    assert auto.decide(_probe(None)).worker_mode == "process"
    assert auto.wants_thread_speedup(_probe(None)) == (available_cpus() >= 2)
    lock = threading.Lock()
    locked = th.DataLoader(source, th.IndexSampler(10**6), [lambda x: lock.locked() or x],
                           worker_count="auto").engine
    assert locked.unusable is not None  # processes cannot run it
    assert locked.decide(_probe(1.3)).worker_mode == "thread"
    assert locked.decide(_probe(1.0)).worker_count == 0
    pinned = th.DataLoader(source, th.IndexSampler(10**6), [abs], worker_count="auto", worker_mode="process")
    assert pinned.engine.decide(_probe(1.9)).worker_mode == "process"
    assert not pinned.engine.wants_thread_speedup(_probe(None))
    on_threads = th.DataLoader(source, th.IndexSampler(10**6), [abs], worker_count="auto", worker_mode="thread")
    assert on_threads.engine.decide(_probe(1.0)).worker_mode == "thread"


@pytest.mark.parametrize("op, mode", [(wh.slow, "thread"), (wh.spin, "process")])
def test_auto_measures_the_mode_and_the_batches_do_not_change(records_path: str, no_leaks: None, op: Any,
                                                              mode: str) -> None:
    cfg: dict[str, Any] = dict(batch=8, extra=(op,), chunk_size=32, shuffle=True, seed=11, random_map=True)
    ref, ref_states = wh.run(wh.build(records_path, **cfg))
    loader = wh.build(records_path, **cfg, workers="auto")  # type: ignore[arg-type]
    got, states = wh.run(loader)
    report = loader.autotune_report
    assert report is not None and report.worker_count > 0 and report.worker_mode == mode, report
    assert report.thread_speedup is not None
    assert (report.thread_speedup >= THREAD_SPEEDUP) == (mode == "thread"), report
    wh.assert_all_same(ref, got)
    assert states == ref_states


def test_dataset_prefetch_on_threads_gives_the_same_elements_and_states() -> None:
    ds = th.Dataset.range(100).shuffle(seed=4).map(lambda x: x * 3).batch(6)
    ref = [b.tolist() for b in ds]
    for mode in MODES:
        assert [b.tolist() for b in ds.prefetch(worker_count=2, worker_mode=mode)] == ref
    it = iter(ds.prefetch(worker_count=2, worker_mode="thread"))
    head = [next(it).tolist() for _ in range(5)]
    state = it.get_state()
    it.close()
    again = iter(ds.prefetch(worker_count=3))
    again.set_state(state)
    assert head + [b.tolist() for b in again] == ref


def test_device_prefetch_over_thread_workers() -> None:
    from thresher.jax import DevicePrefetchIterator

    loader = th.DataLoader(th.sources.RangeDataSource(0, 60), th.IndexSampler(60, shuffle=True, seed=7),
                           [lambda x: np.int64(x) * 2, th.Batch(4)], chunk_size=8, worker_count=2,
                           worker_mode="thread")
    ref = [b.tolist() for b in th.DataLoader(loader.data_source, loader.sampler, [lambda x: np.int64(x) * 2,
                                                                                   th.Batch(4)])]
    with DevicePrefetchIterator(iter(loader), size=2) as it:
        head = [next(it).tolist() for _ in range(5)]
        state = it.get_state()
    again = iter(loader)
    again.set_state(state)
    assert head + [b.tolist() for b in again] == ref


def test_auto_gives_threads_to_a_pipeline_processes_cannot_run(records_path: str) -> None:
    lock = threading.Lock()

    def locked(x: Any) -> Any:  # a closure over a lock: cannot be pickled
        with lock:
            return x

    cfg: dict[str, Any] = dict(batch=8, extra=(wh.slow, locked), chunk_size=32)
    ref, ref_states = wh.run(wh.build(records_path, **cfg))
    loader = wh.build(records_path, **cfg, workers="auto")  # type: ignore[arg-type]
    got, states = wh.run(loader)
    report = loader.autotune_report
    assert report is not None and report.worker_count >= 1 and report.worker_mode == "thread", report
    assert "worker processes cannot be used" in report.reason
    wh.assert_all_same(ref, got)
    assert states == ref_states


@settings(max_examples=15, deadline=None)
@given(spec=bad_specs)
def test_errors_skip_drops_the_same_records_on_threads(spec: Any) -> None:
    for i in range(spec.shard_count):
        with iter(spec.loader(i)) as ref_it:
            ref = [b.tolist() for b in ref_it]
            ref_dropped = ref_it.skipped_records
        with iter(spec.loader(i, 3, worker_mode="thread")) as it:
            assert [b.tolist() for b in it] == ref
            assert it.skipped_records == ref_dropped
