"""The strided stacking path gives np.stack's result bit for bit, in Batch and in loaders with workers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from thresher.transforms.batch import stack
from thresher.transforms.strided_stack import stack_strided

DTYPES = ["uint8", "int16", "float32", "float64", "bool", ">i4", "complex64", "datetime64[s]"]


@st.composite
def _views(draw: st.DrawFn) -> list[np.ndarray]:
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(0, 5)) for _ in range(ndim - 1)) + (draw(st.integers(1, 9)),)
    n = draw(st.integers(1, 5))
    out = []
    for i in range(n):
        full = (*shape[:-1], 2 * shape[-1])
        base = (np.arange(int(np.prod(full))) * (i + 3)).astype(dtype).reshape(full)
        index = tuple(slice(None, None, draw(st.sampled_from([1, -1]))) for _ in range(ndim - 1))
        last = draw(st.sampled_from(["contiguous", "flipped", "strided"]))
        view = base[(*index, slice(0, 2 * shape[-1], 2) if last == "strided" else slice(0, shape[-1]))]
        if last == "flipped":
            view = view[..., ::-1]
        out.append(view)
    return out


@settings(max_examples=200, deadline=None)
@given(elements=_views())
def test_same_bytes_as_np_stack_or_none(elements: list[np.ndarray]) -> None:
    expected = np.stack(elements)
    got = stack_strided(elements)
    if got is not None:
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert got.tobytes() == expected.tobytes()
    assert stack(elements).tobytes() == expected.tobytes()  # whichever path Batch takes


def test_flipped_images_take_the_strided_path() -> None:
    images = [np.random.default_rng(i).integers(0, 255, (16, 12, 3), dtype=np.uint8)[:, ::-1] for i in range(4)]
    got = stack_strided(images)
    assert got is not None and got.tobytes() == np.stack(images).tobytes()
    assert stack_strided([images[0], images[1][:8]]) is None  # shapes differ: np.stack reports it
    assert stack_strided([images[0], images[1].astype(np.int16)]) is None
    assert stack_strided([np.zeros((3, 4), dtype=object)[:, ::-1]] * 2) is None
    assert stack_strided([np.zeros((3, 100))[::2]] * 2) is None  # a long last axis: one item would be too large


def _flip(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return image[:, ::-1] if rng.random() < 0.5 else image


def _image(k: int) -> np.ndarray:
    return (np.arange(8 * 6 * 3, dtype=np.uint8).reshape(8, 6, 3) + k).astype(np.uint8)


@pytest.mark.parametrize(("workers", "mode"), [(0, "process"), (2, "process"), (2, "thread")])
def test_loader_batches_equal_np_stack_of_the_same_records(workers: int, mode: str) -> None:
    n = 40
    ops = [_image, th.RandomMapTransform(_flip)]
    plain = th.DataLoader(th.sources.RangeDataSource(0, n), th.IndexSampler(n, shuffle=True, seed=3), ops)
    records = list(plain)  # one record at a time: no stacking at all
    loader = th.DataLoader(th.sources.RangeDataSource(0, n), th.IndexSampler(n, shuffle=True, seed=3),
                           [*ops, th.Batch(8)], worker_count=workers, worker_mode=mode)
    batches = list(loader)
    assert [b.tobytes() for b in batches] == [np.stack(records[i:i + 8]).tobytes() for i in range(0, n, 8)]
