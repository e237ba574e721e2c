"""Process workers stack batches into the memory files they send them in (shm.ResultArena):
same batches, no copy when packing, no descriptor left open."""

from __future__ import annotations

import contextlib
import gc
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from thresher.errors import BatchError
from thresher.loader.pool.shm import (
    MAX_LIVE_FILES,
    MAX_SEGMENTS,
    OOB_MIN_BYTES,
    ResultArena,
    pack,
    shared_memory_available,
    unpack,
)
from thresher.transforms.batch import set_array_allocator, stack

pytestmark = pytest.mark.skipif(not shared_memory_available(), reason="memfd_create is Linux-only")


def _result_files() -> int:
    """Descriptors of this process open on result memory files (other descriptors come and go
    with other tests' threads)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:thresher-result")
    return n


def test_arena_arrays_are_sent_as_they_are_and_others_copied() -> None:
    arena = ResultArena()
    big = arena.empty((64, 128), np.float32)
    big[:] = np.arange(big.size, dtype=np.float32).reshape(big.shape)
    other = np.arange(4096, dtype=np.int64)  # an ordinary array: copied into a new file
    small = arena.empty((4,), np.int32)  # below OOB_MIN_BYTES: an ordinary array, in the pickle
    small[:] = 7
    packed = pack({"big": big, "other": other, "small": small}, arena)
    assert len(packed.fds) == 2 and sorted(packed.sizes) == sorted([big.nbytes, other.nbytes])
    big[0, 0] = -1.0  # sent as it is: the receiver sees the same memory
    other[0] = -1  # copied when packed: the receiver does not
    out = unpack(packed.meta, packed.layout, packed.sizes, packed.fds)
    assert out["big"][0, 0] == -1.0 and np.array_equal(out["big"][1:], big[1:])
    assert out["other"][0] == 0 and np.array_equal(out["other"][1:], other[1:])
    assert out["small"].tolist() == [7] * 4


def test_arena_descriptors_close_once_unused_beyond_the_free_ones_kept() -> None:
    arena = ResultArena()
    before = _result_files()
    arrays = [arena.empty((256, 1024), np.uint8) for _ in range(5)]
    held = _result_files()  # the arena's descriptors (and each mapping's own duplicate, made by mmap)
    assert held > before and len(arena) == 5
    packed = pack(arrays[:3], arena)
    assert _result_files() == held + 3  # the packed result holds one duplicate per array, nothing copied
    assert len(packed.sizes) == 3 and packed.idents == [1, 2, 3]
    packed.close()
    del arrays
    gc.collect()
    # the three sent wait for the receiver's release; of the two never sent, MAX_FREE (2), or as many as
    # the largest result sent had (3), are kept free to be made again
    assert len(arena) == 0 and arena.free == 2
    arena.release([1, 2, 3])
    assert arena.free == 3  # the largest result sent had three files: three are kept
    arena.clear()
    gc.collect()
    assert _result_files() == before and arena.free == 0


def test_a_result_of_many_arena_arrays_is_copied_into_few_files() -> None:
    """A chunk of many small batches: each message carries at most MAX_SEGMENTS descriptors
    (wire.MAX_FDS), so more arena arrays than that are copied as before."""
    arena = ResultArena()
    arrays = [arena.empty((1024,), np.float32) for _ in range(MAX_SEGMENTS + 5)]
    for i, a in enumerate(arrays):
        a[:] = i
    packed = pack(arrays, arena)
    assert 1 <= len(packed.fds) <= MAX_SEGMENTS
    out = unpack(*_parts(packed))
    assert [float(a[0]) for a in out] == [float(i) for i in range(MAX_SEGMENTS + 5)]


def test_an_arena_holds_few_files_at_once() -> None:
    arena = ResultArena()
    arrays = [arena.empty((1024,), np.float64) for _ in range(MAX_LIVE_FILES + 3)]
    assert len(arena) == MAX_LIVE_FILES  # the rest are plain memory
    assert all(a.shape == (1024,) for a in arrays)
    del arrays
    gc.collect()
    assert len(arena) == 0


def test_a_view_that_outlives_its_array_stays_readable_and_is_copied() -> None:
    arena = ResultArena()
    a = arena.empty((1024, 8), np.float64)
    a[:] = 3.0
    view = a.reshape(-1)[: a.size // 2]  # part of the memory: not the arena's file, copied if sent
    del a
    gc.collect()
    assert len(arena) == 1 and float(view.sum()) == 3.0 * view.size  # the view keeps the file in use
    packed = pack(view, arena)
    assert packed.idents == [None]
    out = unpack(packed.meta, packed.layout, packed.sizes, packed.fds)
    assert np.array_equal(out, view)
    del view
    gc.collect()
    assert len(arena) == 0 and arena.free == 1
    arena.clear()


_DTYPES = st.sampled_from([np.uint8, np.int32, np.float32, np.float64, np.bool_, "U3", object])


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(0, 40), min_size=0, max_size=3), dtype=_DTYPES)
def test_arena_empty_is_np_empty_of_its_shape_and_dtype(shape: list[int], dtype: Any) -> None:
    arena = ResultArena()
    a = arena.empty(tuple(shape), dtype)
    assert a.shape == tuple(shape) and a.dtype == np.dtype(dtype) and a.flags.writeable
    in_file = len(arena) == 1
    assert in_file == (a.nbytes >= OOB_MIN_BYTES and not np.dtype(dtype).hasobject)
    if a.dtype.kind in "uifb":
        a[...] = 1
        out = unpack(*_parts(pack(a, arena)))
        assert np.array_equal(out, a) and out.dtype == a.dtype


def _parts(p: Any) -> tuple[Any, ...]:
    return p.meta, p.layout, p.sizes, p.fds


@st.composite
def _leaves(draw: st.DrawFn) -> list[np.ndarray]:
    """Arrays mostly alike (some flipped views), sometimes with one of another dtype or shape."""
    shape = tuple(draw(st.lists(st.integers(1, 24), min_size=1, max_size=3)))
    n = draw(st.integers(1, 8))
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    out = []
    for _ in range(n):
        a = (rng.random(shape) * 100).astype(np.float32)
        out.append(a[..., ::-1, :] if a.ndim >= 2 and draw(st.booleans()) else a)
    odd = draw(st.sampled_from(["none", "dtype", "shape"]))
    if odd == "dtype":
        out[-1] = out[-1].astype(np.int64)
    elif odd == "shape":
        out[-1] = np.zeros((*shape[:-1], shape[-1] + 1), np.float32)
    return out


def _stacked(leaves: list[np.ndarray]) -> Any:
    try:
        out = stack([{"x": a} for a in leaves], positions=list(range(len(leaves))))["x"]
    except BatchError as e:
        return ("error", str(e))
    return (out.dtype.str, out.shape, out.tolist())


@settings(max_examples=80, deadline=None)
@given(leaves=_leaves())
def test_batch_stacks_into_the_arena_the_same_arrays(leaves: list[np.ndarray]) -> None:
    plain = _stacked(leaves)
    arena = ResultArena()
    set_array_allocator(arena.empty)
    try:
        into_arena = _stacked(leaves)
    finally:
        set_array_allocator(None)
    assert into_arena == plain


def _decode(x: int) -> dict[str, np.ndarray]:
    img = np.full((48, 40, 3), x % 251, dtype=np.uint8)
    img[0, :, 0] = np.arange(40, dtype=np.uint8)
    return {"image": img, "label": np.int64(x)}


def _flip(r: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"image": r["image"][:, ::-1] if rng.random() < 0.5 else r["image"], "label": r["label"]}


@pytest.mark.parametrize("batch", [1, 32])  # 1: chunks of many batches, more arrays than a message's files
def test_process_workers_batches_equal_in_process_ones_and_leave_no_descriptor(batch: int) -> None:
    def batches(workers: int) -> list[tuple[np.ndarray, np.ndarray]]:
        loader = th.DataLoader(list(range(200)), th.IndexSampler(200, shuffle=True, seed=3, num_epochs=1),
                               [_decode, th.RandomMapTransform(_flip), th.Batch(batch)], worker_count=workers)
        with iter(loader) as it:
            return [(b["image"].copy(), b["label"].copy()) for b in it]

    before = _result_files()
    here, there = batches(0), batches(2)
    assert len(here) == len(there) == -(-200 // batch)
    for (ia, la), (ib, lb) in zip(here, there, strict=True):
        assert np.array_equal(ia, ib) and np.array_equal(la, lb) and ia.dtype == ib.dtype
    gc.collect()
    assert _result_files() == before  # no result's file is left open
