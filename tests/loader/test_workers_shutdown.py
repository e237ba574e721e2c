"""Workers stop on every exit path, fast, and leave no process, segment or descriptor."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any, Iterator

import psutil
import pytest

from tests.loader import worker_helpers as wh
from tests.loader.leaks import leak_check

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _workers() -> list[Any]:
    return [p for p in multiprocessing.active_children() if p.name.startswith("thresher-worker-")]


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _wait_gone(pids: list[int], timeout: float) -> float:
    start = time.monotonic()
    while _alive(pids):
        assert time.monotonic() - start < timeout, f"processes {_alive(pids)} still alive after {timeout} s"
        time.sleep(0.02)
    return time.monotonic() - start


@pytest.fixture
def busy(records_path: str) -> Any:
    """An endless, slowish pipeline: workers are always computing ahead."""
    return wh.build(records_path, batch=8, num_epochs=None, extra=(wh.slow,), workers=2)


@pytest.mark.usefixtures("no_leaks")
class TestInProcess:
    def test_exhausting_the_iterator_stops_the_workers_at_once(self, records_path: str) -> None:
        it = iter(wh.build(records_path, batch=8, workers=2))
        assert not _workers()  # they start with the first next() (a set_state before it starts them once)
        next(it)
        pids = [p.pid for p in _workers()]
        assert len(pids) == 2
        assert len(list(it)) == 24
        assert not _alive(pids)

    def test_close_stops_busy_workers_within_two_seconds(self, busy: Any) -> None:
        it = iter(busy)
        next(it)
        pids = [p.pid for p in _workers()]
        start = time.monotonic()
        it.close()
        assert time.monotonic() - start < 2 and not _alive(pids)
        with pytest.raises(StopIteration):
            next(it)

    def test_leaving_a_with_block_stops_the_workers(self, busy: Any) -> None:
        with pytest.raises(RuntimeError, match="training failed"):
            with iter(busy) as it:
                next(it)
                pids = [p.pid for p in _workers()]
                raise RuntimeError("training failed")
        assert not _alive(pids)

    def test_dropping_the_iterator_stops_the_workers_without_the_cycle_collector(self, busy: Any) -> None:
        gc.disable()  # the iterator must die by reference counting alone: no reference cycles
        try:
            it: Iterator[Any] | None = iter(busy)
            assert it is not None
            next(it)
            pids = [p.pid for p in _workers()]
            it = None
            _wait_gone(pids, 2.0)
        finally:
            gc.enable()

    def test_set_state_replaces_the_workers(self, busy: Any) -> None:
        with iter(busy) as it:
            next(it)
            state = it.get_state()
            old = [p.pid for p in _workers()]
            next(it)
            it.set_state(state)
            assert not _alive(old)
            next(it)  # the new workers start with it
            assert len(_workers()) == 2

    def test_a_hundred_iterators_in_a_row_leak_nothing(self, records_path: str) -> None:
        loader = wh.build(records_path, batch=8, shuffle=True, seed=3, random_map=True, workers=2)
        start = time.monotonic()
        for i in range(100):
            it = iter(loader)
            for _ in range(i % 4):
                next(it)
            if i % 2:
                it.close()
            del it  # the other half are only dropped
        assert not _workers()
        assert time.monotonic() - start < 180  # a hang guard (100 pools), loose for loaded machines

    def test_the_first_batch_comes_fast(self, records_path: str) -> None:
        loader = wh.build(records_path, batch=16, random_map=True, workers=2)
        with iter(loader) as it:
            next(it)  # the fork server is warm now
        start = time.monotonic()
        with iter(loader) as it:
            next(it)
        assert time.monotonic() - start < 1.0


_TRAIN = textwrap.dedent("""
    import multiprocessing, signal, sys, time
    from tests.loader import worker_helpers as wh
    from thresher.loader import warm_start
    if __name__ == "__main__":
        # As in a terminal's foreground job, even when the tests run as a background job of a
        # shell without job control, which starts it (and so this process) with SIGINT ignored.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        mode = sys.argv[2]
        assert warm_start.wait(120.0)  # workers from the first batch on (no warm start in this process)
        it = iter(wh.build(sys.argv[1], batch=8, num_epochs=None, extra=(wh.slow,), workers=2))
        for i, batch in enumerate(it):
            if i == 2:
                pids = [p.pid for p in multiprocessing.active_children() if p.name.startswith("thresher-worker")]
                print("READY", *pids, flush=True)
                if mode == "exit":
                    break  # the interpreter exits with the iterator open
                if mode == "hang":
                    time.sleep(600)
            time.sleep(0.01)
""")


def _start(records_path: str, mode: str) -> tuple[subprocess.Popen[str], list[int]]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-c", _TRAIN, records_path, mode], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY"):
        proc.kill()
        raise AssertionError(f"the training script failed: {line}{proc.communicate()[1]}")
    workers = [int(p) for p in line.split()[1:]]
    assert len(workers) == 2
    # Its whole tree: the workers, and multiprocessing's fork server and resource tracker.
    tree = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert set(workers) <= set(tree)
    return proc, tree


@pytest.mark.usefixtures("_helpers_started")
class TestTrainingProcess:
    """A training loop in its own process, stopped in the ways training scripts stop."""

    def test_ctrl_c_stops_the_loop_and_its_workers(self, records_path: str) -> None:
        with leak_check():
            proc, pids = _start(records_path, "train")
            start = time.monotonic()
            os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole group
            _, err = proc.communicate(timeout=10)
            took = time.monotonic() - start
            assert proc.returncode != 0 and "KeyboardInterrupt" in err
            assert err.count("Traceback") == 1, err  # workers ignore SIGINT: one traceback, the loop's
            _wait_gone(pids, 2.0)
            assert took < 3.0, took

    def test_interpreter_exit_with_an_open_iterator_stops_the_workers(self, records_path: str) -> None:
        with leak_check():
            proc, pids = _start(records_path, "exit")
            start = time.monotonic()
            _, err = proc.communicate(timeout=10)
            assert proc.returncode == 0, err
            assert time.monotonic() - start < 2.0 and not err
            _wait_gone(pids, 2.0)

    def test_workers_of_a_killed_training_process_exit_on_their_own(self, records_path: str) -> None:
        with leak_check():
            proc, pids = _start(records_path, "hang")
            proc.kill()  # SIGKILL: no cleanup code runs in the main process
            proc.communicate(timeout=10)
            _wait_gone(pids, 5.0)


_UNGUARDED = textwrap.dedent("""
    import jax, torch  # their modules change the order in which the interpreter clears modules at exit
    import thresher as th
    loader = th.DataLoader(th.sources.RangeDataSource(0, 100), th.IndexSampler(100), [th.Batch(10)],
                           worker_count=2)
    it = iter(loader)  # a module global: cleared only as the interpreter exits
    for batch in it:
        pass
""")


def test_an_error_at_the_top_level_ends_without_an_ignored_exception(tmp_path: Any) -> None:
    """A script that fails at its top level with an iterator open in a global (here: no
    __main__ guard) shows its error, and nothing from the iterator's clean-up at interpreter
    exit (it used contextlib there, which may be None by then: 'Exception ignored in ...
    __del__ ... AttributeError')."""
    script = tmp_path / "train.py"
    script.write_text(_UNGUARDED)
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, str(script)], env=env, text=True, capture_output=True, timeout=300)
    assert done.returncode == 1
    assert "__main__" in done.stderr and "WorkerError" in done.stderr, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
