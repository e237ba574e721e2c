"""thresher's own API takes Grain's objects; what it cannot take is named with what to pass."""

from __future__ import annotations

import json
import sys
from typing import Any

import grain.python as real_grain
import numpy as np
import pytest

import thresher as th
import thresher.grain as tg
from thresher.errors import ConfigError, InvalidStateError
from tests.grain.test_equivalence import GrainDouble, GrainIndex, GrainKeep, GrainNoise


def _loader(**kwargs: Any) -> th.DataLoader:
    return th.DataLoader(th.sources.RangeDataSource(0, 12), th.IndexSampler(12, shuffle=True, seed=4),
                         [th.Batch(3)], **kwargs)


@pytest.mark.parametrize("grain_options, expected", [
    (real_grain.NoSharding(), th.ShardOptions(0, 1, False)),
    (real_grain.ShardOptions(shard_index=1, shard_count=3, drop_remainder=True), th.ShardOptions(1, 3, True)),
    (real_grain.ShardByJaxProcess(), th.ShardOptions(0, 1, False)),   # one JAX process here
    (tg.ShardByJaxProcess(), th.ShardOptions(0, 1, False)),
])
def test_grain_shard_options_are_taken(grain_options: Any, expected: th.ShardOptions) -> None:
    got_options = th.IndexSampler(10, shard_options=grain_options).shard_options
    assert got_options.replace() == expected
    got = list(th.Dataset.range(10).shard(grain_options))
    assert got == list(th.Dataset.range(10).shard(expected))


def test_wrong_objects_are_named_with_what_to_pass() -> None:
    with pytest.raises(ConfigError, match=r"'nope'.*thresher.ShardOptions\(shard_index, shard_count\)"):
        th.IndexSampler(10, shard_options="nope")  # type: ignore[arg-type]
    grain_sampler = real_grain.IndexSampler(10, real_grain.NoSharding(), False, 1, None)
    with pytest.raises(ConfigError, match=r"thresher.grain.IndexSampler with the same arguments"):
        th.DataLoader(th.sources.RangeDataSource(0, 10), grain_sampler)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"has a batch_fn.*map after it"):
        th.DataLoader(th.sources.RangeDataSource(0, 4), th.IndexSampler(4), [real_grain.Batch(2, batch_fn=list)])
    with pytest.raises(ConfigError, match=r"random_map\(\): use random_map"):
        th.Dataset.range(4).map(GrainNoise())
    with pytest.raises(ConfigError, match=r"after the Batch: put it before the Batch"):
        th.DataLoader(th.sources.RangeDataSource(0, 4), th.IndexSampler(4), [th.Batch(2), GrainIndex()])
    with pytest.raises(ConfigError, match="ReadOptions"):
        _loader(read_options=object())


def test_grain_batch_transforms_and_read_options_in_a_thresher_loader() -> None:
    ops = [GrainDouble(), GrainKeep(), GrainNoise(), real_grain.Batch(3, drop_remainder=True)]
    native = [th.MapTransform(GrainDouble().map), th.FilterTransform(GrainKeep().filter),
              th.RandomMapTransform(GrainNoise().random_map), th.Batch(3, drop_remainder=True)]
    source, sampler = th.sources.RangeDataSource(0, 30), th.IndexSampler(30, shuffle=True, seed=2)
    grainy = th.DataLoader(source, sampler, ops, read_options=real_grain.ReadOptions(num_threads=2))
    assert [b.tolist() for b in grainy] == [b.tolist() for b in th.DataLoader(source, sampler, native)]
    assert all(b.shape == (3,) for b in grainy)


def test_dataset_steps_take_transform_objects() -> None:
    ds = th.Dataset.range(12)
    by_object = ds.map(th.MapTransform(_triple)).filter(GrainKeep()).map(GrainDouble()).random_map(GrainNoise())
    by_function = ds.map(_triple).filter(GrainKeep().filter).map(GrainDouble().map).random_map(GrainNoise().random_map)
    assert list(by_object) == list(by_function)


def _triple(x: Any) -> Any:
    return 3 * x


class _Boxed:
    """A class used as a map function, which also has a ``map`` method (like a pandas Series)."""

    def __init__(self, x: Any) -> None:
        self.x = x

    def map(self, fn: Any) -> "_Boxed":
        return _Boxed(fn(self.x))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Boxed) and other.x == self.x


def test_callables_are_used_as_they_are() -> None:
    assert list(th.Dataset.range(2).map(_Boxed)) == [_Boxed(0), _Boxed(1)]
    both = th.FilterTransform(lambda x: x > 0)
    assert list(th.Dataset.range(3).filter(both)) == [1, 2]


def test_set_state_takes_bytes_and_text_of_json() -> None:
    it = iter(_loader())
    next(it)
    state = it.get_state()
    expected = next(it).tolist()
    for form in (json.dumps(state).encode(), json.dumps(state), bytearray(json.dumps(state).encode())):
        again = iter(_loader())
        again.set_state(form)
        assert next(again).tolist() == expected
    ds = th.Dataset.range(10).shuffle(seed=1)
    dit = iter(ds)
    next(dit)
    saved = json.dumps(dit.get_state()).encode()
    following = next(dit)
    other = iter(ds)
    other.set_state(saved)
    assert next(other) == following


def test_a_state_of_grains_own_loader_is_refused_with_the_reason() -> None:
    loader = real_grain.DataLoader(data_source=real_grain.RangeDataSource(0, 6, 1),
                                   sampler=real_grain.IndexSampler(6, real_grain.NoSharding(), False, 1, None),
                                   worker_count=0)
    it = iter(loader)
    next(it)
    with pytest.raises(InvalidStateError, match="saved by Grain's own DataLoader.*order for a seed differs"):
        iter(_loader()).set_state(it.get_state())
    with pytest.raises(InvalidStateError, match="not UTF-8"):
        iter(_loader()).set_state(b"\xff\xfe")


def test_compat_state_is_bytes_and_restores_under_another_worker_count() -> None:
    def loader(workers: int) -> tg.DataLoader:
        return tg.DataLoader(data_source=tg.RangeDataSource(0, 40, 1),
                             sampler=tg.IndexSampler(40, tg.NoSharding(), True, 2, 9),
                             operations=[tg.Batch(4)], worker_count=workers)

    it = iter(loader(0))
    for _ in range(5):
        next(it)
    state = it.get_state()
    assert isinstance(state, bytes) and json.loads(state)["position"] == 20
    rest = [b.tolist() for b in it]
    resumed = iter(loader(2))   # Grain refuses another worker count; thresher continues exactly
    resumed.set_state(state)
    assert [b.tolist() for b in resumed] == rest


def test_compat_data_loader_shard_options() -> None:
    def ids(**kwargs: Any) -> list[int]:
        loader = tg.DataLoader(data_source=tg.RangeDataSource(0, 10, 1), **kwargs)
        return [int(x) for x in loader]

    by_loader = ids(sampler=tg.IndexSampler(10, num_epochs=1), shard_options=tg.ShardOptions(1, 2))
    by_sampler = ids(sampler=tg.IndexSampler(10, tg.ShardOptions(1, 2), num_epochs=1))
    assert by_loader == by_sampler == [1, 3, 5, 7, 9]
    with pytest.raises(ConfigError, match="disagree: shard once"):
        ids(sampler=tg.IndexSampler(10, tg.ShardOptions(1, 2), num_epochs=1), shard_options=tg.ShardOptions(0, 2))


def test_compat_defaults_are_grains() -> None:
    assert len(tg.IndexSampler(5)) == sys.maxsize          # num_epochs=None: forever, as in Grain
    assert tg.ShardByJaxProcess().drop_remainder is False    # thresher's own defaults to True
    assert th.ShardByJaxProcess().drop_remainder is True
    assert [m.record_key for m in tg.SequentialSampler(3)] == [0, 1, 2]
    # iterating a sharded sampler walks the global indices, as Grain's does (its DataLoader asks for its own)
    assert [m.index for m in tg.IndexSampler(4, tg.ShardOptions(1, 2), num_epochs=1)] == [0, 1, 2, 3]
    assert tg.ReadOptions() == tg.ReadOptions(16, 500)
    endless = tg.MapDataset.range(5).shuffle(seed=1).repeat()
    assert len(endless) == sys.maxsize and sorted(endless[i] for i in range(10, 15)) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("make, match", [
    (lambda: tg.InMemoryDataSource(name="shm"), r"InMemoryDataSource\(elements\)"),
    (lambda: tg.Batch(2, batch_fn=list), "map after it"),
    (lambda: tg.MapDataset.range(4).filter(bool).batch(2), r"to_iter_dataset\(\) before .batch"),
    (lambda: tg.MapDataset.range(4).repeat(2, reseed_each_epoch=False), "reshuffles every epoch"),
    (lambda: tg.MapDataset.range(4).to_iter_dataset().mp_prefetch(worker_init_fn=print), "lazily"),
    (lambda: tg.MapDataset.range(4).map_with_index(lambda i, x: x), "DataLoader's operations"),
    (lambda: tg.MapDataset.range(4).shuffle(), r"shuffle\(seed=...\) or call .seed"),
    (lambda: tg.MapDataset.range(4)[4], r"use .repeat\(\)"),
    (lambda: tg.ReadOptions(num_threads=-1), ">= 0"),
])
def test_unsupported_grain_calls_name_the_thresher_way(make: Any, match: str) -> None:
    with pytest.raises((ConfigError, IndexError), match=match):
        make()


def test_unsupported_grain_names_say_what_to_use() -> None:
    with pytest.raises(AttributeError, match="thresher way: build a thresher.grain.DataLoader"):
        tg.load  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'Nonsense'"):
        tg.Nonsense  # noqa: B018
    assert tg.multiprocessing.MultiprocessingOptions is tg.MultiprocessingOptions
    assert tg.checkpoint.PyGrainCheckpointSave is tg.PyGrainCheckpointSave


def test_pipeline_seed_derives_distinct_reproducible_seeds() -> None:
    def run(seed: int) -> list[Any]:
        ds = tg.MapDataset.range(20).seed(seed).shuffle().random_map(lambda x, rng: (x, rng.integers(1 << 30)))
        return list(ds)

    assert run(1) == run(1) and run(1) != run(2)
    shuffled = [x for x, _ in run(1)]
    assert sorted(shuffled) == list(range(20)) and shuffled != list(range(20))
    filtered = tg.MapDataset.range(6).filter(lambda x: x % 2 == 1).map(lambda x: x * 10)
    assert [filtered[i] for i in range(6)] == [None, 10, None, 30, None, 50]
    assert np.array_equal(list(filtered.to_iter_dataset(allow_nones=True)), [None, 10, None, 30, None, 50])


@pytest.mark.parametrize("weights", [None, [2, 1], [1, 3]])
@pytest.mark.parametrize("lengths", [(10, 10), (10, 4), (3, 12)])
def test_mix_has_grains_length(weights: Any, lengths: tuple[int, int]) -> None:
    import grain as top_grain

    def mixed(api: Any) -> list[int]:
        parts = [api.MapDataset.range(lengths[0]), api.MapDataset.range(100, 100 + lengths[1])]
        return list(api.MapDataset.mix(parts, weights))

    ours, theirs = mixed(tg), mixed(top_grain)
    assert len(ours) == len(theirs) and len(set(ours)) == len(ours)
