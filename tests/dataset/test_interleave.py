"""Interleave: the closed-form order equals a round-by-round simulation; files read in parallel."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.dataset.spec import build, decode_int, run_fresh_many, take
from thresher.dataset.interleave import interleave_order, reference_order

D = th.Dataset


@given(lengths=st.lists(st.integers(0, 12), max_size=9), cycle=st.integers(1, 5), block=st.integers(1, 5))
@settings(max_examples=300, deadline=None)
def test_order_equals_the_round_by_round_simulation(lengths: list[int], cycle: int, block: int) -> None:
    assert interleave_order(lengths, cycle, block) == reference_order(lengths, cycle, block)


def test_interleave_of_array_record_files(int_files: list[str]) -> None:
    files = [D.source(th.sources.ArrayRecordSource(p)).map(decode_int) for p in int_files]
    ds = D.interleave(int_files, lambda p: D.source(th.sources.ArrayRecordSource(p)).map(decode_int),
                      cycle_length=2, block_length=3)
    lengths = [len(f) for f in files]
    starts = [sum(lengths[:i]) for i in range(len(lengths))]
    want = [starts[d] + i for d, i in reference_order(lengths, 2, 3)]
    assert list(ds) == want
    assert len(ds) == 39 and [ds[i] for i in range(39)] == want  # random access
    assert sorted(ds.shuffle(seed=3)) == sorted(want)  # and shuffles like any source


def test_interleave_resumes_in_a_fresh_process(int_files: list[str]) -> None:
    spec = {"source": ["interleave", int_files, 3, 2], "steps": [["shuffle", 5], ["repeat", 2], ["batch", 4, False]]}
    full = take(build(spec), 100)
    jobs = []
    for k in (3, 11):
        it = iter(build(spec))
        for _ in range(k):
            next(it)
        jobs.append({"spec": spec, "state": json.loads(json.dumps(it.get_state())), "limit": 100})
    assert run_fresh_many(jobs) == [full[3:], full[11:]]


def test_interleave_same_output_for_worker_counts(int_files: list[str]) -> None:
    spec = {"source": ["interleave", int_files, 2, 1], "steps": [["map", "inc"], ["batch", 3, False]]}
    full = take(build(spec), 100)
    for workers in (1, 2):
        assert take(build(spec, worker_count=workers), 100) == full


def test_interleave_needs_finite_random_access_datasets() -> None:
    with pytest.raises(th.errors.ConfigError, match="endless"):
        list(D.interleave([D.range(3).repeat(), D.range(2)], cycle_length=2))
    with pytest.raises(th.errors.ConfigError, match="cycle_length"):
        D.interleave([D.range(3)], cycle_length=0)
