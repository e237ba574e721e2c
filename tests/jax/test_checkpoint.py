"""The Orbax handler in one process, and the choice of state file(s) on restore."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pytest

import thresher as th
from thresher.errors import GeometryError, InvalidStateError

import jax  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402

from thresher.jax import CheckpointHandler, CheckpointRestore, CheckpointSave, global_batches
from thresher.jax.state_files import restore_from_states, state_filename


def loader(i: int = 0, n: int = 1, batch: int = 4, filt: bool = False) -> th.DataLoader:
    sampler = th.IndexSampler(96, shuffle=True, seed=11, shard_options=th.ShardOptions(i, n, drop_remainder=True))
    ops: list[Any] = [lambda x: np.int32(x)]
    if filt:
        ops.append(th.FilterTransform(lambda x: x % 4 != 0))
    return th.DataLoader(th.sources.RangeDataSource(0, 96), sampler, ops + [th.Batch(batch, drop_remainder=True)])


def test_orbax_saves_the_model_and_the_iterator_and_restores_both(tmp_path: Any) -> None:
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    whole = [np.asarray(b).tolist() for b in loader(batch=4 * jax.device_count())]
    it = global_batches(iter(loader(batch=4 * jax.device_count())), sharding, prefetch=2)
    params = {"w": jax.numpy.arange(3.0)}
    for _ in range(3):
        next(it)
    with ocp.CheckpointManager(str(tmp_path)) as mngr:
        mngr.save(3, args=ocp.args.Composite(params=ocp.args.StandardSave(params), data=CheckpointSave(it)))
        mngr.wait_until_finished()
    it.close()
    assert [f for f in os.listdir(tmp_path / "3" / "data") if f.endswith(".json")] == ["process_0-of-1.json"]
    with ocp.CheckpointManager(str(tmp_path)) as mngr:
        fresh = global_batches(iter(loader(batch=4 * jax.device_count())), sharding, prefetch=2)
        restore = CheckpointRestore(fresh)
        out = mngr.restore(3, args=ocp.args.Composite(params=ocp.args.StandardRestore(params), data=restore))
    assert restore.how == "exact" and out["data"] is fresh
    assert np.array_equal(out["params"]["w"], params["w"])
    assert [np.asarray(b).tolist() for b in fresh] == whole[3:]


def test_the_state_is_taken_when_the_save_is_asked_for(tmp_path: Any) -> None:
    it = iter(loader())
    next(it)
    args = CheckpointSave(it)
    next(it), next(it)  # the loop moves on while an asynchronous save is in flight
    CheckpointHandler().save(tmp_path, args)
    with open(tmp_path / "process_0-of-1.json") as f:
        assert json.load(f)["position"] == 4
    with pytest.raises(TypeError, match="get_state"):
        CheckpointSave(object())


def _write(directory: Any, states: list[dict[str, Any]]) -> None:
    for i, s in enumerate(states):
        with open(os.path.join(directory, state_filename(i, len(states))), "w") as f:
            json.dump(s, f)


def test_a_checkpoint_of_2_processes_restores_in_this_one(tmp_path: Any) -> None:
    olds = [iter(loader(i, 2, 4)) for i in range(2)]
    for _ in range(3):
        for o in olds:
            next(o)
    _write(tmp_path, [o.get_state() for o in olds])
    whole = [x for b in loader(0, 1, 8) for x in b.tolist()]
    it = iter(loader(0, 1, 8))
    restore = CheckpointRestore(it)
    CheckpointHandler().restore(tmp_path, restore)
    assert restore.how == "exact"
    assert [x for b in it for x in b.tolist()] == whole[24:]
    assert CheckpointHandler().metadata(tmp_path) == {"process_count": 2}


def test_an_incomplete_or_mixed_checkpoint_is_refused(tmp_path: Any) -> None:
    olds = [iter(loader(i, 2, 4)) for i in range(2)]
    _write(tmp_path, [o.get_state() for o in olds])
    os.remove(tmp_path / "process_1-of-2.json")
    with pytest.raises(InvalidStateError, match=r"lacks the state files of processes \[1\]"):
        CheckpointHandler().restore(tmp_path, CheckpointRestore(iter(loader())))
    (tmp_path / "process_0-of-3.json").write_text("{}")
    with pytest.raises(InvalidStateError, match="mixes"):
        CheckpointHandler().restore(tmp_path, CheckpointRestore(iter(loader())))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InvalidStateError, match="no thresher state file"):
        CheckpointHandler().restore(empty, CheckpointRestore(iter(loader())))
    assert CheckpointHandler().metadata(empty) is None
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "process_0-of-1.json").write_text("{not json")
    with pytest.raises(InvalidStateError, match="not valid JSON"):
        CheckpointHandler().restore(bad, CheckpointRestore(iter(loader())))


class Reads:
    def __init__(self, states: list[dict[str, Any]]) -> None:
        self.states, self.read = states, []

    def __call__(self, i: int) -> dict[str, Any]:
        self.read.append(i)
        return self.states[i]


def test_which_files_a_restore_reads() -> None:
    olds = [iter(loader(i, 2, 4)) for i in range(2)]
    for o in olds:
        next(o)  # global position 8
    states = [o.get_state() for o in olds]
    # the same process count: each process its own file
    for j in range(2):
        reads = Reads(states)
        assert restore_from_states(iter(loader(j, 2, 4)), reads, 2, j, 2) == "exact"
        assert reads.read == [j]
    # 2 -> 4 with global batch 8: process j reads min(j, 1)
    for j in range(4):
        reads = Reads(states)
        assert restore_from_states(iter(loader(j, 4, 2)), reads, 2, j, 4) == "exact"
        assert reads.read == [min(j, 1)]
    # 2 -> 4 with global batch 16: 8 is not a whole number of 16s
    with pytest.raises(GeometryError, match="allow_approximate"):
        restore_from_states(iter(loader(0, 4, 4)), Reads(states), 2, 0, 4)
    it = iter(loader(0, 4, 4))
    assert restore_from_states(it, Reads(states), 2, 0, 4, allow_approximate=True) == "approximate"
    assert it.position == 0


def test_filter_runs_restore_exactly_once_from_the_merge_of_all_states() -> None:
    olds = [iter(loader(i, 2, 4, filt=True)) for i in range(2)]
    delivered = [x for _ in range(3) for x in next(olds[0]).tolist()] + next(olds[1]).tolist()
    states = [o.get_state() for o in olds]
    for j in range(3):
        reads = Reads(states)
        it = iter(loader(j, 3, 4, filt=True))
        assert restore_from_states(it, reads, 2, j, 3) == "exact-merged"
        assert sorted(set(reads.read)) == [0, 1]
        delivered += [x for b in it for x in b.tolist()]
    survivors = {x for x in range(96) if x % 4 != 0}
    assert len(delivered) == len(set(delivered)) and set(delivered) <= survivors
    # with drop_remainder, at most each new shard's last partial batch and the partial round are left out
    assert len(survivors) - len(delivered) <= 3 * 3 + 2
