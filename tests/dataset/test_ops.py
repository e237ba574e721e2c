"""Each Dataset operation: its semantics against plain Python, len/random access, resume."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.dataset.spec import build, run_fresh_many, take
from tests.helpers import digest

D = th.Dataset


def _ints(ds: th.Dataset) -> list:
    return [x.tolist() if isinstance(x, np.ndarray) else x for x in ds]


def test_source_and_range() -> None:
    assert _ints(D.range(5)) == [0, 1, 2, 3, 4]
    assert _ints(D.source([3, 1, 2])) == [3, 1, 2]
    assert len(D.source(np.arange(7))) == 7


def test_shuffle_is_a_permutation_new_each_epoch() -> None:
    ds = D.range(50).shuffle(seed=5).repeat(3)
    xs = _ints(ds)
    epochs = [xs[i * 50:(i + 1) * 50] for i in range(3)]
    assert all(sorted(e) == list(range(50)) for e in epochs)
    assert epochs[0] != epochs[1] != epochs[2]
    assert _ints(D.range(50).shuffle(seed=6)) != epochs[0]
    assert len(ds) == 150


def test_endless_repeat_has_random_access_but_no_len() -> None:
    ds = D.range(10).shuffle(seed=1).repeat()
    with pytest.raises(th.errors.RandomAccessError, match="forever"):
        len(ds)
    t = time.perf_counter()
    far = ds[10**12 + 3]
    assert time.perf_counter() - t < 0.5
    assert far == ds.compile().loader.sampler[10**12 + 3].record_key


def test_map_random_map_filter() -> None:
    assert _ints(D.range(6).map(lambda x: x * x)) == [0, 1, 4, 9, 16, 25]
    assert _ints(D.range(10).filter(lambda x: x % 3 == 0)) == [0, 3, 6, 9]
    jitter = D.range(20).random_map(lambda x, rng: x + int(rng.integers(1000)) * 100, seed=4)
    a, b = _ints(jitter), _ints(jitter)
    assert a == b and [x % 100 for x in a] == list(range(20))
    assert _ints(D.range(20).random_map(lambda x, rng: x + int(rng.integers(1000)) * 100, seed=5)) != a


def test_random_map_before_shuffle_draws_anew_each_epoch_unless_told_not_to() -> None:
    draw = lambda x, rng: (x, int(rng.integers(10**9)))
    before = _ints(D.range(10).random_map(draw, seed=1).shuffle(seed=2).repeat(2))
    after = _ints(D.range(10).shuffle(seed=2).repeat(2).random_map(draw, seed=1))
    fixed = _ints(D.range(10).random_map(draw, seed=1).shuffle(seed=2).repeat(2, reseed_each_epoch=False))
    # Before or after the shuffle, a repeat epoch draws anew (Grain's reseed_each_epoch=True).
    assert dict(before[:10]) != dict(before[10:])
    assert dict(after[:10]) != dict(after[10:])
    # The opt-out repeats the first epoch exactly: the same order and the same draws.
    assert fixed[:10] == fixed[10:]
    assert dict(fixed[:10]) == dict(before[:10])


def test_batch_drop_remainder_and_padding() -> None:
    assert _ints(D.range(7).batch(3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert _ints(D.range(7).batch(3, drop_remainder=True)) == [[0, 1, 2], [3, 4, 5]]
    seqs = D.range(5).map(lambda n: np.arange(n + 1))
    assert _ints(seqs.batch(2, pad_to="max", padding_value=-1)) == [
        [[0, -1], [0, 1]], [[0, 1, 2, -1], [0, 1, 2, 3]], [[0, 1, 2, 3, 4]]]
    assert seqs.batch(5, pad_to=8)[0].shape == (5, 8)
    with pytest.raises(th.errors.BatchError, match="pad_to"):
        list(seqs.batch(5, pad_to=3))
    with pytest.raises(th.errors.BatchError, match="shape"):
        list(seqs.batch(2))


def test_map_batch_and_batch_of_batches() -> None:
    assert _ints(D.range(6).batch(2).map_batch(lambda b: b.sum(keepdims=True))) == [[1], [5], [9]]
    nested = D.range(8).batch(2).batch(2)
    assert [x.shape for x in nested] == [(2, 2), (2, 2)]
    assert len(nested) == 2 and nested[1].tolist() == [[4, 5], [6, 7]]


@given(n=st.integers(0, 40), a=st.none() | st.integers(-50, 50), b=st.none() | st.integers(-50, 50),
       c=st.none() | st.integers(-4, 4).filter(lambda v: v != 0), seed=st.integers(0, 2**64 - 1),
       batch=st.none() | st.integers(1, 4))
@settings(max_examples=150, deadline=None)
def test_slice_is_python_slicing_of_the_stream(n: int, a: int | None, b: int | None, c: int | None, seed: int,
                                                batch: int | None) -> None:
    ds = D.range(n).shuffle(seed=seed).map(lambda x: x * 3)
    if batch:
        ds = ds.batch(batch)
    want = [digest(x) for x in ds][a:b:c]
    sliced = ds[a:b:c]
    assert [digest(x) for x in sliced] == want
    assert len(sliced) == len(want)
    assert [digest(sliced[i]) for i in range(len(want))] == want


def test_shards_are_disjoint_and_cover_the_stream() -> None:
    base = D.range(23).shuffle(seed=9).map(lambda x: x + 100)
    parts = [_ints(base.shard(th.ShardOptions(i, 3))) for i in range(3)]
    assert sorted(sum(parts, [])) == sorted(_ints(base))
    assert [len(base.shard(th.ShardOptions(i, 3))) for i in range(3)] == [len(p) for p in parts]
    batched = [_ints(base.batch(4).shard(th.ShardOptions(i, 2, drop_remainder=True))) for i in range(2)]
    assert len(batched[0]) == len(batched[1])


def test_prefetch_changes_nothing_without_workers() -> None:
    ds = D.range(30).shuffle(seed=1).batch(4)
    assert [digest(x) for x in ds.prefetch(worker_count=0, buffer=5)] == [digest(x) for x in ds]


# -- resume, per operation -----------------------------------------------------------------------------
OP_SPECS = [
    {"source": ["range", 37], "steps": [["shuffle", 3]]},
    {"source": ["range", 20], "steps": [["shuffle", 3], ["repeat", 3]]},
    {"source": ["range", 20], "steps": [["shuffle", 3], ["repeat", None]]},
    {"source": ["range", 30], "steps": [["map", "scramble"], ["random_map", 7]]},
    {"source": ["range", 40], "steps": [["filter"], ["batch", 3, False]]},
    {"source": ["range", 40], "steps": [["batch", 4, True], ["map_batch", "cumsum"]]},
    {"source": ["range", 40], "steps": [["shuffle", 1], ["slice", 3, 31, 2], ["batch", 2, False]]},
    {"source": ["range", 40], "steps": [["random_map", 2], ["shuffle", 5], ["repeat", 2]]},
    {"source": ["range", 40], "steps": [["shard", 1, 3, True], ["shuffle", 8], ["batch", 3, False]]},
    {"source": ["range", 40], "steps": [["map", "inc"], ["cache"], ["shuffle", 4], ["repeat", 2]]},
    {"source": ["tokens", 60], "steps": [["shuffle", 2], ["pack", 64, 8], ["batch", 3, False]]},
    {"source": ["range", 37], "steps": [["shuffle", 3, 4, 2], ["batch", 3, False]]},
    {"source": ["range", 40], "steps": [["random_map", 2], ["shuffle", 5, 3, 3], ["repeat", 2]]},
    {"source": ["range", 40], "steps": [["shard", 1, 3, True], ["shuffle", 8, 5, 2], ["batch", 3, False]]},
]
LIMIT = 80


def _resume_points(spec: dict) -> tuple[list[str], list[tuple[int, dict]]]:
    full = take(build(spec), LIMIT)
    points = []
    for k in sorted({0, 1, len(full) // 2, len(full) - 1, len(full)}):
        if k < 0:
            continue
        it = iter(build(spec))
        for _ in range(k):
            next(it)
        points.append((k, json.loads(json.dumps(it.get_state()))))
    return full, points


@pytest.mark.parametrize("spec", OP_SPECS, ids=[s["steps"][-1][0] + str(i) for i, s in enumerate(OP_SPECS)])
def test_each_op_resumes_exactly_in_process(spec: dict) -> None:
    full, points = _resume_points(spec)
    for k, state in points:
        it = iter(build(spec))
        it.set_state(state)
        assert take(it, LIMIT - k) == full[k:]


def test_each_op_resumes_exactly_in_a_fresh_process() -> None:
    jobs, want = [], []
    for spec in OP_SPECS:
        full, points = _resume_points(spec)
        for k, state in points[1:3]:
            jobs.append({"spec": spec, "state": state, "limit": LIMIT - k})
            want.append(full[k:])
    assert run_fresh_many(jobs) == want


def test_each_op_same_output_for_worker_counts() -> None:
    for spec in OP_SPECS:
        full = take(build(spec), LIMIT)
        for workers in (1, 2):
            assert take(build(spec, worker_count=workers), LIMIT) == full, (spec, workers)


def test_pipe_calls_the_function_with_the_dataset() -> None:
    import thresher as th

    def augment(ds: th.Dataset, k: int, *, times: int = 1) -> th.Dataset:
        return ds.map(lambda x: (x + k) * times)

    ds = th.Dataset.range(4).pipe(augment, 10, times=2).batch(2)
    assert [b.tolist() for b in ds] == [[20, 22], [24, 26]]
    with pytest.raises(TypeError):
        th.Dataset.range(4).pipe(3)  # type: ignore[arg-type]
