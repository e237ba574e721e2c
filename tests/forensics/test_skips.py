"""Skipping steps on resume: skipped steps are never produced, every other step is unchanged."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import thresher as th
from tests.forensics.pipelines import Spec, specs
from thresher.errors import ConfigError, InvalidStateError


def run(it: th.DataLoaderIterator) -> list[np.ndarray]:
    return [np.asarray(b) for b in it]


def resumed(spec: Spec, i: int, stop: int, skip: range, workers: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(batches before the stop, batches after a restore with ``skip``) of process i."""
    it = iter(spec.loader(i))
    before = [np.asarray(next(it)) for _ in range(stop)]
    state = json.loads(json.dumps(it.get_state()))
    it.close()
    again = iter(spec.loader(i, workers))
    again.set_state(state, skip_steps=skip)
    return before, run(again)


@settings(max_examples=40, deadline=None)
@given(specs, st.data())
def test_skipped_steps_leave_every_other_step_identical(spec: Spec, data: st.DataObject) -> None:
    for i in range(spec.shard_count):
        full = run(iter(spec.loader(i)))
        stop = data.draw(st.integers(0, len(full)), label="stop")
        a = data.draw(st.integers(0, len(full) + 2), label="a")
        b = data.draw(st.integers(a, len(full) + 3), label="b")
        workers = data.draw(st.sampled_from([0, 0, 0, 2]), label="workers")
        before, after = resumed(spec, i, stop, range(a, b), workers)
        want = [x for t, x in enumerate(full) if t >= stop and not a <= t < b]
        assert len(after) == len(want)
        for x, y in zip(after, want):
            np.testing.assert_array_equal(x, y)


@settings(max_examples=25, deadline=None)
@given(specs, st.data())
def test_skips_are_kept_by_later_states(spec: Spec, data: st.DataObject) -> None:
    """Restore with skips, save again part way, restore that state in a fresh iterator: same stream."""
    full = run(iter(spec.loader(0)))
    a = data.draw(st.integers(0, len(full)), label="a")
    b = data.draw(st.integers(a, len(full) + 1), label="b")
    it = iter(spec.loader(0))
    it.set_state(it.get_state(), skip_steps=range(a, b))
    want = [x for t, x in enumerate(full) if not a <= t < b]
    k = data.draw(st.integers(0, len(want)), label="k")
    got = [np.asarray(next(it)) for _ in range(k)]
    state = json.loads(json.dumps(it.get_state()))
    if b > a:
        assert state["dataset"]["skips"]
    again = iter(spec.loader(0))
    again.set_state(state)
    got += run(again)
    assert len(got) == len(want)
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)
    if a < b and a < len(full):
        assert th.explain(again, a).skipped and th.explain(spec.loader(0), a, state=state).skipped
    assert not any(th.explain(again, t).skipped for t in range(len(full)) if not a <= t < b)


@settings(max_examples=25, deadline=None)
@given(specs, st.data())
def test_skips_survive_a_change_of_process_count(spec: Spec, data: st.DataObject) -> None:
    """Skips saved on P processes, restored on one process with the same global batch."""
    spec = Spec(**{**spec.__dict__, "drop_remainder": True})
    steps = len(run(iter(spec.loader(0, shard_count=1, batch_size=spec.shard_count * spec.batch_size))))
    stop = data.draw(st.integers(0, steps), label="stop")
    a = data.draw(st.integers(stop, steps + 1), label="a")
    b = data.draw(st.integers(a, steps + 2), label="b")
    skips_across_process_count(spec, stop, a, b)


def test_skips_to_the_end_of_uneven_shards_restore_on_one_process() -> None:
    """Found by the property test above: the skip runs to the end of the stream, whose last round
    leaves shard 0 a partial block (position 39 of 25 x 3 positions in blocks of 4 on 2 shards)."""
    spec = Spec(num_records=25, shuffle=False, seed=0, num_epochs=3, shard_count=2, random_maps=0,
                extra_map=False, batch_size=4, drop_remainder=True)
    skips_across_process_count(spec, 4, 4, 10)
    skips_across_process_count(Spec(**{**spec.__dict__, "shuffle": True, "num_records": 27}), 2, 3, 12)


def skips_across_process_count(spec: Spec, stop: int, a: int, b: int) -> None:
    P, B = spec.shard_count, spec.batch_size
    one = spec.loader(0, shard_count=1, batch_size=P * B)
    full = run(iter(one))
    its = [iter(spec.loader(i)) for i in range(P)]
    for it in its:
        for _ in range(stop):
            next(it)
        it.set_state(it.get_state(), skip_steps=range(a, b))
    states = [it.get_state() for it in its]
    for st_ in states[1:]:
        assert st_.get("dataset") == states[0].get("dataset")
    it1 = iter(one)
    it1.set_state(states[0])
    want = [x for t, x in enumerate(full) if t >= stop and not a <= t < b]
    got = run(it1)
    assert len(got) == len(want)
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)


def test_skip_steps_refused_where_steps_depend_on_data() -> None:
    keep = th.FilterTransform(lambda x: x % 3 != 0)
    it = iter(th.DataLoader(th.sources.RangeDataSource(0, 30), th.IndexSampler(30), [keep, th.Batch(4)]))
    with pytest.raises(ConfigError, match="cannot skip steps: .*Filter"):
        it.set_state(it.get_state(), skip_steps=range(1, 2))
    blocks = th.IndexSampler(30, shard_options=th.ShardOptions(0, 2, block_size=1))
    it = iter(th.DataLoader(th.sources.RangeDataSource(0, 30), blocks, [th.Batch(4)]))
    with pytest.raises(ConfigError, match="block size"):
        it.set_state(it.get_state(), skip_steps=range(1, 2))
    with pytest.raises(ConfigError, match="range"):
        it.set_state(it.get_state(), skip_steps=[1, 2])  # type: ignore[arg-type]


def test_malformed_skips_in_a_state_are_refused() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 30), th.IndexSampler(30), [th.Batch(4)])
    state = iter(loader).get_state()
    state["dataset"] = {"skips": [[5, 2]]}
    with pytest.raises(InvalidStateError, match="skips"):
        iter(loader).set_state(state)
