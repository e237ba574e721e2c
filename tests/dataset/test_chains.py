"""Random chains (any order the compiler accepts): random access, resume, optimisation, workers."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.dataset.spec import build, random_spec, run_fresh_many, take
from tests.helpers import digest

LIMIT = 60


def _full(spec: dict) -> list[str] | None:
    try:
        return take(build(spec), LIMIT)
    except th.errors.ConfigError:
        return None  # an order the compiler refuses (tested in test_errors)


@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_random_chain_properties(int_files: list[str], seed: int) -> None:
    r = random.Random(seed)
    spec = random_spec(r, int_files)
    full = _full(spec)
    assume(full is not None)
    assert full is not None
    ds = build(spec)
    # random access where promised: ds[i] is what iteration yields
    compiled = ds.compile()
    if compiled.lost is None and compiled.front is None:
        n = LIMIT if compiled.endless else len(ds)
        if not compiled.endless:
            assert n == len(full) or len(full) == LIMIT
        assert [digest(ds[i]) for i in range(min(n, LIMIT))] == full[:n]
    else:
        with pytest.raises(th.errors.RandomAccessError, match="step"):
            ds[0]
    # optimisation never changes the output
    assert take(build(spec, optimize=False), LIMIT) == full
    # resume after k elements, through JSON, in an optimised or unoptimised pipeline
    k = r.randint(0, len(full))
    it = iter(ds)
    for _ in range(k):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    assert len(json.dumps(state)) < 1024
    it2 = iter(build(spec, optimize=r.random() < 0.5))
    it2.set_state(state)
    assert take(it2, LIMIT - k) == full[k:]


def test_random_chains_resume_in_a_fresh_process(int_files: list[str]) -> None:
    try:
        import thresher.loader.pool.workers  # noqa: F401
        workers = True
    except ImportError:
        workers = False
    jobs, want = [], []
    seed = 0
    while len(jobs) < 16:
        seed += 1
        r = random.Random(10_000 + seed)
        spec = random_spec(r, int_files)
        full = _full(spec)
        if full is None:
            continue
        k = r.randint(0, len(full))
        it = iter(build(spec))
        for _ in range(k):
            next(it)
        jobs.append({"spec": spec, "state": json.loads(json.dumps(it.get_state())), "limit": LIMIT - k,
                     "optimize": r.random() < 0.5, "workers": r.choice([0, 0, 2]) if workers else 0})
        want.append(full[k:])
    assert run_fresh_many(jobs) == want


@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_random_chains_same_output_for_worker_counts(int_files: list[str], seed: int) -> None:
    r = random.Random(seed)
    spec = random_spec(r, int_files)
    full = _full(spec)
    assume(full is not None)
    assert full is not None
    for workers in (1, 2):
        assert take(build(spec, worker_count=workers), LIMIT) == full
    # a state taken with workers restores without them, and the reverse
    k = r.randint(0, len(full))
    a, b = r.sample([0, 1, 2], 2)
    it = iter(build(spec, worker_count=a))
    for _ in range(k):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    it.close()
    it2 = iter(build(spec, worker_count=b))
    it2.set_state(state)
    assert take(it2, LIMIT - k) == full[k:]
    it2.close()
