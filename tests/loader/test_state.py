"""Invariants 2 and 5: small state, O(1) restore, checked fingerprint and geometry."""

from __future__ import annotations

import copy
import json
import time

import pytest

import thresher as th
from tests.state_edits import edited
from thresher.errors import GeometryError, IncompatibleStateError, InvalidStateError


class CountingSource:
    def __init__(self, n: int) -> None:
        self.n, self.reads = n, 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k: int) -> int:
        self.reads += 1
        return k

    def __getitems__(self, keys: list[int]) -> list[int]:
        self.reads += len(keys)
        return list(keys)


def _loader(src=None, **kw) -> th.DataLoader:
    sampler_kw = dict(shuffle=True, seed=1, num_epochs=kw.pop("num_epochs", 2))
    sampler_kw.update(kw.pop("sampler", {}))
    src = src or th.sources.RangeDataSource(0, 100)
    ops = kw.pop("ops", [lambda x: x * 2, th.Batch(4)])
    return th.DataLoader(src, th.IndexSampler(len(src), **sampler_kw), ops, **kw)


def test_state_is_small_json_with_the_documented_fields() -> None:
    it = iter(_loader())
    next(it)
    state = it.get_state()
    text = json.dumps(state)
    assert len(text) < 1024
    assert state["version"] == 2 and state["position"] == 4 and state["global_position"] == 4
    assert isinstance(state["digest"], str) and len(state["digest"]) == 32
    assert set(state["stream"]) >= {"num_records", "shuffle", "seed", "num_epochs", "operations"}
    assert set(state["geometry"]) >= {"shard_index", "shard_count", "block_size", "batch_size"}


def test_restore_is_o1_no_replay() -> None:
    """Restoring at 10**12 reads one chunk, like restoring at 16: nothing is replayed.

    (Positions on a batch boundary: a mid-batch position is refused, see test_state_reachable.)"""
    for position in (16, 10**12):
        src = CountingSource(1000)
        loader = th.DataLoader(src, th.IndexSampler(1000, shuffle=True, seed=3, num_epochs=None),
                               [th.Batch(8)], chunk_size=64)
        it = iter(loader)
        state = edited(it.get_state(), position=position, global_position=None)  # a hand-made position
        t0 = time.perf_counter()
        it.set_state(state)
        batch = next(it)
        assert time.perf_counter() - t0 < 1.0
        assert src.reads == 64 and batch.shape == (8,)
        whole = th.IndexSampler(1000, shuffle=True, seed=3, num_epochs=None)
        assert batch.tolist() == [whole[position + i].record_key for i in range(8)]


def test_finite_epochs_end_and_keep_the_partial_batch() -> None:
    loader = _loader(num_epochs=1, ops=[th.Batch(30)])
    sizes = [len(b) for b in loader]
    assert sizes == [30, 30, 30, 10]
    loader = _loader(num_epochs=1, ops=[th.Batch(30, drop_remainder=True)])
    assert [len(b) for b in loader] == [30, 30, 30]
    it = iter(loader)
    list(it)
    with pytest.raises(StopIteration):
        next(it)


def test_state_from_another_pipeline_names_what_differs() -> None:
    it = iter(_loader())
    next(it)
    state = it.get_state()
    with pytest.raises(IncompatibleStateError, match=r"seed \(saved 1, this loader 2\)"):
        iter(_loader(sampler={"seed": 2})).set_state(state)
    with pytest.raises(IncompatibleStateError, match="num_records"):
        iter(_loader(th.sources.RangeDataSource(0, 99))).set_state(state)
    with pytest.raises(IncompatibleStateError, match="per-record operations"):
        iter(_loader(ops=[lambda x: x * 3 + 1, abs, th.Batch(4)])).set_state(state)
    with pytest.raises(IncompatibleStateError, match="num_epochs"):
        iter(_loader(num_epochs=3)).set_state(state)


@pytest.mark.parametrize("mutate, match", [
    (lambda s: s.pop("position"), "no 'position'"),
    (lambda s: s.update(position="4"), "must be int"),
    (lambda s: s.update(position=-1), ">= 0"),
    (lambda s: s.update(version=99), "version 99"),
    (lambda s: s.pop("stream"), "no 'stream'"),
    (lambda s: s["stream"].update(seed=5), "edited or corrupted"),
    (lambda s: s["geometry"].update(shard_count="2"), "must be int"),
    (lambda s: s.update(geometry=[]), "must be dict"),
])
def test_malformed_states_are_refused(mutate, match: str) -> None:
    it = iter(_loader())
    next(it)
    state = copy.deepcopy(it.get_state())
    mutate(state)
    with pytest.raises(InvalidStateError, match=match):
        it.set_state(state)
    with pytest.raises(InvalidStateError, match="dict"):
        it.set_state("position=4")  # type: ignore[arg-type]


def test_state_restores_under_another_batch_size_with_one_shard() -> None:
    it = iter(_loader(ops=[lambda x: x * 2, th.Batch(4)]))
    for _ in range(3):
        next(it)
    state = it.get_state()
    it8 = iter(_loader(ops=[lambda x: x * 2, th.Batch(6)]))
    it8.set_state(state)
    rest = [x for b in it8 for x in b.tolist()]
    whole = [x for b in _loader(ops=[lambda x: x * 2, th.Batch(4)]) for x in b.tolist()]
    assert rest == whole[12:]


def _sharded(i: int, shards: int, batch: int, filt: bool = False) -> th.DataLoader:
    ops = [lambda x: x * 2] + ([th.FilterTransform(lambda x: x % 3 != 0)] if filt else []) + [th.Batch(batch)]
    sampler = th.IndexSampler(96, shuffle=True, seed=1, num_epochs=2,
                              shard_options=th.ShardOptions(i, shards, drop_remainder=True))
    return th.DataLoader(th.sources.RangeDataSource(0, 96), sampler, ops)


def test_geometry_converted_exactly_at_a_global_step_boundary() -> None:
    """2 shards x 4 -> 4 shards x 2 and 1 shard x 8: the global stream continues exactly."""
    whole = [x for b in _sharded(0, 1, 8) for x in b.tolist()]
    its = [iter(_sharded(i, 2, 4)) for i in range(2)]
    seen: list[int] = []
    for _ in range(3):
        for it in its:
            seen += next(it).tolist()
    assert seen == whole[:24]
    state = its[1].get_state()
    assert state["global_position"] == 24
    for shards, batch in ((4, 2), (1, 8), (3, 4)):
        new = [iter(_sharded(i, shards, batch)) for i in range(shards)]
        for it in new:
            it.set_state(state)
        step = [x for it in new for x in next(it).tolist()]
        assert step == whole[24:24 + shards * batch]


def test_geometry_refused_when_not_exact() -> None:
    it = iter(_sharded(0, 2, 4))
    next(it)
    state = it.get_state()  # global position 8
    with pytest.raises(GeometryError, match="whole number of new global batches"):
        iter(_sharded(0, 4, 4)).set_state(state)
    it = iter(_sharded(0, 2, 4, filt=True))
    next(it)
    with pytest.raises(GeometryError, match="Filter"):
        iter(_sharded(0, 4, 2, filt=True)).set_state(it.get_state())
    # the same geometry always works, filter or not
    it2 = iter(_sharded(0, 2, 4, filt=True))
    it2.set_state(it.get_state())
    assert next(it2).tolist() == next(it).tolist()


def test_iterator_context_manager_and_close() -> None:
    with iter(_loader()) as it:
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    # a loader can be iterated many times, each from the start
    loader = _loader(num_epochs=1)
    assert [b.tolist() for b in loader] == [b.tolist() for b in loader]
