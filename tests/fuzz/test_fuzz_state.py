"""set_state against random and edited states: a thresher error or a working iterator."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.fuzz.guards import JSON, json_paths, only_thresher_errors

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _iterators() -> dict[str, Any]:
    src = th.sources.RangeDataSource(0, 100)
    return {
        "batch": lambda: iter(th.DataLoader(src, th.IndexSampler(100, shuffle=True, seed=1, num_epochs=2),
                                            [lambda x: x + 1, th.Batch(8)])),
        "filter": lambda: iter(th.DataLoader(src, th.IndexSampler(100, num_epochs=None),
                                             [th.FilterTransform(lambda x: x % 3 != 0), th.Batch(4)])),
        "shard": lambda: iter(th.DataLoader(src, th.IndexSampler(100, shard_options=th.ShardOptions(1, 2)),
                                            [th.Batch(5, drop_remainder=True)])),
        "mix": lambda: iter(th.Dataset.mix([th.Dataset.range(10).repeat(), th.Dataset.range(50, 60).repeat()],
                                           weights=[0.5, 0.5], seed=1).batch(4)),
        "pack": lambda: iter(th.Dataset.source([[1] * (i % 7 + 1) for i in range(60)]).pack(16).batch(2)),
        "merged": _after_a_host_change,
    }


def _after_a_host_change() -> Any:
    """A process of a run restored on 2 processes from a merged state of 3, with a blocklist: its
    states carry ``consumed`` (watermark and layers) and ``skip_records``."""
    def loader(i: int, n: int) -> th.DataLoader:
        sampler = th.IndexSampler(100, shuffle=True, seed=3, num_epochs=2, shard_options=th.ShardOptions(i, n))
        return th.DataLoader(th.sources.RangeDataSource(0, 100), sampler,
                             [th.FilterTransform(lambda x: x % 3 != 0), th.Batch(4)])

    its = [iter(loader(i, 3)) for i in range(3)]
    for i, it in enumerate(its):
        for _ in range(i + 1):
            next(it)
    merged = th.merge_states([it.get_state() for it in its])
    it = iter(loader(0, 2))
    it.set_state(merged, skip_records=[5, 6, 7, 50])
    return it


ITERATORS = _iterators()


def _saved(kind: str) -> dict[str, Any]:
    it = ITERATORS[kind]()
    next(it)
    next(it)
    return json.loads(json.dumps(it.get_state()))


SAVED = {kind: _saved(kind) for kind in ITERATORS}


def _apply(kind: str, state: Any) -> None:
    it = ITERATORS[kind]()
    it.set_state(state)
    for _ in range(3):  # an accepted state must also iterate (or end) cleanly
        try:
            next(it)
        except StopIteration:
            break



@pytest.mark.parametrize("kind", sorted(ITERATORS))
@SETTINGS
@given(state=JSON)
def test_random_json_is_refused_with_a_thresher_error(kind: str, state: Any) -> None:
    err = only_thresher_errors(lambda: _apply(kind, state))
    assert err is not None, f"a random value was accepted as a state: {state!r}"


@pytest.mark.parametrize("kind", sorted(ITERATORS))
@SETTINGS
@given(data=st.data(), value=JSON, delete=st.booleans())
def test_edited_states_raise_thresher_errors_or_work(kind: str, data: st.DataObject, value: Any,
                                                     delete: bool) -> None:
    state = copy.deepcopy(SAVED[kind])
    path = data.draw(st.sampled_from(json_paths(state)))
    parent = state
    for key in path[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    only_thresher_errors(lambda: _apply(kind, state))


@pytest.mark.parametrize("kind", sorted(ITERATORS))
@SETTINGS
@given(position=st.one_of(st.integers(), st.sampled_from([-1, 2**63, 2**64, 10**9, 10**30, 35])))
def test_any_position_raises_a_thresher_error_or_iterates(kind: str, position: int) -> None:
    state = dict(SAVED[kind], position=position)
    only_thresher_errors(lambda: _apply(kind, state))


def test_the_saved_states_themselves_restore() -> None:
    for kind in ITERATORS:
        assert only_thresher_errors(lambda: _apply(kind, SAVED[kind])) is None, kind


HOSTILE = [-1, 2**62 + 1, 2**63, 2**64 + 1, -(2**63) - 1, 10**30, 1.5, float("nan"), None, True, "0", [], {}]


@pytest.mark.parametrize("kind", sorted(ITERATORS))
def test_every_field_set_to_every_hostile_value(kind: str) -> None:
    """Exhaustive, not sampled: each path of a saved state, set to each hostile scalar (the
    random search above once found a mix offset of 2**63 overflowing int64 this way)."""
    for path in json_paths(SAVED[kind]):
        for value in HOSTILE:
            state = copy.deepcopy(SAVED[kind])
            parent = state
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = value
            try:
                only_thresher_errors(lambda: _apply(kind, state))
            except AssertionError as e:
                raise AssertionError(f"{kind}: state{list(path)} = {value!r}: {e}") from e
