"""Batch stacks pytrees; mismatches name the leaf path, shapes and positions."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import thresher as th
from thresher.errors import BatchError, ConfigError

Pair = namedtuple("Pair", "a b")


def test_stacks_nested_structures() -> None:
    els = [{"img": np.full((2, 2), i, np.uint8), "meta": (i, float(i)), "p": Pair(i, [i, i])} for i in range(3)]
    b = th.Batch(3).stack(els)
    assert b["img"].shape == (3, 2, 2) and b["img"].dtype == np.uint8
    assert b["meta"][0].tolist() == [0, 1, 2] and b["meta"][1].dtype == np.float64
    assert isinstance(b["p"], Pair) and b["p"].b[1].tolist() == [0, 1, 2]


@given(shape=hnp.array_shapes(max_dims=3, max_side=4), dtype=hnp.scalar_dtypes(), n=st.integers(1, 5))
@settings(max_examples=50, deadline=None)
def test_stack_of_arrays_matches_np_stack(shape: tuple, dtype: np.dtype, n: int) -> None:
    arrays = [np.zeros(shape, dtype) for _ in range(n)]
    out = th.Batch(n).stack([{"x": a} for a in arrays])["x"]
    assert out.shape == (n, *shape) and out.dtype == np.stack(arrays).dtype


def test_mismatched_shapes_name_the_leaf_and_both_shapes() -> None:
    els = [{"img": np.zeros((28, 28))}, {"img": np.zeros((28, 28))}, {"img": np.zeros((28, 27))}]
    with pytest.raises(BatchError, match=r"\['img'\].*\(28, 28\).*element 2 \(position 12\).*\(28, 27\)"):
        th.Batch(3).stack(els, positions=[10, 11, 12])


def test_mismatched_structure() -> None:
    with pytest.raises(BatchError, match="keys"):
        th.Batch(2).stack([{"a": 1}, {"b": 1}])
    with pytest.raises(BatchError, match="tuple of 2"):
        th.Batch(2).stack([(1, 2), (1, 2, 3)])


@pytest.mark.parametrize("size", [0, -3, 2.5, True])
def test_bad_batch_size(size: object) -> None:
    with pytest.raises(ConfigError, match="batch_size"):
        th.Batch(size)  # type: ignore[arg-type]


def test_operations_are_normalised_and_named() -> None:
    def decode(x: int) -> int:
        return x

    plan = th.transforms.plan_operations([decode, th.RandomMapTransform(lambda x, r: x),
                                          th.FilterTransform(bool), th.Batch(4), np.asarray])
    assert [op.name for op in plan.record_ops] == ["Map(test_operations_are_normalised_and_named.<locals>.decode)",
                                                   "RandomMap(test_operations_are_normalised_and_named.<locals>.<lambda>)",
                                                   "Filter(bool)"]
    assert plan.batch is not None and plan.batch.batch_size == 4 and plan.filter_before_batch
    assert [op.name for op in plan.batch_ops] == ["Map(asarray)"]
    with pytest.raises(ConfigError, match="second Batch"):
        th.transforms.plan_operations([th.Batch(2), th.Batch(2)])
    with pytest.raises(ConfigError, match="not a transform"):
        th.transforms.plan_operations([42])
