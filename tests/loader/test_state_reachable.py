"""A state is applied only at a position iteration could have reached (invariant 5)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.state_edits import edited
from thresher.errors import InvalidStateError


def _loader(n: int, ops: list, **kw: object) -> th.DataLoader:
    return th.DataLoader(th.sources.RangeDataSource(0, n), th.IndexSampler(n, shuffle=True, seed=3), ops, **kw)


def _edited(loader: th.DataLoader, position: int) -> dict:
    """A state at ``position``, re-signed (tests/state_edits.py): the position checks behind the digest."""
    it = iter(loader)
    state = it.get_state()
    it.close()
    return edited(json.loads(json.dumps(state)), position=position)


def test_an_edited_position_is_refused_by_the_digest_even_where_reachable() -> None:
    loader = _loader(64, [th.Batch(8)])
    it = iter(loader)
    state = dict(it.get_state(), position=16)  # a reachable position, but not this state's
    with pytest.raises(InvalidStateError, match="changed after it was saved"):
        it.set_state(state)


def test_mid_batch_position_is_refused_naming_the_batch_size() -> None:
    loader = _loader(64, [th.Batch(8)])
    with pytest.raises(InvalidStateError, match=r"position 35 is inside a batch \(batches of 8"):
        iter(loader).set_state(_edited(loader, 35))


def test_position_past_the_end_is_refused_not_a_bare_stop_iteration() -> None:
    loader = _loader(64, [th.Batch(8)])
    with pytest.raises(InvalidStateError, match="past the end"):
        iter(loader).set_state(_edited(loader, 10**9))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), b=st.integers(1, 9), drop=st.booleans(), data=st.data())
def test_exactly_the_reachable_positions_are_accepted(n: int, b: int, drop: bool, data: st.DataObject) -> None:
    loader = _loader(n, [th.Batch(b, drop_remainder=drop)])
    # Every state iteration produces is accepted and resumes with the same batches.
    it = iter(loader)
    states, batches = [it.get_state()], []
    for batch in it:
        batches.append(batch.tolist())
        states.append(it.get_state())
    for k, state in enumerate(states):
        it2 = iter(loader)
        it2.set_state(json.loads(json.dumps(state)))
        assert [x.tolist() for x in it2] == batches[k:]
    reachable = {s["position"] for s in states}
    p = data.draw(st.integers(0, n + 3))
    it3 = iter(loader)
    if p in reachable or (p % b == 0 and p <= n) or p == n:
        it3.set_state(_edited(loader, p))
    else:
        with pytest.raises(InvalidStateError):
            it3.set_state(_edited(loader, p))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), p=st.integers(0, 40))
def test_without_a_batch_or_with_a_filter_before_it_any_position_inside_the_stream_is_reachable(n: int, p: int) -> None:
    for ops in ([lambda x: x + 1], [th.FilterTransform(lambda x: x % 3 != 0), th.Batch(4)]):
        loader = _loader(n, ops)
        it = iter(loader)
        if p <= n:
            it.set_state(_edited(loader, p))
        else:
            with pytest.raises(InvalidStateError, match="past the end"):
                it.set_state(_edited(loader, p))
