"""Weighted mixing: shares, each component's own stream, O(1) position -> component, resume, reweighting."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.dataset.spec import build, run_fresh_many, take
from tests.state_edits import edited
from thresher.dataset.mix import MixSchedule

D = th.Dataset


def _component(j: int, n: int = 1000, seed: int | None = None) -> th.Dataset:
    ds = D.range(j * 1_000_000, j * 1_000_000 + n)
    return (ds.shuffle(seed=seed) if seed is not None else ds).repeat()


@pytest.mark.parametrize("weights,seed", [([0.5, 0.3, 0.2], None), ([0.5, 0.3, 0.2], 11), ([1, 2], 3),
                                          ([0.07, 0.93], None), ([1, 1, 1, 1, 1, 1, 1], 5)])
def test_observed_shares_are_within_one_percent_of_the_weights(weights: list[float], seed: int | None) -> None:
    mix = D.mix([_component(j, seed=j) for j in range(len(weights))], weights, seed=seed).batch(1000)
    it = iter(mix)
    xs = np.concatenate([next(it) for _ in range(100)])  # 100,000 positions
    w = np.asarray(weights, dtype=float) / sum(weights)
    shares = np.bincount(xs // 1_000_000, minlength=len(w)) / len(xs)
    assert np.all(np.abs(shares - w) < 0.01), (shares, w)
    # and over any window of one period the counts are exact (largest remainder of w * period)
    head = xs[:1000] // 1_000_000
    assert np.bincount(head, minlength=len(w)).tolist() == MixSchedule(weights, 1000, seed).q


@given(weights=st.lists(st.integers(1, 20), min_size=1, max_size=5), period=st.integers(20, 200),
       seed=st.none() | st.integers(0, 2**64 - 1), g=st.integers(0, 10**12))
@settings(max_examples=200, deadline=None)
def test_schedule_is_closed_form_and_consistent(weights: list[int], period: int, seed: int | None, g: int) -> None:
    try:
        s = MixSchedule(weights, period, seed)
    except th.errors.ConfigError as e:  # a weight below one slot of the period
        assert "raise period" in str(e) and min(weights) / sum(weights) * period < 1
        return
    counts = s.counts(g)
    assert sum(counts) == g
    j, i = s.locate(g)
    assert i == counts[j]
    assert s.counts(g + 1) == [c + (k == j) for k, c in enumerate(counts)]
    assert s.position_of(j, i) == g
    # the weights as whole slots of a period, then the same share in every period
    w = np.asarray(weights) / sum(weights)
    q = np.asarray(s.q)
    assert np.all(np.abs(q / period - w) < 1 / period)
    assert np.all(np.abs(np.asarray(counts) - q / period * g) <= period)


def test_each_component_keeps_its_own_shuffle_and_epochs() -> None:
    comps = [D.range(0, 7).shuffle(seed=1).repeat(), D.range(100, 105).shuffle(seed=2).repeat(3)]
    mixed = list(D.mix(comps, [3, 1], period=8, seed=4))
    own = [list(c) if j else take_n(c, 100) for j, c in enumerate(comps)]
    got = [[x for x in mixed if (x >= 100) == bool(j)] for j in range(2)]
    assert got[1] == own[1]  # the finite component ran out: that ended the mixture
    assert got[0] == own[0][:len(got[0])]


def take_n(ds: th.Dataset, n: int) -> list:
    out = []
    for x in ds:
        out.append(x)
        if len(out) == n:
            break
    return out


def test_finite_mixture_ends_when_the_first_component_runs_out() -> None:
    mix = D.mix([D.range(0, 10), D.range(100, 130)], [1, 1], period=2)
    assert len(mix) == 20 and len(list(mix)) == 20
    assert mix[3] == 101 and mix[19] == 109


MIX_SPEC = {"source": ["mix", [
    {"source": ["range", 50], "steps": [["shuffle", 1], ["map", "inc"], ["repeat", None]]},
    {"source": ["range", 13], "steps": [["random_map", 3], ["shuffle", 2], ["repeat", None]]},
    {"source": ["range", 30], "steps": [["repeat", None]]}], [5, 3, 2], 9, 100],
    "steps": [["map", "scramble"], ["batch", 8, False]]}


def test_mixture_resumes_exactly_in_a_fresh_process_and_restores_in_constant_time() -> None:
    full = take(build(MIX_SPEC), 60)
    jobs, want = [], []
    for k in (0, 7, 33):
        it = iter(build(MIX_SPEC))
        for _ in range(k):
            next(it)
        state = json.loads(json.dumps(it.get_state()))
        assert len(json.dumps(state)) < 1024
        jobs.append({"spec": MIX_SPEC, "state": state, "limit": 60 - k})
        want.append(full[k:])
    assert run_fresh_many(jobs) == want
    # O(1) restore: position 8 * 10**11 costs what position 8 costs
    state = edited(jobs[1]["state"], position=8 * 10**11, global_position=8 * 10**11)  # re-signed
    it = iter(build(MIX_SPEC))
    t = time.perf_counter()
    it.set_state(state)
    next(it)
    assert time.perf_counter() - t < 0.5


def _mixture(weights: list[float]) -> th.Dataset:
    return D.mix([_component(j, n=500, seed=j) for j in range(3)], weights, seed=2).batch(50)


def test_changing_weights_after_a_checkpoint_continues_each_component() -> None:
    it = iter(_mixture([0.5, 0.3, 0.2]))
    before = np.concatenate([next(it) for _ in range(40)])  # 2,000 positions
    state = json.loads(json.dumps(it.get_state()))
    new = iter(_mixture([0.1, 0.1, 0.8]))
    with pytest.raises(th.errors.IncompatibleStateError, match="reweight=True"):
        new.set_state(state)
    new.set_state(state, reweight=True)
    after = np.concatenate([next(new) for _ in range(200)])  # 10,000 positions
    # the new weights apply from the saved position on
    shares = np.bincount(after // 1_000_000, minlength=3) / len(after)
    assert np.all(np.abs(shares - [0.1, 0.1, 0.8]) < 0.01)
    # and every component continues exactly where it stopped: its own stream, no gap, no repeat
    for j in range(3):
        seen = [int(x) for x in np.concatenate([before, after]) if x // 1_000_000 == j]
        assert seen == take_n(_component(j, n=500, seed=j), len(seen))
    # a state taken after the change restores in a fresh process (the segment is in the state)
    state2 = json.loads(json.dumps(new.get_state()))
    assert state2["dataset"]["mix"]["origin"] == 2000
    assert len(json.dumps(state2)) < 1024
    nxt = [next(new) for _ in range(3)]
    again = iter(_mixture([0.1, 0.1, 0.8]))
    again.set_state(state2)
    assert all(np.array_equal(a, next(again)) for a in nxt)


def test_reweighting_refuses_other_changes() -> None:
    it = iter(_mixture([0.5, 0.3, 0.2]))
    next(it)
    state = it.get_state()
    other = D.mix([_component(j, n=500, seed=j) for j in range(3)], [0.2, 0.3, 0.5], seed=2).batch(25)
    with pytest.raises(th.errors.IncompatibleStateError, match="more than the mixture weights"):
        iter(other).set_state(state, reweight=True)


def test_mix_weights_are_checked() -> None:
    with pytest.raises(th.errors.ConfigError, match="weights"):
        D.mix([D.range(3), D.range(3)], [1.0])
    with pytest.raises(th.errors.ConfigError, match="period"):
        D.mix([D.range(3), D.range(3)], [1.0, 1e-6])
    with pytest.raises(th.errors.ConfigError, match="random-access components"):
        list(D.mix([D.range(3).filter(bool), D.range(3)]))


def test_mixture_same_output_for_worker_counts() -> None:
    full = take(build(MIX_SPEC), 60)
    for workers in (1, 2):
        assert take(build(MIX_SPEC, worker_count=workers), 60) == full
