"""DevicePrefetchIterator: same batches, state = the last batch handed out, no thread leaks."""

from __future__ import annotations

import os
import gc
import threading
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from thresher.errors import TransformError
from thresher.jax import DevicePrefetchIterator

THREAD = "thresher-device-prefetch"


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD]


def wait_no_threads(timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while prefetch_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not prefetch_threads()


def loader(n: int = 60, batch: int = 4, ops: list[Any] | None = None, **kw: Any) -> th.DataLoader:
    return th.DataLoader(th.sources.RangeDataSource(0, n), th.IndexSampler(n, shuffle=True, seed=7, **kw),
                         (ops or []) + [th.Batch(batch)], chunk_size=8)


def batches(it: Any) -> list[list[int]]:
    return [b.tolist() for b in it]


@pytest.mark.parametrize("size", [0, 1, 2, 5])
def test_same_batches_for_every_depth(size: int) -> None:
    plain = batches(loader())
    with DevicePrefetchIterator(iter(loader()), size=size) as it:
        assert batches(it) == plain
    wait_no_threads()


@settings(max_examples=25, deadline=None)
@given(size=st.integers(0, 4), k=st.integers(0, 15), pause=st.booleans())
def test_state_is_that_of_the_last_batch_handed_out(size: int, k: int, pause: bool) -> None:
    plain = iter(loader())
    whole = batches(loader())
    it = DevicePrefetchIterator(iter(loader()), size=size)
    assert it.get_state() == plain.get_state()
    for _ in range(k):
        assert next(it).tolist() == next(plain).tolist()
        if pause:
            time.sleep(0.002)  # let the thread run ahead
        assert it.get_state() == plain.get_state()
    state = it.get_state()
    it.close()
    again = DevicePrefetchIterator(iter(loader()), size=size)
    again.set_state(state)
    assert batches(again) == whole[k:]
    wait_no_threads()


def test_the_thread_runs_ahead_but_the_state_does_not() -> None:
    with DevicePrefetchIterator(iter(loader()), size=2) as it:
        first = next(it)
        source = it.iterator
        deadline = time.monotonic() + 5
        while source.position < 3 * 4 and time.monotonic() < deadline:  # 2 queued + 1 in hand
            time.sleep(0.01)
        assert source.position >= 3 * 4
        assert it.get_state()["position"] == 4 and len(first) == 4


def test_set_state_midway_rewinds_and_drops_what_was_prefetched() -> None:
    whole = batches(loader())
    with DevicePrefetchIterator(iter(loader()), size=3) as it:
        for _ in range(3):
            next(it)
        state = it.get_state()
        next(it), next(it)
        it.set_state(state)
        assert it.get_state() == state
        assert batches(it) == whole[3:]


def test_set_state_passes_allow_approximate_through() -> None:
    def sharded(i: int, n: int) -> th.DataLoader:
        return loader(ops=[th.FilterTransform(lambda x: x % 3 != 0)],
                      shard_options=th.ShardOptions(i, n))

    olds = [iter(sharded(i, 2)) for i in range(2)]
    next(olds[0])
    merged = th.loader.slowest_state([o.get_state() for o in olds])
    with DevicePrefetchIterator(iter(sharded(0, 3)), size=2) as it:
        with pytest.raises(th.errors.GeometryError):
            it.set_state(merged)
        it.set_state(merged, allow_approximate=True)
        assert it.get_state()["position"] == 0  # the slowest process had taken nothing


def test_close_exhaustion_and_garbage_collection_stop_the_thread() -> None:
    it = DevicePrefetchIterator(iter(loader()), size=2)
    next(it)
    assert len(prefetch_threads()) == 1
    it.close()
    wait_no_threads()
    with pytest.raises(StopIteration):
        next(it)

    it = DevicePrefetchIterator(iter(loader()), size=2)
    list(it)
    wait_no_threads()

    it = DevicePrefetchIterator(iter(loader()), size=2)
    next(it)
    del it
    gc.collect()
    wait_no_threads()


def test_an_error_in_the_thread_is_raised_by_next() -> None:
    def boom(x: int) -> int:
        if x == 13:
            raise ValueError("bad record")
        return x

    with DevicePrefetchIterator(iter(loader(ops=[boom])), size=2) as it:
        with pytest.raises(TransformError, match="bad record") as info:
            for _ in it:
                pass
        assert isinstance(info.value.__cause__, ValueError)
        with pytest.raises(StopIteration):
            next(it)
    wait_no_threads()


def test_plain_iterators_work_but_have_no_state() -> None:
    it = DevicePrefetchIterator((np.arange(3) + i for i in range(4)), lambda b: b * 2, size=2)
    assert [b.tolist() for b in it] == [[2 * (j + i) for j in range(3)] for i in range(4)]
    with pytest.raises(TypeError, match="no get_state"):
        it.get_state()
    with pytest.raises(TypeError, match="no set_state"):
        it.set_state({})
    with pytest.raises(ValueError, match="size"):
        DevicePrefetchIterator(iter([]), size=-1)


def test_copies_overlap_the_step() -> None:
    """A slow transform (the copy) and a slow step take max(...) per batch, not their sum."""
    def slow_copy(b: Any) -> Any:
        time.sleep(0.03)
        return b

    def run(size: int) -> float:
        t0 = time.perf_counter()
        with DevicePrefetchIterator(iter(loader(n=48)), slow_copy, size=size) as it:
            for _ in it:
                time.sleep(0.03)  # the train step
        return time.perf_counter() - t0

    sync, overlapped = run(0), run(2)
    assert overlapped < 0.8 * sync, (sync, overlapped)


EXIT_WITH_PREFETCH_OPEN = """
import numpy as np, jax, thresher as th, thresher.jax
from jax.sharding import NamedSharding, PartitionSpec
mesh = jax.make_mesh((jax.device_count(),), ("data",))
loader = th.DataLoader(th.sources.RangeDataSource(0, 1000), th.IndexSampler(1000, num_epochs=None),
                       [np.float32, th.Batch(8)])
batches = thresher.jax.global_batches(iter(loader), NamedSharding(mesh, PartitionSpec("data")), prefetch=2)
for _ in range(5):
    next(batches)
print("done")  # and exit with the prefetch thread still running
"""


def test_a_script_that_exits_with_its_prefetcher_open_exits_cleanly(tmp_path) -> None:
    # The daemon thread used to be inside jax when the interpreter finalised: "terminate
    # called after throwing an instance of ''" and exit status 134, most runs.
    import subprocess
    import sys

    env = dict(os.environ, JAX_PLATFORMS="cpu")
    for _ in range(4):
        proc = subprocess.run([sys.executable, "-c", EXIT_WITH_PREFETCH_OPEN], capture_output=True, text=True,
                              timeout=120, env=env, cwd=str(tmp_path))
        assert proc.returncode == 0 and proc.stdout.strip() == "done", (proc.returncode, proc.stderr[-2000:])
