"""``explain`` equals what the loader actually delivers, for random pipelines."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import thresher as th
from tests.forensics.pipelines import Spec, specs
from thresher.errors import ConfigError
from thresher.transforms.random_map import RecordRng


def expected_rows(p: th.forensics.StepProvenance, spec: Spec) -> np.ndarray:
    """The elements a step must hold, computed from explain's keys and seeds alone."""
    rng = RecordRng()
    rows = []
    for key, seed in zip(p.record_keys.tolist(), p.rng_seeds.tolist()):
        payload = sum(int(rng.seeded(seed, salt).integers(0, 2**40)) for _, salt in p.random_maps)
        rows.append([key, payload * 2 if spec.extra_map else payload])
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


def delivered(spec: Spec, workers: int) -> list[list[np.ndarray]]:
    return [[np.asarray(b) for b in spec.loader(i, workers)] for i in range(spec.shard_count)]


def check_all_steps(spec: Spec, runs: list[list[np.ndarray]]) -> None:
    loader = spec.loader(0)
    steps = max(len(r) for r in runs)
    for t in range(steps):
        p = th.explain(loader, t)
        want = expected_rows(p, spec)
        for i, run in enumerate(runs):
            mine = p.process_indices == i
            if t < len(run):
                np.testing.assert_array_equal(run[t], want[mine])
                one = th.explain(spec.loader(i), t, process_index=i)
                np.testing.assert_array_equal(one.global_positions, p.global_positions[mine])
            else:
                assert not mine.any()
    with pytest.raises(ConfigError, match="past the end"):
        th.explain(loader, steps)


@settings(max_examples=60, deadline=None)
@given(specs)
def test_explain_matches_delivery_in_process(spec: Spec) -> None:
    check_all_steps(spec, delivered(spec, 0))


@settings(max_examples=4, deadline=None)
@given(specs)
def test_explain_matches_delivery_with_workers(spec: Spec) -> None:
    check_all_steps(spec, delivered(spec, 2))


@settings(max_examples=30, deadline=None)
@given(specs, st.integers(0, 2**20), st.sampled_from([1, 7, 10**11]))
def test_explain_far_steps_is_the_sampler(spec: Spec, step_low: int, scale: int) -> None:
    """Any step of an endless stream, far in the future: the sampler's arithmetic, per process."""
    forever = Spec(**{**spec.__dict__, "num_epochs": None})
    step = step_low * scale
    p = th.explain(forever.loader(0), step)
    assert len(p) == forever.shard_count * forever.batch_size
    for i in range(forever.shard_count):
        sampler = forever.loader(i).sampler
        mine = p.process_indices == i
        for pos, g, key, seed in zip(p.positions[mine].tolist(), p.global_positions[mine].tolist(),
                                     p.record_keys[mine].tolist(), p.rng_seeds[mine].tolist()):
            m = sampler[pos]
            assert (m.global_position, m.record_key, m.rng_seed) == (g, key, seed)
            assert pos // forever.batch_size == step


def test_explain_refuses_steps_past_64_bit_positions() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10, num_epochs=None), [th.Batch(4)])
    assert th.explain(loader, 10**12).global_positions[0] == 4 * 10**12
    with pytest.raises(ConfigError, match="2\\*\\*62"):
        th.explain(loader, 2**61)


def test_explain_names_file_and_index(tmp_path: object) -> None:
    paths = []
    for f, n in enumerate([5, 7]):
        path = os.path.join(str(tmp_path), f"part-{f}.array_record")
        th.sources.write_array_record(path, [f"{f}:{i}".encode() for i in range(n)])
        paths.append(path)
    source = th.sources.ArrayRecordSource(paths)
    loader = th.DataLoader(source, th.IndexSampler(12, shuffle=True, seed=5), [th.Batch(4)])
    for t, batch in enumerate(loader):
        p = th.explain(loader, t)
        assert p.locations is not None
        for record, (path, index) in zip(list(batch), p.locations):
            assert record == th.sources.ArrayRecordSource(path)[index]
            assert record.decode() == f"{paths.index(path)}:{index}"


def test_explain_refuses_data_dependent_steps() -> None:
    keep = th.FilterTransform(lambda x: x % 3 != 0)
    loader = th.DataLoader(th.sources.RangeDataSource(0, 30), th.IndexSampler(30), [keep, th.Batch(4)])
    with pytest.raises(ConfigError, match="Filter comes before the Batch"):
        th.explain(loader, 0)
    after = th.DataLoader(th.sources.RangeDataSource(0, 30), th.IndexSampler(30),
                          [th.Batch(4), th.FilterTransform(lambda b: len(b) > 0)])
    with pytest.raises(ConfigError, match="drops whole batches"):
        th.explain(after, 0)


def test_explain_json_and_text() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10, shuffle=True, seed=2),
                           [th.RandomMapTransform(lambda x, rng: x), th.Batch(3)])
    p = th.explain(loader, 1)
    d = p.to_json()
    assert [e["position"] for e in d["elements"]] == [3, 4, 5]
    assert d["random_maps"][0]["operation"].startswith("RandomMap(")
    assert "step 1: 3 elements" in str(p)


def test_explain_takes_a_dataset_or_its_iterator_that_reads_a_source() -> None:
    ds = th.Dataset.source(list(range(30))).shuffle(seed=3).map(lambda x: x * 1).filter(lambda x: True).batch(5)
    plain = th.Dataset.range(40).shuffle(seed=1).repeat(2).batch(4)
    batches = [b.tolist() for b in plain]
    assert [th.explain(plain, t).record_keys.tolist() for t in range(len(batches))] == batches
    it = iter(plain)
    next(it)
    assert th.explain(it, 3).record_keys.tolist() == batches[3]
    with pytest.raises(th.errors.ConfigError, match="cannot be computed from the step number"):
        th.explain(ds, 0)  # a filter: steps depend on the data


def test_explain_refuses_datasets_it_cannot_name_records_of() -> None:
    with pytest.raises(th.errors.ConfigError, match="reads a SliceView"):
        th.explain(th.Dataset.range(100)[10:50].batch(4), 0)
    with pytest.raises(th.errors.ConfigError, match="rebatched after it"):
        th.explain(th.Dataset.range(10).filter(lambda x: x % 2).batch(2).batch(2), 0)
    with pytest.raises(th.errors.ConfigError, match="packs the records of a SliceView"):
        th.explain(th.Dataset.source([[1] * 3] * 10)[2:8].pack(8).batch(2), 0, ledger="unused")
