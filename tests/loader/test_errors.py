"""Invariant 6: errors carry the operation, record key and position."""

from __future__ import annotations

import numpy as np
import pytest

import thresher as th
from thresher.errors import BatchError, ConfigError, TransformError


def test_failing_map_names_operation_key_and_position() -> None:
    def decode(x: int) -> int:
        if x == 37:
            raise ValueError("bad record")
        return x

    loader = th.DataLoader(th.sources.RangeDataSource(0, 50), th.IndexSampler(50, shuffle=True, seed=4),
                           [decode, th.Batch(8)])
    position = next(p for p in range(50) if loader.sampler[p].record_key == 37)
    with pytest.raises(TransformError, match=rf"Map\(.*decode\).*record key 37 at position {position}") as e:
        list(loader)
    assert isinstance(e.value.__cause__, ValueError)
    assert e.value.record_key == 37 and e.value.position == position  # type: ignore[attr-defined]


def test_failing_filter_and_random_map_after_filter() -> None:
    def aug(x: int, rng: np.random.Generator) -> int:
        if x == 9:
            raise KeyError("nine")
        return x

    loader = th.DataLoader(th.sources.RangeDataSource(0, 20), th.IndexSampler(20),
                           [th.FilterTransform(lambda x: x % 3 == 0), th.RandomMapTransform(aug)])
    with pytest.raises(TransformError, match=r"RandomMap\(.*aug\).*record key 9 at position 9"):
        list(loader)
    loader = th.DataLoader(th.sources.RangeDataSource(0, 20), th.IndexSampler(20),
                           [th.FilterTransform(lambda x: 1 / (x - 5))])
    with pytest.raises(TransformError, match=r"Filter.*record key 5 at position 5.*ZeroDivisionError"):
        list(loader)


def test_batch_of_mismatched_shapes_names_leaf_and_positions() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10),
                           [lambda x: {"v": np.zeros(2 if x != 3 else 3)}, th.Batch(5)])
    with pytest.raises(BatchError, match=r"\['v'\].*\(2,\).*position 3.*\(3,\)"):
        list(loader)


def test_failing_batch_op_names_the_batch_positions() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10),
                           [th.Batch(5), lambda b: b[7]])
    with pytest.raises(TransformError, match=r"positions \[0, 5\).*IndexError"):
        list(loader)


def test_bad_loader_arguments() -> None:
    src = th.sources.RangeDataSource(0, 10)
    with pytest.raises(ConfigError, match="num_records=11"):
        th.DataLoader(src, th.IndexSampler(11))
    with pytest.raises(ConfigError, match="worker_count"):
        th.DataLoader(src, th.IndexSampler(10), worker_count=-1)
    with pytest.raises(ConfigError, match="sampler"):
        th.DataLoader(src, range(10))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="random access"):
        th.DataLoader(iter(range(10)), th.IndexSampler(10))
    with pytest.raises(ConfigError, match="list of operations"):
        th.DataLoader(src, th.IndexSampler(10), th.Batch(2))  # type: ignore[arg-type]


def test_post_batch_operations() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10),
                           [th.Batch(3), lambda b: b * 10, th.FilterTransform(lambda b: b.sum() != 120),
                            th.RandomMapTransform(lambda b, rng: b + rng.integers(0, 1))])
    assert [b.tolist() for b in loader] == [[0, 10, 20], [60, 70, 80], [90]]
    assert len(th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10), [th.Batch(3)])) == 4
