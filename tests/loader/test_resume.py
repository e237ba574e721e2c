"""Invariants 1-3: pure function of position, small state, exact resume in a fresh process."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.helpers import build_loader, digest, run_fresh


@st.composite
def specs(draw: st.DrawFn, path: str | None = None) -> dict:
    n = draw(st.integers(1, 120))
    shards = draw(st.integers(1, 3))
    return {
        "num_records": n, "path": path,
        "shuffle": draw(st.booleans()), "seed": draw(st.integers(0, 2**64 - 1)),
        "num_epochs": draw(st.sampled_from([1, 2, 3])),
        "shard_index": draw(st.integers(0, shards - 1)), "shard_count": shards,
        "shard_drop": draw(st.booleans()),
        "filter_ratio": draw(st.sampled_from([None, 0.0, 0.3, 0.9])),
        "random_map": draw(st.booleans()),
        "batch_size": draw(st.sampled_from([None, 1, 3, 8])),
        "drop_remainder": draw(st.booleans()),
    }


def _all(spec: dict) -> list[str]:
    return [digest(b) for b in build_loader(spec)]


@given(spec=specs(), data=st.data())
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_resume_after_any_stop_point_in_process(spec: dict, data: st.DataObject) -> None:
    full = _all(spec)
    k = data.draw(st.integers(0, len(full)))
    it = iter(build_loader(spec))
    for _ in range(k):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    assert len(json.dumps(state)) < 1024
    it2 = iter(build_loader(spec))
    it2.set_state(state)
    assert [digest(b) for b in it2] == full[k:]
    # and the original iterator continues the same way
    assert [digest(b) for b in it] == full[k:]


@given(spec=specs(), data=st.data())
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_resume_in_a_fresh_process_is_bit_exact(spec: dict, data: st.DataObject) -> None:
    full = _all(spec)
    k = data.draw(st.integers(0, len(full)))
    it = iter(build_loader(spec))
    for _ in range(k):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    assert run_fresh(spec, state, limit=10**9) == full[k:]


def test_fresh_process_on_real_array_record_file(tmp_path) -> None:
    from tests.helpers import make_records

    path = str(tmp_path / "data.array_record")
    th.sources.write_array_record(path, make_records(500))
    spec = {"num_records": 500, "path": path, "shuffle": True, "seed": 7, "num_epochs": 2,
            "shard_index": 1, "shard_count": 2, "shard_drop": True, "filter_ratio": 0.25,
            "random_map": True, "batch_size": 16, "drop_remainder": True}
    full = _all(spec)
    assert len(full) > 20
    it = iter(build_loader(spec))
    for _ in range(13):
        next(it)
    state = it.get_state()
    assert run_fresh(spec, json.loads(json.dumps(state)), limit=10**9) == full[13:]
    # also the same stream from an in-memory copy of the data: the source kind does not matter
    mem = dict(spec, path=None)
    assert _all(mem) == full


def test_batches_do_not_depend_on_chunk_size() -> None:
    spec = {"num_records": 97, "path": None, "shuffle": True, "seed": 3, "num_epochs": 2,
            "shard_index": 0, "shard_count": 1, "shard_drop": False, "filter_ratio": 0.3,
            "random_map": True, "batch_size": 5, "drop_remainder": False}
    base = build_loader(spec)
    want = [digest(b) for b in base]
    for chunk in (1, 2, 7, 64, 1000):
        loader = th.DataLoader(base.data_source, base.sampler, _ops(spec), chunk_size=chunk)
        assert [digest(b) for b in loader] == want


def _ops(spec: dict) -> list:
    """The operations build_loader makes for a spec with a random map, a filter and a batch."""
    from tests.helpers import _keep, augment, decode

    ops: list = [decode, th.RandomMapTransform(augment), th.FilterTransform(_keep(spec)),
                 th.Batch(spec["batch_size"], drop_remainder=spec["drop_remainder"])]
    return ops


def test_random_map_depends_on_global_position_not_on_shard() -> None:
    """A record at global position g gets the same augmentation in any shard geometry."""
    src = th.sources.RangeDataSource(0, 40)
    ops = [th.RandomMapTransform(lambda x, rng: (x, int(rng.integers(0, 2**31))))]
    whole = {g: v for g, v in enumerate(th.DataLoader(src, th.IndexSampler(40, shuffle=True, seed=9), ops))}
    for shards in (2, 3):
        for i in range(shards):
            sampler = th.IndexSampler(40, shuffle=True, seed=9, shard_options=th.ShardOptions(i, shards))
            loader = th.DataLoader(src, sampler, ops)
            for p, v in enumerate(loader):
                assert whole[int(loader.sampler.to_global([p])[0])] == v
