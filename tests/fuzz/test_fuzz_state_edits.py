"""Edited states are refused: every state set_state accepts is one the run produced, and resumes it.

Each pipeline (plain, filter, sharded, mix, pack; cheap in-memory sources, no workers) is run
to its end (or 24 steps) keeping every state ``get_state()`` gave and every batch. Hypothesis
then edits a saved state (one to four fields at any depth: a nearby number, a flipped bool, the
same field of another saved state, a deletion, any JSON) and calls ``set_state``. The call must
raise a thresher error, or the edited state must equal (as JSON) a state of the run and the
next batches must be the run's batches from there. Under CI's derandomized profile this is
``EXAMPLES`` edited states per pipeline, each with up to four edits.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.fuzz.guards import JSON, json_paths, only_thresher_errors

EXAMPLES = 600
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
STEPS = 24  # states kept of an endless pipeline
FOLLOW = 3  # batches compared after an accepted state


def _pipelines() -> dict[str, Callable[[], Any]]:
    src = th.sources.RangeDataSource(0, 60)
    return {
        "plain": lambda: iter(th.DataLoader(src, th.IndexSampler(60, shuffle=True, seed=1, num_epochs=2),
                                            [lambda x: x + 1, th.Batch(8)])),
        "filter": lambda: iter(th.DataLoader(src, th.IndexSampler(60, shuffle=True, seed=2),
                                             [th.FilterTransform(lambda x: x % 3 != 0), th.Batch(4)])),
        "sharded": lambda: iter(th.DataLoader(src, th.IndexSampler(60, shuffle=True, seed=3,
                                                                   shard_options=th.ShardOptions(1, 3)),
                                              [th.Batch(4)])),
        "mix": lambda: iter(th.Dataset.mix([th.Dataset.range(10).repeat(), th.Dataset.range(50, 60).repeat()],
                                           weights=[0.7, 0.3], seed=1).batch(4)),
        "pack": lambda: iter(th.Dataset.source([[i] * (i % 7 + 1) for i in range(40)]).pack(16).batch(3)),
    }


PIPELINES = _pipelines()


def _canonical(state: Any) -> str:
    return json.dumps(state, sort_keys=True, separators=(",", ":"))


def _plain(batch: Any) -> Any:
    if isinstance(batch, dict):
        return {k: _plain(v) for k, v in sorted(batch.items())}
    return batch.tolist() if hasattr(batch, "tolist") else batch


class Run:
    """The states and batches of one pipeline's run: ``states[k]`` is the state before ``batches[k]``."""

    def __init__(self, kind: str) -> None:
        it = PIPELINES[kind]()
        self.states: list[dict[str, Any]] = [json.loads(json.dumps(it.get_state()))]
        self.batches: list[Any] = []
        for step in range(STEPS + FOLLOW):  # the batches after the last state kept too
            try:
                self.batches.append(_plain(next(it)))
            except StopIteration:
                break
            if step < STEPS:
                self.states.append(json.loads(json.dumps(it.get_state())))
        self.first: dict[str, int] = {}
        for k, s in enumerate(self.states):
            self.first.setdefault(_canonical(s), k)
        assert len(self.first) > 3, f"{kind}: too few distinct states to edit"

    def check(self, kind: str, state: Any, note: str) -> bool:
        """Applies ``state`` to a fresh iterator: True if accepted (then it must be a state of this run)."""
        it = PIPELINES[kind]()
        if only_thresher_errors(lambda: it.set_state(state)) is not None:
            return False
        k = self.first.get(_canonical(state))
        assert k is not None, f"{kind}: an edited state no run produced was accepted ({note}): {state}"
        got = []
        for _ in range(FOLLOW):
            try:
                got.append(_plain(next(it)))
            except StopIteration:
                break
        assert got == self.batches[k:k + FOLLOW], f"{kind}: the state of step {k} resumed elsewhere ({note})"
        return True


RUNS = {kind: Run(kind) for kind in PIPELINES}


def _nearby(value: Any) -> list[Any]:
    """Values a person or a script would put there: close numbers, flipped flags, 2**31, the same."""
    if isinstance(value, bool):
        return [not value, value, int(value), None]
    if isinstance(value, int):
        return [value + 1, value - 1, value + 3, value + 4, 2 * value, value // 2, 0, 1, 2**31, 2**62, -value,
                value, float(value)]
    if isinstance(value, float):
        return [value + 0.1, 1 - value, 0.0, value, *([int(value)] if math.isfinite(value) else [])]
    if isinstance(value, str):
        return [value[::-1], value[:-1] + ("0" if value[-1:] != "0" else "1"), "", value]
    return [None, [], {}]


def _get(state: Any, path: tuple) -> Any:
    for key in path:
        state = state[key]
    return state


@st.composite
def edits(draw: st.DrawFn, kind: str) -> tuple[dict[str, Any], list[str]]:
    run = RUNS[kind]
    state = copy.deepcopy(draw(st.sampled_from(run.states)))
    notes = []
    for _ in range(draw(st.integers(1, 4))):
        paths = json_paths(state)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _get(state, path[:-1])
        old = parent[path[-1]]
        how = draw(st.sampled_from(["nearby", "nearby", "other run state", "delete", "json"]))
        if how == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
            notes.append(f"del {list(path)}")
            continue
        if how == "other run state":
            try:
                new = _get(draw(st.sampled_from(run.states)), path)
            except (KeyError, IndexError, TypeError):
                new = old
        elif how == "json":
            new = draw(JSON)
        else:
            new = draw(st.sampled_from(_nearby(old)))
        parent[path[-1]] = copy.deepcopy(new)
        notes.append(f"{list(path)}: {old!r} -> {new!r}")
    return state, notes


@pytest.mark.parametrize("kind", sorted(PIPELINES))
@SETTINGS
@given(data=st.data())
def test_every_accepted_edited_state_is_a_state_of_the_run(kind: str, data: st.DataObject) -> None:
    state, notes = data.draw(edits(kind))
    RUNS[kind].check(kind, state, "; ".join(notes))


@pytest.mark.parametrize("kind", sorted(PIPELINES))
def test_every_saved_state_restores_to_its_batches(kind: str) -> None:
    run = RUNS[kind]
    for state in run.states:
        assert run.check(kind, state, "unedited"), f"{kind}: a saved state was refused: {state}"


@pytest.mark.parametrize("kind", sorted(PIPELINES))
def test_every_field_of_every_state_nudged_is_refused(kind: str) -> None:
    """Exhaustive, not sampled: each field of each saved state set to each nearby value that differs."""
    run = RUNS[kind]
    it = PIPELINES[kind]()  # refusals leave it as it was; a fresh one is made after an acceptance
    tried = 0
    for saved in run.states:
        for path in json_paths(saved):
            old = _get(saved, path)
            for value in _nearby(old):
                if _canonical(value) == _canonical(old):
                    continue
                state = copy.deepcopy(saved)
                _get(state, path[:-1])[path[-1]] = value
                tried += 1
                err = only_thresher_errors(lambda: it.set_state(state))  # noqa: B023 - called at once
                if err is None:
                    assert _canonical(state) in run.first, f"{kind}: {list(path)} = {value!r} was accepted"
                    it = PIPELINES[kind]()
    assert tried > 100


@pytest.mark.parametrize("edit", [
    {"position": 11},
    {"position": 11, "aligned": False},
    {"position": 11, "block_size": 3},
    {"position": 11, "batch_size": 2**31},
    {"position": 11, "block_size": 1, "batch_size": 1, "aligned": False},
])
def test_position_and_geometry_edited_together_are_refused(edit: dict[str, Any]) -> None:
    """The issue's cases: a position +3 inside a batch, with the geometry fields that made it pass."""
    for kind in ("plain", "sharded"):
        state = copy.deepcopy(RUNS[kind].states[2])
        state["position"] += edit["position"] - 8
        for key in ("aligned", "block_size", "batch_size"):
            if key in edit:
                state["geometry"][key] = edit[key]
        with pytest.raises(th.errors.InvalidStateError, match="changed after it was saved|the state was edited"):
            PIPELINES[kind]().set_state(state)  # the digest, or a check of the geometry that comes before it


def test_one_states_position_with_anothers_rows_is_refused() -> None:
    run = RUNS["pack"]
    rows = [s for s in run.states if s["dataset"]["pack"]["rows"]]
    assert rows, "a packed run saves states inside a window"
    for a in run.states:
        for b in rows:
            spliced = copy.deepcopy(a)
            spliced["dataset"]["pack"]["rows"] = b["dataset"]["pack"]["rows"]
            if _canonical(spliced) in run.first:
                continue
            with pytest.raises(th.errors.InvalidStateError, match="changed after it was saved"):
                PIPELINES["pack"]().set_state(spliced)
