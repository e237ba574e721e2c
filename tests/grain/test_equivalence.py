"""thresher.grain is thresher: the same pipeline through Grain's names, through thresher's
own API, and through thresher's API fed Grain's own objects gives the same elements."""

from __future__ import annotations

from typing import Any

import grain.python as real_grain
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
import thresher.grain as tg


def _double(x: Any) -> Any:
    return x * 2 + 1


def _noise(x: Any, rng: np.random.Generator) -> Any:
    return x + int(rng.integers(0, 1000)) * 100_000


def _keep(x: Any) -> bool:
    return int(x) * 2654435761 % 7 != 0


def _with_index(i: int, x: Any) -> Any:
    return x + i * 1_000_000_000


class CompatDouble(tg.MapTransform):
    def map(self, x: Any) -> Any:
        return _double(x)


class CompatNoise(tg.RandomMapTransform):
    def random_map(self, x: Any, rng: np.random.Generator) -> Any:
        return _noise(x, rng)


class CompatKeep(tg.FilterTransform):
    def filter(self, x: Any) -> bool:
        return _keep(x)


class CompatIndex(tg.MapWithIndexTransform):
    def map_with_index(self, i: int, x: Any) -> Any:
        return _with_index(i, x)


class GrainDouble(real_grain.MapTransform):
    def map(self, x: Any) -> Any:
        return _double(x)


class GrainNoise(real_grain.RandomMapTransform):
    def random_map(self, x: Any, rng: np.random.Generator) -> Any:
        return _noise(x, rng)


class GrainKeep(real_grain.FilterTransform):
    def filter(self, x: Any) -> bool:
        return _keep(x)


class GrainIndex(real_grain.MapWithIndexTransform):
    def map_with_index(self, i: int, x: Any) -> Any:
        return _with_index(i, x)


NATIVE = {"map": lambda: th.MapTransform(_double), "random_map": lambda: th.RandomMapTransform(_noise),
          "filter": lambda: th.FilterTransform(_keep), "map_with_index": lambda: th.MapWithIndexTransform(_with_index)}
COMPAT = {"map": CompatDouble, "random_map": CompatNoise, "filter": CompatKeep, "map_with_index": CompatIndex}
GRAIN = {"map": GrainDouble, "random_map": GrainNoise, "filter": GrainKeep, "map_with_index": GrainIndex}


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


pipelines = st.fixed_dictionaries({
    "n": st.integers(1, 40),
    "shard": st.integers(1, 3).flatmap(lambda c: st.tuples(st.integers(0, c - 1), st.just(c), st.booleans())),
    "shuffle": st.booleans(),
    "seed": st.integers(0, 2**32 - 1),
    "epochs": st.integers(1, 3),
    "ops": st.lists(st.sampled_from(sorted(NATIVE)), max_size=4),
    "batch": st.none() | st.tuples(st.integers(1, 5), st.booleans()),
    "workers": st.sampled_from([0, 0, 2]),
})


@settings(max_examples=25, deadline=None)
@given(pipelines)
def test_data_loader_compat_equals_native(p: dict[str, Any]) -> None:
    n, (index, count, drop), batch = p["n"], p["shard"], p["batch"]
    native = th.DataLoader(
        th.sources.RangeDataSource(0, n),
        th.IndexSampler(n, shuffle=p["shuffle"], seed=p["seed"], num_epochs=p["epochs"],
                        shard_options=th.ShardOptions(index, count, drop)),
        [NATIVE[k]() for k in p["ops"]] + ([th.Batch(*batch)] if batch else []))
    compat = tg.DataLoader(
        data_source=tg.RangeDataSource(0, n, 1),
        sampler=tg.IndexSampler(n, tg.ShardOptions(index, count, drop), p["shuffle"], p["epochs"], p["seed"]),
        operations=[COMPAT[k]() for k in p["ops"]] + ([tg.Batch(*batch)] if batch else []),
        worker_count=p["workers"])
    with_grain_objects = th.DataLoader(
        real_grain.RangeDataSource(0, n, 1),
        th.IndexSampler(n, shuffle=p["shuffle"], seed=p["seed"], num_epochs=p["epochs"],
                        shard_options=real_grain.ShardOptions(index, count, drop)),
        [GRAIN[k]() for k in p["ops"]] + ([real_grain.Batch(*batch)] if batch else []))
    expected = list(native)
    assert _same(list(compat), expected)
    assert _same(list(with_grain_objects), expected)


datasets = st.fixed_dictionaries({
    "n": st.integers(1, 30),
    "seed": st.none() | st.integers(0, 2**32 - 1),
    "maps": st.lists(st.sampled_from(["map", "random_map"]), max_size=2),
    "epochs": st.integers(1, 2),
    "filter": st.booleans(),
    "batch": st.none() | st.tuples(st.integers(1, 4), st.booleans()),
    "workers": st.sampled_from([0, 0, 2]),
})


@settings(max_examples=20, deadline=None)
@given(datasets)
def test_dataset_compat_equals_native(p: dict[str, Any]) -> None:
    native, compat = th.Dataset.range(p["n"]), tg.MapDataset.range(p["n"])
    if p["seed"] is not None:
        native, compat = native.shuffle(p["seed"]), compat.shuffle(seed=p["seed"])
    for kind in p["maps"]:
        if kind == "map":
            native, compat = native.map(_double), compat.map(CompatDouble())
        else:
            native, compat = native.random_map(_noise, seed=5), compat.random_map(CompatNoise(), seed=5)
    native, compat_iter = native.repeat(p["epochs"]), compat.repeat(p["epochs"]).to_iter_dataset()
    if p["filter"]:
        native, compat_iter = native.filter(_keep), compat_iter.filter(CompatKeep())
    if p["batch"]:
        size, drop = p["batch"]
        native, compat_iter = native.batch(size, drop_remainder=drop), compat_iter.batch(size, drop_remainder=drop)
    compat_iter = compat_iter.mp_prefetch(tg.MultiprocessingOptions(num_workers=p["workers"]))
    assert _same(list(compat_iter), list(native))
