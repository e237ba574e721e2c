"""Heavy record operations run part by part (each part through all of them): the chunk's
elements, kept positions and errors are those of running each operation on the whole chunk."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from thresher.errors import TransformError
from thresher.loader import chunk as chunk_module
from thresher.loader.chunk import ChunkProcessor
from thresher.transforms import plan_operations


@contextmanager
def heavy_from(ns: int | None) -> Iterator[None]:
    """Operations heavy from ``ns`` a record (0: always, part by part); None: no parts at all,
    each operation on the whole chunk (the code path of chunks too small to cut)."""
    saved = chunk_module.HEAVY_NS, chunk_module.SUBCHUNK
    if ns is None:
        chunk_module.SUBCHUNK = 10**9
    else:
        chunk_module.HEAVY_NS = ns
    try:
        yield
    finally:
        chunk_module.HEAVY_NS, chunk_module.SUBCHUNK = saved


def _ops(kinds: list[str]) -> list[Any]:
    out: list[Any] = []
    for i, kind in enumerate(kinds):
        if kind == "map":
            out.append(th.MapTransform(lambda x, i=i: x * 3 + i))
        elif kind == "filter":
            out.append(th.FilterTransform(lambda x, i=i: (x + i) % 3 != 0))
        else:
            out.append(th.RandomMapTransform(lambda x, rng: x + int(rng.integers(0, 1000))))
    return out


def _chunk(kinds: list[str], n: int, seed: int, fail_at: int | None = None) -> Any:
    data = list(range(1000, 1000 + n))
    ops = _ops(kinds)
    if fail_at is not None:
        ops.append(th.MapTransform(lambda x: 1 // (x - fail_at) if isinstance(x, int) else x))
    sampler = th.IndexSampler(n, shuffle=True, seed=seed)
    proc = ChunkProcessor(data, sampler, plan_operations(ops))
    return proc.process(np.arange(n, dtype=np.int64))


@settings(max_examples=60, deadline=None)
@given(kinds=st.lists(st.sampled_from(["map", "filter", "random"]), min_size=2, max_size=5),
       n=st.integers(33, 200), seed=st.integers(0, 5))
def test_parts_give_the_whole_chunks_elements(kinds: list[str], n: int, seed: int) -> None:
    with heavy_from(None):
        whole = _chunk(kinds, n, seed)
    for heavy in (0, 10**12):  # parts of SUBCHUNK throughout; a first part, then the rest at once
        with heavy_from(heavy):
            parts = _chunk(kinds, n, seed)
        assert parts.elements == whole.elements
        assert parts.positions.tolist() == whole.positions.tolist()
        assert len(parts.marks) == len(whole.marks) and parts.marks == sorted(parts.marks)


@pytest.mark.parametrize("heavy", [None, 0, 10**12])
def test_an_operation_failing_in_a_later_part_names_its_record(heavy: int | None) -> None:
    n = 100
    with heavy_from(heavy):
        whole = _chunk(["map", "map"], n, 0)
        target = whole.elements[70]  # the 71st element after the maps fails in the last operation
        with pytest.raises(TransformError) as info:
            _chunk(["map", "map"], n, 0, fail_at=target)
    assert info.value.position == 70


class _Flaky:
    """A source whose reads of some keys fail (errors="skip" drops them)."""

    def __init__(self, n: int, bad_every: int) -> None:
        self.n, self.bad_every = n, bad_every

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key: int) -> int:
        if key % self.bad_every == 3:
            raise OSError(f"record {key} is damaged")
        return 1000 + key


def _skipping_chunk(kinds: list[str], n: int, seed: int, bad_read: int, bad_value: int) -> Any:
    ops = _ops(kinds)
    ops.insert(1, th.MapTransform(lambda x: x if x % bad_value != 1 else 1 // 0))  # fails between others
    sampler = th.IndexSampler(n, shuffle=True, seed=seed)
    proc = ChunkProcessor(_Flaky(n, bad_read), sampler, plan_operations(ops), skip_errors=True)
    return proc.process(np.arange(n, dtype=np.int64))


def _dropped(chunk: Any) -> list[tuple[Any, ...]]:
    return [(d.position, d.global_position, d.record_key, d.stage, d.error) for d in chunk.dropped or []]


@settings(max_examples=60, deadline=None)
@given(kinds=st.lists(st.sampled_from(["map", "filter", "random"]), min_size=2, max_size=5),
       n=st.integers(0, 200), seed=st.integers(0, 5), bad_read=st.integers(4, 40),
       bad_value=st.integers(2, 40))
def test_skipping_errors_part_by_part_drops_and_keeps_the_same_records(
        kinds: list[str], n: int, seed: int, bad_read: int, bad_value: int) -> None:
    with heavy_from(None):
        whole = _skipping_chunk(kinds, n, seed, bad_read, bad_value)
    for heavy in (0, 10**12):
        with heavy_from(heavy):
            parts = _skipping_chunk(kinds, n, seed, bad_read, bad_value)
        assert parts.elements == whole.elements
        assert parts.positions.tolist() == whole.positions.tolist()
        assert _dropped(parts) == _dropped(whole)
        assert len(parts.marks) == len(whole.marks) and parts.marks == sorted(parts.marks)
    assert len(whole.elements) + len(_dropped(whole)) <= n  # filters drop more, silently


def test_skipping_errors_part_by_part_names_the_dropped_records() -> None:
    with heavy_from(0):
        chunk = _skipping_chunk(["map", "random"], 100, 0, bad_read=10, bad_value=10**9)
    keys = [d.record_key for d in chunk.dropped or []]
    assert sorted(keys) == [k for k in range(100) if k % 10 == 3]
    assert all(d.stage == "read" and f"record {d.record_key} is damaged" in d.error for d in chunk.dropped or [])
    assert len(chunk.elements) == 90


def test_images_through_the_loader_are_the_same_part_by_part(tmp_path: Any) -> None:
    def decode(x: int) -> np.ndarray:
        return np.full((64, 64, 3), x % 251, dtype=np.uint8)

    def crop(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        y = int(rng.integers(0, 32))
        return img[y:y + 32, ::-1]

    def batches() -> list[np.ndarray]:
        loader = th.DataLoader(list(range(300)), th.IndexSampler(300, shuffle=True, seed=1, num_epochs=1),
                               [th.MapTransform(decode), th.RandomMapTransform(crop), th.Batch(100)])
        return [b.copy() for b in loader]

    with heavy_from(None):
        whole = batches()
    with heavy_from(0):
        parts = batches()
    assert len(whole) == 3 and all(np.array_equal(a, b) for a, b in zip(whole, parts, strict=True))
