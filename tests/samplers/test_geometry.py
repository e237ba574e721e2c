"""One geometry type: the sampler deals by it, the state saves it, the forensics read steps with it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from thresher.loader.state_types import Geometry as StateGeometry
from thresher.loader.state_types import LoaderState
from thresher.loader.steps import step_geometry
from thresher.samplers.geometry import Geometry, ShardGeometry


def _loader(index: int, count: int, batch: int, n: int) -> th.DataLoader:
    sampler = th.IndexSampler(n, shuffle=True, seed=1, shard_options=th.ShardOptions(index, count))
    return th.DataLoader(th.sources.RangeDataSource(0, n), sampler, [th.Batch(batch, drop_remainder=True)])


def test_the_sampler_the_state_and_the_steps_share_one_type() -> None:
    loader = _loader(1, 2, 4, 40)
    saved = LoaderState.from_json(iter(loader).get_state()).geometry
    steps = step_geometry(loader)
    assert ShardGeometry is Geometry and StateGeometry is Geometry
    assert type(loader.sampler.geometry) is type(saved) is type(steps) is Geometry
    assert saved == loader.engine.geometry
    # The state's fields are the steps' too; the steps add only what the state does not save.
    assert steps.shard(1).to_json() == saved.to_json()


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(0, 60), st.integers(0, 20))
def test_step_ranges_are_the_batches_each_process_delivers(count: int, batch: int, n: int, step: int) -> None:
    for index in range(count):
        loader = _loader(index, count, batch, n)
        geo = step_geometry(loader).shard(index)
        span = geo.step_range(step)
        batches = list(loader)
        assert geo.num_steps() == len(batches)
        if span is None:
            assert step >= len(batches)
        else:
            keys = loader.sampler.record_keys(loader.sampler.to_global(np.arange(*span)))[0].tolist()
            assert sorted(keys) == sorted(batches[step].tolist())
