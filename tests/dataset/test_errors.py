"""Orders the engine cannot express, and bad input: each a specific error saying what to do."""

from __future__ import annotations

import numpy as np
import pytest

import thresher as th

D = th.Dataset
C = th.errors.ConfigError


@pytest.mark.parametrize("make,match", [
    (lambda: D.range(5).repeat().shuffle(seed=1), "shuffle before repeat"),
    (lambda: D.range(5).batch(2).repeat(2), "put repeat before batch"),
    (lambda: D.range(5).filter(bool).batch(2)[1:3], "iterable-only"),
    (lambda: D.range(5).map_batch(np.sum), "after batch"),
    (lambda: D.range(5).random_map(lambda x, r: x).filter(bool).batch(2).shuffle(seed=1), "filter at step 2"),
    (lambda: D.range(5).filter(bool).batch(2).batch(2).shuffle(seed=1), "after a batch of a filtered"),
    (lambda: D.range(5).repeat()[2:], "slice before repeat"),
    (lambda: D.range(5).repeat().repeat(), "already repeats"),
    (lambda: D.range(5).shard(th.ShardOptions(0, 2)).shard(th.ShardOptions(0, 2)), "already sharded"),
    (lambda: D.mix([D.range(3).shard(th.ShardOptions(0, 2))]), "shard the mix"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_unsupported_orders_raise_clear_errors(make, match: str) -> None:
    with pytest.raises(C, match=match):
        list(make())


def test_bad_arguments() -> None:
    with pytest.raises(C, match="seed"):
        D.range(3).shuffle(seed=-1)
    with pytest.raises(C, match="num_epochs"):
        D.range(3).repeat(0)
    with pytest.raises(C, match="batch_size"):
        D.range(3).batch(0)
    with pytest.raises(C, match="pad_to"):
        D.range(3).batch(2, pad_to="longest")
    with pytest.raises(C, match="step"):
        D.range(3).slice(0, 3, 0)
    with pytest.raises(C, match="function"):
        D.range(3).map(3)  # type: ignore[arg-type]
    with pytest.raises(C, match="ShardOptions"):
        D.range(3).shard(2)  # type: ignore[arg-type]
    with pytest.raises(C, match="random-access"):
        D.source(iter([1, 2]))
    with pytest.raises(TypeError, match="ints or slices"):
        D.range(3)["a"]


def test_random_access_errors_name_the_step() -> None:
    ds = D.range(10).map(abs).filter(lambda x: x > 2).batch(2)
    with pytest.raises(th.errors.RandomAccessError, match="filter at step 2"):
        len(ds)
    with pytest.raises(th.errors.RandomAccessError, match="filter at step 2"):
        ds[0]
    with pytest.raises(IndexError, match="out of range"):
        D.range(10)[10]
    assert D.range(10)[-1] == 9


def test_states_of_other_pipelines_are_refused() -> None:
    it = iter(D.range(10).shuffle(seed=1))
    next(it)
    state = it.get_state()
    with pytest.raises(th.errors.IncompatibleStateError, match="per-record operations"):
        iter(D.range(10).shuffle(seed=2)).set_state(state)
    with pytest.raises(th.errors.IncompatibleStateError):
        iter(D.range(10).shuffle(seed=1).map(abs)).set_state(state)
    with pytest.raises(th.errors.InvalidStateError, match="mixture"):
        iter(D.mix([D.range(10)])).set_state(state)
    with pytest.raises(th.errors.InvalidStateError):
        iter(D.range(10)).set_state({"position": 3})


def test_errors_in_user_functions_name_the_operation_and_position() -> None:
    def bad(x: int) -> int:
        if x == 7:
            raise ValueError("seven")
        return x

    with pytest.raises(th.errors.TransformError, match=r"Map\(.*bad.*position 7"):
        list(D.range(10).map(bad))
    with pytest.raises(th.errors.TransformError, match="seven"):
        list(D.range(10).map(abs).shuffle(seed=1)[0:10].map(bad))


def test_a_state_moves_between_kinds_of_source_and_of_cache(tmp_path) -> None:
    records = list(range(100, 140))
    path = str(tmp_path / "r.array_record")
    th.sources.write_array_record(path, [np.int64(x).tobytes() for x in records])

    def decode(b: object) -> int:
        return int(np.frombuffer(b, dtype=np.int64)[0]) if isinstance(b, bytes) else int(b)  # type: ignore[arg-type]

    on_disk = D.source(th.sources.ArrayRecordSource(path)).map(decode).cache().shuffle(seed=1).batch(4)
    in_memory = D.source([np.int64(x).tobytes() for x in records]).map(decode).cache(str(tmp_path / "c")).shuffle(
        seed=1).batch(4)
    it = iter(on_disk)
    next(it)
    it2 = iter(in_memory)
    it2.set_state(it.get_state())
    assert [b.tolist() for b in it2] == [b.tolist() for b in it]
