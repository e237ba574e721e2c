"""Reads in flight (ReadOptions): same batches, sources' declarations, errors, timeouts, no thread left."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.loader import worker_helpers as wh
from thresher.loader.chunk import ChunkProcessor
from thresher.loader.read_ahead import ReadAhead, _slices
from thresher.transforms import plan_operations


def _read_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("thresher-read")]


def _no_read_thread_within(seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _read_threads():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _loader(source: Any, n: int, threads: int | None, *, workers: Any = 0, prefetch: int = 500,
            timeout_s: float | None = 300.0, chunk_size: int | None = 32, seed: int = 3) -> th.DataLoader:
    return th.DataLoader(source, th.IndexSampler(n, shuffle=True, seed=seed, num_epochs=2),
                         [wh.from_bytes, th.Batch(8)], worker_count=workers, chunk_size=chunk_size,
                         read_options=th.ReadOptions(num_threads=threads, prefetch_buffer_size=prefetch,
                                                     timeout_s=timeout_s))


def _batches(loader: th.DataLoader) -> list[np.ndarray]:
    with iter(loader) as it:
        return list(it)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(0, 120), threads=st.integers(0, 9), prefetch=st.sampled_from([0, 7, 64, 500]),
       chunk=st.integers(1, 50), seed=st.integers(0, 2**32))
def test_reads_in_flight_change_nothing_but_speed(n: int, threads: int, prefetch: int, chunk: int,
                                                  seed: int) -> None:
    source = wh.Waiting(120)
    ref = _batches(_loader(source, n, 0, chunk_size=chunk, seed=seed))
    got = _batches(_loader(source, n, threads, prefetch=prefetch, chunk_size=chunk, seed=seed))
    assert len(got) == len(ref) and all(np.array_equal(a, b) for a, b in zip(ref, got))


def test_slices_are_contiguous_and_cover_the_keys() -> None:
    for n in range(0, 40):
        for parts in (1, 3, 16, 64):
            s = _slices(n, parts)
            assert [k for lo, hi in s for k in range(lo, hi)] == list(range(n))
            assert all(hi > lo for lo, hi in s) and len(s) == min(n, parts)


def test_worker_processes_keep_reads_in_flight_and_give_the_same_batches(no_leaks: None) -> None:
    source = wh.Waiting(200, wait_s=0.001)
    ref = _batches(_loader(source, 200, 0))
    for workers, threads in ((1, 8), (2, 4)):
        got = _batches(_loader(source, 200, threads, workers=workers))
        assert len(got) == len(ref) and all(np.array_equal(a, b) for a, b in zip(ref, got)), (workers, threads)


def test_sources_declare_their_reads_in_flight() -> None:
    assert th.ReadOptions().threads_for(wh.Waiting(4)) == th.sources.DEFAULT_READS_IN_FLIGHT
    assert th.ReadOptions().threads_for(wh.Waiting(4, suggested=48)) == 48
    assert th.ReadOptions(num_threads=2).threads_for(wh.Waiting(4, suggested=48)) == 2
    assert th.ReadOptions().threads_for(th.sources.RangeDataSource(0, 4)) == 0  # batched reads: inline
    assert isinstance(wh.Waiting(4, suggested=8), th.sources.ConcurrentReadsSource)
    with pytest.raises(th.errors.ConfigError, match=r"suggested_reads_in_flight \(declared by .*got -1"):
        _loader(wh.Waiting(4, suggested=-1), 4, None)


def test_array_record_files_keep_their_batched_range_reads(records_path: str) -> None:
    loader = wh.build(records_path)
    assert loader.engine.reads().num_threads == 0


@pytest.mark.parametrize("bad, match", [
    (dict(num_threads=-1), "num_threads=-1"), (dict(num_threads=True), "num_threads=True"),
    (dict(prefetch_buffer_size=-5), "prefetch_buffer_size=-5"), (dict(timeout_s=0), "timeout_s=0"),
])
def test_read_options_are_checked(bad: dict[str, Any], match: str) -> None:
    with pytest.raises(th.errors.ConfigError, match=match):
        th.ReadOptions(**bad)


def test_grain_read_options_map_onto_thresher_s() -> None:
    import grain.python as grain

    opts = th.ReadOptions.coerce(grain.ReadOptions(num_threads=7, prefetch_buffer_size=90))
    assert (opts.num_threads, opts.prefetch_buffer_size) == (7, 90)
    loader = th.DataLoader(wh.Waiting(10), th.IndexSampler(10), read_options=grain.ReadOptions(num_threads=3))
    assert loader.read_options == th.ReadOptions(num_threads=3, prefetch_buffer_size=500)
    assert loader.engine.reads().num_threads == 3
    with pytest.raises(th.errors.ConfigError, match="read_options"):
        th.ReadOptions.coerce(16)


@pytest.mark.parametrize("threads", [0, 4])
def test_a_failing_read_is_raised_as_it_is_without_threads(threads: int) -> None:
    source = wh.Waiting(100, fail_on=37)
    with pytest.raises(th.errors.SourceError, match="record 37 cannot be read") as info:
        _batches(_loader(source, 100, threads))
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "while reading positions" in notes and "Waiting(100)" in notes
    if threads:  # a thread's note names its own slice: 8 keys, the failing one among them
        assert "37" in notes.split("record keys")[1]
    assert _no_read_thread_within(2.0)


def test_a_failing_read_in_a_worker_is_raised_in_the_loop() -> None:
    with pytest.raises(th.errors.SourceError, match="record 37 cannot be read"):
        _batches(_loader(wh.Waiting(100, fail_on=37), 100, 4, workers=2))


class _Hangs:
    """Key ``key`` waits until ``release`` is set (a read that hangs)."""

    def __init__(self, key: int) -> None:
        self.key, self.release = key, threading.Event()

    def __len__(self) -> int:
        return 64

    def __getitem__(self, k: int) -> bytes:
        if k == self.key:
            self.release.wait(30)
        return np.int64(k).tobytes()


def test_a_hanging_read_raises_after_the_timeout_and_leaves_no_thread() -> None:
    source = _Hangs(key=21)
    loader = _loader(source, 64, 4, timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(th.errors.SourceError, match=r"record keys \[.*21.*timeout_s=0.3"):
        _batches(loader)
    assert time.monotonic() - started < 10
    assert _read_threads()  # the hung read still runs: no thread can be interrupted
    source.release.set()
    assert _no_read_thread_within(5.0)


def test_closing_an_iterator_cancels_reads_and_leaves_no_thread() -> None:
    source = wh.Waiting(1000, wait_s=0.002)
    it = iter(_loader(source, 1000, 16, prefetch=500))
    next(it)
    assert _read_threads()
    it.close()
    assert _no_read_thread_within(5.0)  # queued reads were cancelled: only the running ones ended


def test_read_ahead_measures_its_reads() -> None:
    proc = ChunkProcessor(wh.Waiting(64, wait_s=0.002), th.IndexSampler(64), plan_operations([]))
    ahead = ReadAhead(proc, threads=8)
    reading = ahead.finish(ahead.start(0, 64))
    assert reading.elements is not None and len(reading.elements) == 64
    assert ahead.read_wall_ns / 1e9 >= 64 * 0.002 / 8  # 8 slices of 8 reads of 2 ms each
    assert ahead.read_cpu_ns < ahead.read_wall_ns
    ahead.close()


def test_auto_gives_a_latency_bound_source_reads_in_flight(no_leaks: None) -> None:
    source = wh.Waiting(600, wait_s=0.002)
    ref = _batches(_loader(source, 600, 0, chunk_size=64))
    loader = _loader(source, 600, None, workers="auto", chunk_size=64)
    got = _batches(loader)
    report = loader.autotune_report
    assert report is not None and report.read_threads >= 8, report
    assert report.read_wait_s >= 0.002 and "reads wait" in report.reason and "read_threads=" in str(report)
    assert len(got) == len(ref) and all(np.array_equal(a, b) for a, b in zip(ref, got))


def test_auto_reads_local_files_inline(records_path: str) -> None:
    loader = wh.build(records_path, workers="auto", buffer=None)
    wh.run(loader)
    assert loader.autotune_report is not None and loader.autotune_report.read_threads == 0


def test_auto_keeps_the_threads_the_user_chose() -> None:
    loader = _loader(wh.Waiting(300, wait_s=0.001), 300, 3, workers="auto")
    _batches(loader)
    assert loader.autotune_report is not None and loader.autotune_report.read_threads == 3
