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
from thresher.transforms.batch import stack

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


def _int_or_dict(x: int) -> object:
    return {"n": x} if x % 5 == 3 else x


@pytest.mark.parametrize("workers", [0, 2])
def test_a_map_returning_int_or_dict_is_refused_naming_the_leaf_and_the_types(workers: int) -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 40), th.IndexSampler(40),
                           [_int_or_dict, th.Batch(8)], worker_count=workers)
    with pytest.raises(BatchError) as info:
        list(loader)
    message = str(info.value)
    assert "leaf <root>" in message and "is an int" in message and "is a dict" in message
    assert "position 3" in message and "object_arrays=True" in message


def test_object_arrays_keep_mixed_values_when_asked() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 8), th.IndexSampler(8),
                           [_int_or_dict, th.Batch(8, object_arrays=True)])
    [batch] = list(loader)
    assert batch.dtype == object and batch[3] == {"n": 3} and batch[4] == 4
    assert "object_arrays=True" in repr(th.Batch(8, object_arrays=True))


@pytest.mark.parametrize("values, kinds", [
    ([{"y": 1}, {"y": "a"}], ("an int", "a str")),           # np.asarray would make strings of both
    ([{"y": "a"}, {"y": 2}], ("a str", "an int")),
    ([{"y": 1.5}, {"y": None}], ("a float", "a NoneType")),  # np.asarray would make an object array
    ([{"y": np.zeros(2)}, {"y": np.array(["a", "b"])}], ("an ndarray of float64", "an ndarray of <U1")),
    ([{"y": b"x"}, {"y": "x"}], ("a bytes", "a str")),
])
def test_leaves_of_different_types_are_refused(values: list, kinds: tuple[str, str]) -> None:
    with pytest.raises(BatchError, match=rf"leaf \['y'\]: element 0 .* is {kinds[0]} but element 1 .* is {kinds[1]}"):
        stack(values, positions=[0, 1])


@given(st.lists(st.one_of(st.integers(-2**40, 2**40), st.floats(allow_nan=False), st.booleans()),
                min_size=1, max_size=20))
def test_numbers_of_any_python_type_still_stack_as_numpy_would(values: list) -> None:
    np.testing.assert_array_equal(stack(values), np.asarray(values))


@given(dtype=hnp.scalar_dtypes(), data=st.data())
@settings(max_examples=80)
def test_numpy_scalars_stack_as_numpy_would(dtype: np.dtype, data: st.DataObject) -> None:
    """NumPy scalars of one type (a label as np.int64) take a fast path: the same array, dtype
    included, as np.asarray gives; mixed NumPy types still combine as np.asarray combines them."""
    values = list(data.draw(hnp.arrays(dtype, st.integers(1, 20))))
    got, want = stack(values), np.asarray(values)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    if dtype.kind not in "biufc":  # only numbers mix (see test_leaves_of_different_types_are_refused)
        return
    mixed = [*values, np.float16(1)]
    got, want = stack(mixed), np.asarray(mixed)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


class _MyDict(dict):  # type: ignore[type-arg]
    """A dict subclass: the fast path leaves it to the element-by-element checks."""


_LEAVES = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False, width=32), st.booleans(), st.text(max_size=3),
                    st.binary(max_size=3), st.none(), st.just(np.int64(3)), st.just(np.zeros(2)),
                    st.just(np.array(["a", "b"])))


@st.composite
def _records(draw: st.DrawFn) -> list[object]:
    """Batches that mostly stack, often with one element off: a key renamed (same length), a key
    more, another leaf type, a dict subclass."""
    keys = draw(st.lists(st.sampled_from(["a", "b", "c", 1, (2, 3)]), min_size=1, max_size=3, unique=True))
    leaf = {k: draw(_LEAVES) for k in keys}
    n = draw(st.integers(1, 6))
    out: list[object] = [dict(leaf) for _ in range(n)]
    i = draw(st.integers(0, n - 1))
    change = draw(st.sampled_from(["none", "rename", "extra", "leaf", "subclass", "not a dict"]))
    e = dict(leaf)
    if change == "rename":
        e["z"] = e.pop(keys[0])
    elif change == "extra":
        e["z"] = 0
    elif change == "leaf":
        e[keys[-1]] = draw(_LEAVES)
    elif change == "subclass":
        e = _MyDict(e)
    if change == "not a dict":
        out[i] = tuple(e.values())
    elif change != "none":
        out[i] = e
    return out


def _outcome(values: list[object], object_arrays: bool) -> object:
    try:
        out = stack(values, positions=list(range(10, 10 + len(values))), object_arrays=object_arrays)
    except BatchError as e:
        return ("error", str(e))
    flat = out.items() if isinstance(out, dict) else enumerate(out) if isinstance(out, tuple) else [(None, out)]
    return [(k, type(v).__name__, v.dtype.str, v.tolist()) for k, v in flat]


@settings(max_examples=300, deadline=None)
@given(values=_records(), object_arrays=st.booleans())
def test_fast_checks_give_the_element_by_element_result(values: list[object], object_arrays: bool) -> None:
    from thresher.transforms import batch

    fast = _outcome(values, object_arrays)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(batch, "_same_dicts", lambda elements, n: False)
        m.setattr(batch, "_single_type", lambda elements: False)
        slow = _outcome(values, object_arrays)
    assert fast == slow
