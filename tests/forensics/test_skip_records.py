"""The record blocklist (``skip_records``): blocked records are never delivered, everything
else stays where it was, on every process, for every worker count, and after resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.forensics.pipelines import Spec, specs
from thresher.errors import ConfigError, InvalidStateError


def keys_of(batches: list[np.ndarray]) -> list[list[int]]:
    return [b[:, 0].tolist() for b in batches]


def without(full: list[np.ndarray], blocked: set[int]) -> list[np.ndarray]:
    """The batches of the run with a blocklist: each step's rows less the blocked ones; empty steps vanish."""
    out = []
    for b in full:
        keep = np.array([int(k) not in blocked for k in b[:, 0]], dtype=bool)
        if keep.any():
            out.append(b[keep])
    return out


def assert_batches_equal(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert keys_of(got) == keys_of(want)
    for x, y in zip(got, want, strict=True):
        np.testing.assert_array_equal(x, y)


@settings(max_examples=30, deadline=None)
@given(specs, st.data())
def test_blocked_records_leave_every_other_element_in_place(spec: Spec, data: st.DataObject) -> None:
    blocked = data.draw(st.sets(st.integers(0, spec.num_records - 1), max_size=6), label="blocked")
    workers = data.draw(st.sampled_from([0, 0, 2]), label="workers")
    mode = data.draw(st.sampled_from(["process", "thread"]), label="worker_mode")
    for i in range(spec.shard_count):
        full = [np.asarray(b) for b in spec.loader(i)]
        got = [np.asarray(b) for b in spec.loader(i, workers, skip_records=blocked, worker_mode=mode)]
        assert_batches_equal(got, without(full, blocked))


@settings(max_examples=25, deadline=None)
@given(specs, st.data())
def test_blocklist_given_on_resume_is_kept_by_later_states(spec: Spec, data: st.DataObject) -> None:
    """set_state(..., skip_records=...), then save part way and restore that state elsewhere
    (another worker count, a loader without the option): the blocklist holds."""
    full = [np.asarray(b) for b in spec.loader(0)]
    stop = data.draw(st.integers(0, len(full)), label="stop")
    blocked = data.draw(st.sets(st.integers(0, spec.num_records - 1), max_size=5), label="blocked")
    it = iter(spec.loader(0))
    before = [np.asarray(next(it)) for _ in range(stop)]
    state = it.get_state()
    resumed = iter(spec.loader(0))
    resumed.set_state(state, skip_records=blocked)
    want = without(full[stop:], blocked)
    k = data.draw(st.integers(0, len(want)), label="k")
    got = [np.asarray(next(resumed)) for _ in range(k)]
    saved = json.loads(json.dumps(resumed.get_state()))
    if blocked:
        assert saved["dataset"]["skip_records"]
    again = iter(spec.loader(0, data.draw(st.sampled_from([0, 2]), label="workers")))
    again.set_state(saved)
    got += [np.asarray(b) for b in again]
    assert len(before) == stop
    assert_batches_equal(got, want)


@settings(max_examples=20, deadline=None)
@given(specs, st.data())
def test_blocklist_survives_a_change_of_process_count(spec: Spec, data: st.DataObject) -> None:
    P, B = spec.shard_count, spec.batch_size
    spec = Spec(**{**spec.__dict__, "drop_remainder": True})
    one = spec.loader(0, shard_count=1, batch_size=P * B)
    full = [np.asarray(b) for b in one]
    stop = data.draw(st.integers(0, len(full)), label="stop")
    blocked = data.draw(st.sets(st.integers(0, spec.num_records - 1), max_size=5), label="blocked")
    its = [iter(spec.loader(i)) for i in range(P)]
    for it in its:
        for _ in range(stop):
            next(it)
        it.set_state(it.get_state(), skip_records=blocked)
    it1 = iter(one)
    it1.set_state(its[0].get_state())
    assert_batches_equal([np.asarray(b) for b in it1], without(full[stop:], blocked))


def test_with_a_filter_before_the_batch_a_blocked_record_goes_as_filtered_ones_do() -> None:
    src = th.sources.RangeDataSource(0, 40)
    sampler = th.IndexSampler(40, shuffle=True, seed=5, num_epochs=2)
    blocked = {3, 17, 30}
    odd = th.FilterTransform(lambda x: x % 3 != 0)
    both = th.FilterTransform(lambda x: x % 3 != 0 and x not in blocked)
    for workers in (0, 2):
        got = [b.tolist() for b in th.DataLoader(src, sampler, [odd, th.Batch(4)], worker_count=workers,
                                                 skip_records=blocked)]
        assert got == [b.tolist() for b in th.DataLoader(src, sampler, [both, th.Batch(4)])]


def test_a_file_of_keys_and_explain_lists_blocked_records(tmp_path) -> None:
    path = tmp_path / "spikes.txt"
    path.write_text("# records behind the spike at step 2\n5\n\n9  # the other one\n")
    loader = th.DataLoader(th.sources.RangeDataSource(0, 12), th.IndexSampler(12), [th.Batch(4)],
                           skip_records=path)
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 6, 7], [8, 10, 11]]
    p = th.explain(loader, 1)
    assert p.blocked.tolist() == [False, True, False, False]
    assert "blocked: never delivered" in str(p)
    plain = th.DataLoader(th.sources.RangeDataSource(0, 12), th.IndexSampler(12), [th.Batch(4)])
    it = iter(plain)
    it.set_state(it.get_state(), skip_records=str(path))
    assert th.explain(plain, 2, state=it.get_state()).blocked.tolist() == [False, True, False, False]
    assert th.explain(it, 2).blocked.any()


def test_bad_blocklists_are_refused_naming_the_key(tmp_path) -> None:
    src, sampler = th.sources.RangeDataSource(0, 12), th.IndexSampler(12)
    with pytest.raises(ConfigError, match=r"12 is not a record key"):
        th.DataLoader(src, sampler, skip_records=[1, 12])
    bad = tmp_path / "keys.txt"
    bad.write_text("1\nseven\n")
    with pytest.raises(ConfigError, match=r"keys\.txt, line 2"):
        th.DataLoader(src, sampler, skip_records=bad)
    with pytest.raises(ConfigError, match="cannot read"):
        th.DataLoader(src, sampler, skip_records=tmp_path / "missing.txt")
    state = iter(th.DataLoader(src, sampler)).get_state()
    state["dataset"] = {"skip_records": [[4, 2]]}
    with pytest.raises(InvalidStateError, match="skip_records"):
        iter(th.DataLoader(src, sampler)).set_state(state)


def test_a_step_whose_records_are_all_blocked_is_not_produced() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 12), th.IndexSampler(12), [th.Batch(4)],
                           skip_records=range(4, 8), worker_count=2)
    it = iter(loader)
    assert next(it).tolist() == [0, 1, 2, 3]
    assert it.get_state()["position"] == 4
    assert [b.tolist() for b in it] == [[8, 9, 10, 11]]
