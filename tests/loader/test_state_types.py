"""The typed state: JSON round trips, old saved states, validation in one place, the geometry."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import thresher as th
from tests.state_edits import resign
from thresher.errors import InvalidStateError
from thresher.dataset.mix import MixSegment
from thresher.dataset.packing import PackRows
from thresher.loader.state_types import Extensions, Geometry, LoaderState, StreamId
from thresher.samplers.geometry import ShardGeometry

# Saved by thresher before the state was typed (same JSON format, version 1).
OLD_LOADER_STATE = {
    "version": 1, "position": 8, "global_position": 16, "fingerprint": "972e7a1c81db7c65",
    "stream": {"num_records": 40, "shuffle": True, "seed": 5, "num_epochs": 1,
               "operations": "609e5242415c3364"},
    "geometry": {"shard_index": 1, "shard_count": 2, "block_size": 4, "batch_size": 4,
                 "drop_remainder": False, "aligned": True},
    "operations": ["Map(_plus_one)", "Batch(4, drop_remainder=False)"],
}  # fmt: skip
OLD_MIX_STATE = {
    "version": 1, "position": 4, "global_position": 4, "fingerprint": "c325dfc605a7b699",
    "stream": {"num_records": 40, "shuffle": False, "seed": None, "num_epochs": 1,
               "operations": "3c915601e4a40999"},
    "geometry": {"shard_index": 0, "shard_count": 1, "block_size": 4, "batch_size": 4,
                 "drop_remainder": False, "aligned": True},
    "operations": ["Batch(4, drop_remainder=False)"],
    "dataset": {"mix": {"weights": [0.5, 0.5], "origin": 0, "offsets": [0, 0]}},
}  # fmt: skip


def _plus_one(x: int) -> int:
    return x + 1


def test_states_saved_before_digests_are_refused_then_restore_after_upgrade_state() -> None:
    """Version 1 (no digest) is refused by set_state, naming the way; upgrade_state keeps every field."""
    for old in (OLD_LOADER_STATE, OLD_MIX_STATE):
        with pytest.raises(InvalidStateError, match=r"version 1.*thresher.upgrade_state\(state\)"):
            LoaderState.from_json(old)
        up = th.upgrade_state(json.dumps(old).encode())  # Grain-style bytes too
        assert up["version"] == 2 and {k: v for k, v in up.items() if k not in ("version", "digest")} == {
            k: v for k, v in old.items() if k != "version"}
        assert LoaderState.from_json(up).to_json() == up and th.upgrade_state(up) == up
    sampler = th.IndexSampler(40, shuffle=True, seed=5, shard_options=th.ShardOptions(1, 2))
    loader = th.DataLoader(th.sources.RangeDataSource(0, 40), sampler, [_plus_one, th.Batch(4)])
    it = iter(loader)
    with pytest.raises(InvalidStateError, match="upgrade_state"):
        it.set_state(OLD_LOADER_STATE)
    it.set_state(th.upgrade_state(OLD_LOADER_STATE))
    whole = iter(loader)
    for _ in range(2):
        next(whole)
    assert next(it).tolist() == next(whole).tolist()
    ds = th.Dataset.mix([th.Dataset.range(20), th.Dataset.range(30)], [0.5, 0.5], seed=1).batch(4)
    it2, whole2 = iter(ds), iter(ds)
    with pytest.raises(InvalidStateError, match="upgrade_state"):
        it2.set_state(OLD_MIX_STATE)
    it2.set_state(th.upgrade_state(OLD_MIX_STATE))
    next(whole2)
    assert next(it2).tolist() == next(whole2).tolist()


@pytest.mark.parametrize("bad", [
    dict(OLD_LOADER_STATE, position=-1),  # malformed: every check of set_state runs
    dict(OLD_LOADER_STATE, version=3),
    dict(OLD_LOADER_STATE, digest="0" * 32),  # version 1 never had a digest
    dict(OLD_LOADER_STATE, fingerprint="0" * 16),
])
def test_upgrade_state_refuses_what_set_state_would(bad: dict) -> None:
    with pytest.raises(InvalidStateError):
        th.upgrade_state(bad)


@given(
    position=st.integers(0, 10**12),
    index=st.integers(0, 7),
    count=st.integers(1, 8),
    block=st.integers(1, 64),
    batch=st.one_of(st.none(), st.integers(1, 64)),
    aligned=st.booleans(),
    rows=st.one_of(st.none(), st.integers(0, 100)),
    mixed=st.booleans(),
)
def test_to_json_from_json_round_trip(
    position: int,
    index: int,
    count: int,
    block: int,
    batch: int | None,
    aligned: bool,
    rows: int | None,
    mixed: bool,
) -> None:
    aligned = aligned and batch is not None and (block == batch or count == 1)  # as loaders make them
    geometry = Geometry(index % count, count, block, batch, False, aligned)
    extensions = Extensions()
    if mixed:
        extensions = extensions.with_(MixSegment((0.25, 0.75), 3, (1, 2)))
    if rows is not None:
        extensions = extensions.with_(PackRows(rows))
    state = LoaderState.at(
        position, StreamId(10, True, 3, None, "abc"), geometry, ("Map(f)",), extensions
    )
    d = json.loads(json.dumps(state.to_json()))
    assert LoaderState.from_json(d) == state
    assert len(json.dumps(d)) < 1024


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.pop("position"),
        lambda d: d.update(position=-1),
        lambda d: d.update(position=True),
        lambda d: d.update(version=3),
        lambda d: d["geometry"].update(shard_index=2),
        lambda d: d["geometry"].update(block_size=0),
        lambda d: d["stream"].pop("seed"),
        lambda d: d["stream"].update(seed=6),  # the fingerprint no longer matches
        lambda d: d.update(dataset={"mix": {"weights": [1.0], "origin": "0", "offsets": [0]}}),
        lambda d: d.update(slowest_of=3, slowest_global_position=4),
        lambda d: d["geometry"].update(block_size=3),  # aligned, 2 shards: blocks are batches
        lambda d: d["geometry"].update(batch_size=None),  # aligned without a batch
    ],
)
def test_every_malformed_state_is_refused_by_from_json(edit) -> None:  # type: ignore[no-untyped-def]
    """Each field's own check, behind the digest: the edited states are re-signed (tests/state_edits.py)."""
    d = json.loads(json.dumps(th.upgrade_state(OLD_LOADER_STATE)))
    edit(d)
    with pytest.raises(InvalidStateError):
        LoaderState.from_json(resign(d))


@given(
    position=st.integers(0, 10**6),
    index=st.integers(0, 7),
    count=st.integers(1, 8),
    block=st.integers(1, 16),
)
def test_shard_geometry_is_the_samplers_arithmetic(
    position: int, index: int, count: int, block: int
) -> None:
    geometry = ShardGeometry(index % count, count, block)
    sampler = th.IndexSampler(
        10**7, shard_options=th.ShardOptions(index % count, count, block_size=block)
    )
    assert geometry.to_global(position) == sampler[position].global_position
    assert geometry.to_global_array(np.array([position]))[0] == geometry.to_global(position)
    start = geometry.step_start(position)
    if count == 1:
        assert start == position  # one shard: local positions are global ones
    elif (
        start is not None
    ):  # every shard is at a whole number of rounds: all positions before are taken
        assert (
            start % geometry.round_size == 0
            and start <= geometry.to_global(position) < start + geometry.round_size
        )
    else:
        assert position % block != 0


def test_an_extension_this_thresher_does_not_know_is_refused() -> None:
    """A layer's state is registered by that layer; a key no layer registered is refused, not dropped."""
    from tests.state_edits import resign

    state = LoaderState.at(8, StreamId(100, True, 3, 1, "ops"), Geometry(0, 1, 4, 4, False, True))
    d = state.to_json()
    d["dataset"] = {"future_layer": {"x": 1}}
    with pytest.raises(InvalidStateError, match="future_layer.*not known"):
        LoaderState.from_json(resign(d))


def test_the_loader_does_not_name_the_layers_above() -> None:
    """Mixtures and packing register their state (thresher.dataset); the loader's code names neither."""
    import pathlib

    import thresher.loader as loader_package

    text = "\n".join(p.read_text() for p in pathlib.Path(loader_package.__file__).parent.rglob("*.py"))
    assert "MixSegment" not in text and "pack_rows" not in text and "PackRows" not in text
