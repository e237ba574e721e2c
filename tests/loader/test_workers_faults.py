"""Faults in workers: each gives its clear error in bounded time, and nothing leaks."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from typing import Any

import pytest

import thresher as th
from tests.loader import worker_helpers as wh
from thresher.errors import BatchError, ConfigError, SourceNotFoundError, TransformError, WorkerError

pytestmark = pytest.mark.usefixtures("no_leaks")


def _workers() -> list[Any]:
    return [p for p in multiprocessing.active_children() if p.name.startswith("thresher-worker-")]


def _batches_until_error(loader: th.DataLoader, timeout: float = 10.0) -> tuple[int, BaseException]:
    """How many batches came before the error, and the error (within ``timeout`` s)."""
    count, start = 0, time.monotonic()
    it = iter(loader)
    try:
        while True:
            next(it)
            count += 1
            assert time.monotonic() - start < timeout, "no error in time"
    except StopIteration:
        raise AssertionError("the stream ended without an error") from None
    except Exception as e:
        assert time.monotonic() - start < timeout, f"the error took {time.monotonic() - start:.1f} s"
        if not isinstance(e, BatchError):
            assert it._producer is None, "the iterator must be closed after a worker error"
        it.close()
        return count, e


def test_an_exception_in_a_transform_keeps_its_type_traceback_record_and_position(records_path: str) -> None:
    cfg: dict[str, Any] = dict(batch=8, extra=(wh.FailOn(77),), chunk_size=16)
    n0, e0 = _batches_until_error(wh.build(records_path, **cfg))
    n2, e2 = _batches_until_error(wh.build(records_path, **cfg, workers=2))
    assert n2 == n0 == 64 // 8  # the same batches came first, whatever the worker count
    assert type(e2) is type(e0) is TransformError
    assert isinstance(e2.__cause__, ValueError) and "cannot handle label 77" in str(e2.__cause__)
    message = str(e2)
    assert "record key 77" in message and "position 77" in message and "FailOn" in message
    assert "worker 0 of 2" in message  # chunk 4 (positions 64..79) is worker 4 mod 2
    assert "Traceback (most recent call last)" in message and 'in map' in message
    assert "raise ValueError" in e2.worker_traceback  # type: ignore[attr-defined]
    assert (e2.record_key, e2.position) == (77, 77)  # type: ignore[attr-defined]


@pytest.mark.parametrize("how, code", [("exit", "exit code 3"), ("segfault", "SIGSEGV"), ("kill", "SIGKILL")])
def test_a_worker_that_dies_is_a_worker_error_naming_it_and_its_exit_code(records_path: str, how: str,
                                                                          code: str) -> None:
    loader = wh.build(records_path, batch=8, extra=(wh.ExitOn(100, how),), chunk_size=16, workers=3)
    count, e = _batches_until_error(loader)
    assert isinstance(e, WorkerError)
    assert count <= 96 // 8  # chunk 6 (positions 96..111) holds record 100
    assert "worker 0 of 3" in str(e) and code in str(e) and "while computing positions [96, 112)" in str(e)


def test_a_worker_killed_mid_epoch_is_a_worker_error_within_seconds(records_path: str) -> None:
    loader = wh.build(records_path, batch=8, num_epochs=None, shuffle=True, seed=1, extra=(wh.slow,),
                      workers=2)
    it = iter(loader)
    for _ in range(3):
        next(it)
    [victim] = [p for p in _workers() if p.name == "thresher-worker-1"]
    os.kill(victim.pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerError, match=r"worker 1 of 2 .*exit code -9: killed by SIGKILL"):
        for _ in range(10_000):
            next(it)
    assert time.monotonic() - start < 10
    assert not _workers()


def test_an_unpicklable_result_names_the_element(records_path: str) -> None:
    n, e = _batches_until_error(wh.build(records_path, batch=4, extra=(wh.with_lock,), workers=2))
    assert n == 0 and isinstance(e, TransformError)
    assert "position 0 (record key 0) cannot be sent" in str(e) and "Map(with_lock)" in str(e)
    assert "lock" in str(e.__cause__)


def test_an_unpicklable_pipeline_is_a_config_error_naming_the_operation(records_path: str) -> None:
    import threading

    lock = threading.Lock()

    def locked(x: Any) -> Any:
        with lock:
            return x

    with pytest.raises(ConfigError, match=r"operation 2 Map\(.*locked\) cannot be sent to worker processes"):
        th.DataLoader(th.sources.RangeDataSource(0, 8), th.IndexSampler(8), [abs, abs, locked], worker_count=2)
    assert len(th.DataLoader(th.sources.RangeDataSource(0, 8), th.IndexSampler(8), [locked])) == 8


def test_a_file_that_disappears_mid_run_is_a_clear_error(tmp_path: Any) -> None:
    first = wh.write_records(str(tmp_path / "a.array_record"), range(100))
    second = wh.write_records(str(tmp_path / "b.array_record"), range(100, 200))
    loader = wh.build([first, second], batch=8, extra=(wh.slow,), chunk_size=16, workers=2, buffer=1)
    it = iter(loader)
    next(it)  # the workers have read the first file only (positions < 64)
    os.remove(second)
    start = time.monotonic()
    with pytest.raises(SourceNotFoundError) as info:
        for _ in range(100):
            next(it)
    assert time.monotonic() - start < 10
    assert "b.array_record" in str(info.value) and "does not exist" in str(info.value)
    assert "worker" in str(info.value) and "Traceback" in str(info.value)
    assert it.get_state()["position"] == 96  # every batch before the missing file was delivered


def test_a_batch_that_cannot_be_stacked_fails_at_the_same_batch_for_every_worker_count(
        records_path: str) -> None:
    cfg: dict[str, Any] = dict(batch=8, extra=(wh.OddShapeOn(21),), chunk_size=16)
    n0, e0 = _batches_until_error(wh.build(records_path, **cfg))
    n2, e2 = _batches_until_error(wh.build(records_path, **cfg, workers=2))
    assert n0 == n2 == 2 and type(e0) is type(e2) is BatchError
    assert str(e0) == str(e2) and "position 21" in str(e2)


def test_a_pipeline_the_workers_cannot_load_is_a_worker_error(tmp_path: Any) -> None:
    import importlib.util
    import sys

    (tmp_path / "elsewhere_ops.py").write_text("def double(x):\n    return x * 2\n")
    spec = importlib.util.spec_from_file_location("elsewhere_ops", tmp_path / "elsewhere_ops.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["elsewhere_ops"] = module  # importable here, not on the workers' sys.path
    try:
        spec.loader.exec_module(module)
        loader = th.DataLoader(th.sources.RangeDataSource(0, 8), th.IndexSampler(8), [module.double, th.Batch(4)],
                               worker_count=2)
        with pytest.raises(WorkerError, match=r"could not load the pipeline .*elsewhere_ops"):
            next(iter(loader))
        # With the warm start (opted in) the first batches come from this process; the error comes as
        # soon as the workers say they could not load the pipeline, before any chunk is given to them.
        warm = th.DataLoader(th.sources.RangeDataSource(0, 10**6), th.IndexSampler(10**6),
                             [module.double, th.Batch(4)], worker_count=2, chunk_size=4, warm_start=True)
        got = []
        with pytest.raises(WorkerError, match=r"could not load the pipeline .*elsewhere_ops"), iter(warm) as it:
            for batch in it:
                got.append(batch.tolist())
        assert got and got == [[2 * x for x in range(i, i + 4)] for i in range(0, 4 * len(got), 4)]
    finally:
        del sys.modules["elsewhere_ops"]
