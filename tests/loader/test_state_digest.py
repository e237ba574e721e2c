"""The digest: everything that legitimately makes a state makes a valid one, and any edit is refused.

Each producer of states (``get_state`` of every iterator, with workers too, after a geometry
conversion, skips and blocked records, ``merge_states``, ``slowest_state``, a reweighted
mixture, packing, thresher.grain's bytes, the JAX prefetch iterator, the Orbax handler,
``upgrade_state``) gives a state that survives JSON, restores in a fresh iterator to the
batch that followed, and is refused once any one of its fields is changed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import thresher as th
from thresher.errors import InvalidStateError
from thresher.loader.state_digest import check_digest, state_digest
from thresher.loader.state_types import LoaderState

EDITED = "changed after it was saved"


def _plain(batch: Any) -> Any:
    if isinstance(batch, dict):
        return {k: _plain(v) for k, v in sorted(batch.items())}
    return np.asarray(batch).tolist()


def _valid_and_restores(state: Any, make: Callable[[], Any], expected: Any, **kw: Any) -> None:
    """``state`` has a valid digest, survives JSON, restores to ``expected``; an edit of it is refused."""
    state = json.loads(json.dumps(state))
    check_digest(state)
    LoaderState.from_json(state)
    assert len(json.dumps(state)) < 1024
    it = make()
    it.set_state(state, **kw)
    assert _plain(next(it)) == _plain(expected)
    edited = copy.deepcopy(state)
    edited["position"] += 1
    with pytest.raises(InvalidStateError, match=EDITED):
        make().set_state(edited, **kw)


def _loader(i: int = 0, n: int = 1, batch: int = 4, filt: bool = False, **kw: Any) -> th.DataLoader:
    sampler = th.IndexSampler(48, shuffle=True, seed=4, shard_options=th.ShardOptions(i, n))
    ops = ([th.FilterTransform(lambda x: x % 3 != 0)] if filt else []) + [lambda x: x * 10, th.Batch(batch)]
    return th.DataLoader(th.sources.RangeDataSource(0, 48), sampler, ops, **kw)


def _after(it: Any, steps: int) -> Any:
    for _ in range(steps):
        next(it)
    return it


@pytest.mark.parametrize("workers", [{}, {"worker_count": 2, "worker_mode": "thread"}])
def test_get_state_makes_valid_states(workers: dict[str, Any]) -> None:
    with _after(iter(_loader(**workers)), 2) as it:
        state = it.get_state()
        expected = next(it)
    _valid_and_restores(state, lambda: iter(_loader()), expected)


def test_a_state_converted_to_another_geometry_then_saved_is_valid() -> None:
    """Saved by 2 shards, restored on 1 (a geometry conversion), saved there, restored again."""
    old = [_after(iter(_loader(i, 2)), 2) for i in range(2)]
    one = iter(_loader(batch=8))
    one.set_state(old[0].get_state())
    next(one)
    state = one.get_state()
    expected = next(one)
    _valid_and_restores(state, lambda: iter(_loader(batch=8)), expected)


def test_skips_and_blocked_records_make_valid_states() -> None:
    it = iter(_loader())
    it.set_state(it.get_state(), skip_steps=range(1, 3), skip_records=[5, 6])
    next(it)
    state = it.get_state()
    assert state["dataset"]["skips"] and state["dataset"]["skip_records"]
    expected = next(it)
    _valid_and_restores(state, lambda: iter(_loader()), expected)


def test_merge_states_and_slowest_state_make_valid_states() -> None:
    its = [_after(iter(_loader(i, 2, filt=True)), i + 1) for i in range(2)]
    states = [it.get_state() for it in its]
    merged = th.merge_states(states)
    check_digest(merged)
    restored = iter(_loader(0, 3, filt=True))
    restored.set_state(merged)
    expected = next(restored)
    _valid_and_restores(merged, lambda: iter(_loader(0, 3, filt=True)), expected)
    then = restored.get_state()  # saved after a restore from a merged state: carries ``consumed``
    expected = next(restored)
    _valid_and_restores(then, lambda: iter(_loader(0, 3, filt=True)), expected)
    slowest = th.loader.slowest_state(states)
    approx = iter(_loader(0, 1, filt=True))
    approx.set_state(slowest, allow_approximate=True)
    _valid_and_restores(slowest, lambda: iter(_loader(0, 1, filt=True)), next(approx), allow_approximate=True)


def test_merge_states_refuses_an_edited_state() -> None:
    states = [_after(iter(_loader(i, 2, filt=True)), 1).get_state() for i in range(2)]
    states[1] = dict(states[1], position=states[1]["position"] + 1)
    with pytest.raises(InvalidStateError, match=EDITED):
        th.merge_states(states)


def _mixture(weights: list[float]) -> th.Dataset:
    return th.Dataset.mix([th.Dataset.range(100).repeat(), th.Dataset.range(1000, 1100).repeat()],
                          weights, seed=3).batch(4)


def test_dataset_mixture_and_reweighted_mixture_make_valid_states() -> None:
    it = _after(iter(_mixture([0.5, 0.5])), 3)
    state = it.get_state()
    _valid_and_restores(state, lambda: iter(_mixture([0.5, 0.5])), next(it))
    new = iter(_mixture([0.2, 0.8]))
    new.set_state(state, reweight=True)
    next(new)
    again = new.get_state()
    assert again["dataset"]["mix"]["origin"] > 0  # a segment of its own
    _valid_and_restores(again, lambda: iter(_mixture([0.2, 0.8])), next(new))


def test_packed_dataset_makes_valid_states_inside_a_window() -> None:
    def packed() -> Any:
        return iter(th.Dataset.source([[i] * (i % 5 + 1) for i in range(30)]).pack(12).batch(2))

    it = packed()
    for _ in range(8):
        next(it)
        state = it.get_state()
        if state["dataset"]["pack"]["rows"]:
            break
    assert state["dataset"]["pack"]["rows"]
    _valid_and_restores(state, packed, next(it))


def test_grain_bytes_and_the_jax_prefetch_iterator_make_valid_states() -> None:
    import thresher.grain as grain
    from thresher.jax import DevicePrefetchIterator

    loader = grain.DataLoader(data_source=grain.RangeDataSource(0, 20, 1), sampler=grain.SequentialSampler(20),
                              operations=[grain.Batch(2)])
    it = _after(iter(loader), 2)
    raw = it.get_state()
    assert isinstance(raw, bytes)
    expected = next(it)
    fresh = iter(loader)
    fresh.set_state(raw)
    assert next(fresh).tolist() == expected.tolist()
    _valid_and_restores(json.loads(raw), lambda: iter(loader), expected)
    with DevicePrefetchIterator(iter(_loader()), size=2) as pre:
        _after(pre, 2)
        state = pre.get_state()
        expected = next(pre)
    _valid_and_restores(state, lambda: DevicePrefetchIterator(iter(_loader()), size=2), expected)


def test_the_orbax_handler_writes_valid_states_and_refuses_a_file_edited_on_disk(tmp_path: Any) -> None:
    ocp = pytest.importorskip("orbax.checkpoint")
    from thresher.jax import CheckpointRestore, CheckpointSave

    it = _after(iter(_loader()), 2)
    with ocp.CheckpointManager(tmp_path) as mngr:
        mngr.save(1, args=ocp.args.Composite(data=CheckpointSave(it)))
        mngr.wait_until_finished()
    expected = next(it)
    (path,) = (tmp_path / "1" / "data").glob("process_*-of-*.json")
    check_digest(json.loads(path.read_text()))
    with ocp.CheckpointManager(tmp_path) as mngr:
        fresh = iter(_loader())
        mngr.restore(1, args=ocp.args.Composite(data=CheckpointRestore(fresh)))
    assert next(fresh).tolist() == expected.tolist()
    state = json.loads(path.read_text())
    state["geometry"]["aligned"] = False
    path.write_text(json.dumps(state))
    with ocp.CheckpointManager(tmp_path) as mngr, pytest.raises(InvalidStateError, match=EDITED):
        mngr.restore(1, args=ocp.args.Composite(data=CheckpointRestore(iter(_loader()))))


def test_the_digest_covers_every_field_and_is_keyed_canonical_json() -> None:
    state = _after(iter(_loader()), 1).get_state()
    check_digest(json.loads(json.dumps(state, indent=4)))  # any formatting of the same JSON
    assert state_digest(dict(reversed(list(state.items())))) == state["digest"]  # any key order
    for key in state:
        if key != "digest":
            with pytest.raises(InvalidStateError, match=EDITED):
                check_digest({k: v for k, v in state.items() if k != key})
    with pytest.raises(InvalidStateError, match=EDITED):
        check_digest(dict(state, extra=1))  # a field added is an edit too
    with pytest.raises(InvalidStateError, match="no 'digest'"):
        check_digest({k: v for k, v in state.items() if k != "digest"})
    with pytest.raises(InvalidStateError, match="not plain JSON"):
        check_digest(dict(state, position=float("nan")))
