"""Restoring a state after the per-record operations changed: ``set_state(state, operations_changed=True)``."""

from __future__ import annotations

import json

import numpy as np
import pytest

import thresher as th
from thresher.errors import IncompatibleStateError

SOURCE = th.sources.RangeDataSource(0, 60)
SAMPLER = th.IndexSampler(60, shuffle=True, seed=5, num_epochs=2)


def _key(x: int) -> int:
    return x


def _plus_1000(x: int) -> int:
    return x + 1000


def _noise(x: int, rng: np.random.Generator) -> float:
    return x + rng.random()


def old_loader(worker_count: int = 0) -> th.DataLoader:
    return th.DataLoader(SOURCE, SAMPLER, [th.MapTransform(_key), th.Batch(4)], worker_count=worker_count)


def new_loader(worker_count: int = 0) -> th.DataLoader:  # a map added: a new augmentation
    return th.DataLoader(SOURCE, SAMPLER, [th.MapTransform(_key), th.MapTransform(_plus_1000), th.Batch(4)],
                         worker_count=worker_count)


def _saved(steps: int) -> tuple[dict, list[list[int]]]:
    it = iter(old_loader())
    for _ in range(steps):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    return state, [b.tolist() for b in it]


def test_a_changed_pipeline_is_refused_with_the_way_forward() -> None:
    state, _ = _saved(3)
    it = iter(new_loader())
    with pytest.raises(IncompatibleStateError, match=r"operations_changed=True"):
        it.set_state(state)
    with pytest.raises(IncompatibleStateError, match=r"operations_changed=True"):
        it.set_state(state, allow_approximate=True)


@pytest.mark.parametrize("worker_count", [0, 2])
def test_positions_and_sampler_are_kept_and_the_new_operations_apply(worker_count: int) -> None:
    state, rest = _saved(3)
    with iter(new_loader(worker_count)) as it:
        it.set_state(state, operations_changed=True)
        got = [b.tolist() for b in it]
    assert got == [[x + 1000 for x in b] for b in rest]  # the same records, from the next one, mapped anew


def test_the_change_is_recorded_and_the_new_state_restores_without_the_flag() -> None:
    state, rest = _saved(3)
    it = iter(new_loader())
    it.set_state(state, operations_changed=True)
    next(it)
    after = it.get_state()
    assert after["stream"]["replaced_operations"] == [state["stream"]["operations"]]
    assert after["fingerprint"] != iter(new_loader()).get_state()["fingerprint"]
    expected = [b.tolist() for b in it]
    again = iter(new_loader())
    again.set_state(json.loads(json.dumps(after)))  # no flag needed any more
    assert [b.tolist() for b in again] == expected == [[x + 1000 for x in b] for b in rest[1:]]
    assert again.get_state()["stream"]["replaced_operations"] == [state["stream"]["operations"]]
    with pytest.raises(IncompatibleStateError, match="operations_changed"):
        iter(old_loader()).set_state(after)  # going back is another change


def test_an_unchanged_pipeline_records_nothing() -> None:
    state, rest = _saved(2)
    it = iter(old_loader())
    it.set_state(state, operations_changed=True)
    assert [b.tolist() for b in it] == rest
    assert "replaced_operations" not in it.get_state()["stream"]


def test_the_flag_does_not_cover_other_changes() -> None:
    state, _ = _saved(2)
    other_seed = th.DataLoader(SOURCE, th.IndexSampler(60, shuffle=True, seed=6, num_epochs=2),
                               [th.MapTransform(_plus_1000), th.Batch(4)])
    with pytest.raises(IncompatibleStateError, match="seed") as e:
        iter(other_seed).set_state(state, operations_changed=True)
    assert "operations_changed=True" not in str(e.value)


def test_random_maps_keep_their_per_record_seeds() -> None:
    # A RandomMap's generator is seeded by (seed, global position): the same after the change.
    before = th.DataLoader(SOURCE, SAMPLER, [th.RandomMapTransform(_noise), th.Batch(4)])
    after = th.DataLoader(SOURCE, SAMPLER, [th.RandomMapTransform(_noise), th.MapTransform(_plus_1000),
                                            th.Batch(4)])
    it = iter(before)
    next(it)
    state = it.get_state()
    rest = [b for b in it]
    it2 = iter(after)
    it2.set_state(state, operations_changed=True)
    assert all(np.array_equal(a, b + 1000) for a, b in zip(it2, rest, strict=True))


def test_checkpoint_restores_pass_the_flag_on() -> None:
    # thresher.jax.CheckpointRestore(it, operations_changed=True) restores through restore_from_states
    from thresher.jax.state_files import restore_from_states

    state, rest = _saved(2)
    it = iter(new_loader())
    with pytest.raises(IncompatibleStateError, match="operations_changed=True"):
        restore_from_states(it, lambda i: state, 1, 0, 1)
    assert restore_from_states(it, lambda i: state, 1, 0, 1, operations_changed=True) == "exact"
    assert [b.tolist() for b in it] == [[x + 1000 for x in b] for b in rest]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_dataset_chain_continues_under_changed_maps(workers: int) -> None:
    """Dataset iterators take the flag too: positions and the shuffle kept, the new map from the next batch."""

    def chain(*fns) -> th.Dataset:
        ds = th.Dataset.range(40).shuffle(seed=3)
        for fn in fns:
            ds = ds.map(fn)
        return ds.batch(4).prefetch(workers) if workers else ds.batch(4)

    with iter(chain(_key)) as it:
        _ = [next(it) for _ in range(3)]
        state = json.loads(json.dumps(it.get_state()))
    with iter(chain(_key, _plus_1000)) as fresh:
        expected = [b.tolist() for b in fresh][3:]  # the same positions, the new operations
    with iter(chain(_key, _plus_1000)) as it:
        with pytest.raises(IncompatibleStateError, match="operations_changed=True"):
            it.set_state(state)
        it.set_state(state, operations_changed=True)
        first = next(it).tolist()
        later = it.get_state()
        rest = [b.tolist() for b in it]
    assert [first, *rest] == expected
    assert later["stream"]["replaced_operations"]  # the change is recorded in the states saved after it
    with iter(chain(_key, _plus_1000)) as it:
        it.set_state(later)  # and such a state restores without the flag
        assert [b.tolist() for b in it] == expected[1:]
