"""Dataset.shuffle(seed, block=th.BlockShuffle(...)): the engine's block shuffle in a chain, with its
bijection, window bound, shards, exact resume, worker counts and checked states."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.dataset.spec import decode_int, encode_int


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 200), st.integers(1, 20), st.integers(1, 6), st.integers(0, 2**64 - 1), st.integers(1, 3))
def test_epochs_are_the_samplers_block_shuffle(n: int, block: int, window: int, seed: int, epochs: int) -> None:
    shuffle = th.BlockShuffle(block_size=block, window_blocks=window)
    got = list(th.Dataset.range(n).shuffle(seed, block=shuffle).repeat(epochs))
    sampler = th.IndexSampler(n, shuffle=shuffle, seed=seed, num_epochs=epochs)
    assert got == sampler.keys(np.arange(n * epochs)).tolist()  # the engine's order: a bijection per epoch
    for e in range(epochs):
        epoch = got[e * n:(e + 1) * n]
        assert sorted(epoch) == list(range(n))
        for w in range(0, n, block * window):  # the window bound: a window reads window_blocks blocks
            blocks = sampler.epoch_order(e).window_blocks(w // (block * window))
            assert all(any(a <= k < b for a, b in blocks) for k in epoch[w:w + block * window])


def test_random_map_before_a_block_shuffle_draws_anew_each_epoch() -> None:
    ds = (th.Dataset.range(24).random_map(lambda x, rng: (x, int(rng.integers(10**6))), seed=2)
          .shuffle(7, block=th.BlockShuffle(4, 2)).repeat(2))
    got = list(ds)
    keys = th.IndexSampler(24, shuffle=th.BlockShuffle(4, 2), seed=7, num_epochs=2).keys(np.arange(48)).tolist()
    assert [x for x, _ in got] == keys
    assert {d for _, d in got[:24]} != {d for _, d in got[24:]}


def test_shards_are_disjoint_and_cover_the_epoch() -> None:
    ds = th.Dataset.range(100).shuffle(3, block=th.BlockShuffle(5, 2))
    parts = [list(ds.shard(th.ShardOptions(i, 3))) for i in range(3)]
    assert sorted(sum(parts, [])) == list(range(100))
    for part in parts:  # each shard reads whole windows: whole blocks of 5
        assert all(sum(1 for x in part if x // 5 == b) in (0, 5) for b in range(20))


def _chunked(tmp: str, n: int, group: int) -> th.sources.ArrayRecordSource:
    path = os.path.join(tmp, "d.array_record")
    th.sources.write_array_record(path, [encode_int(i) for i in range(n)], group_size=group)
    return th.sources.ArrayRecordSource(path)


def test_natural_blocks_from_the_source(tmp_path: Any) -> None:
    src = _chunked(str(tmp_path), 90, 6)
    shuffle = th.BlockShuffle.of_source(src, block_size=10, window_blocks=2)  # blocks of 2 chunks: 12 records
    assert shuffle.boundaries is not None and shuffle.boundaries.tolist() == list(range(0, 90, 12))
    ds = th.Dataset.source(src).shuffle(1, block=shuffle).map(decode_int)
    assert "natural boundaries" in ds.compile().stages[0]
    got = list(ds)
    assert got == th.IndexSampler(90, shuffle=shuffle, seed=1).keys(np.arange(90)).tolist()
    for w in range(0, 90, 20):  # a window of 20 records lies within 3 blocks of 12 (whole chunks)
        assert len({x // 12 for x in got[w:w + 20]}) <= 3


@pytest.mark.parametrize("workers", [(0, 2), (2, 1)])
def test_resume_exactly_with_other_worker_counts(tmp_path: Any, workers: tuple[int, int]) -> None:
    src = _chunked(str(tmp_path), 200, 4)

    def build(w: int) -> th.Dataset:
        ds = (th.Dataset.source(src).shuffle(11, block=th.BlockShuffle.of_source(src, block_size=8, window_blocks=3))
              .map(decode_int).repeat(2).batch(7))
        return ds.prefetch(worker_count=w) if w else ds

    full = [b.tolist() for b in build(0)]
    assert [b.tolist() for b in build(workers[1])] == full  # the same batches for every worker count
    for k in (0, 1, 29, len(full)):
        it = iter(build(workers[0]))
        for _ in range(k):
            next(it)
        state = json.loads(json.dumps(it.get_state()))
        it.close()
        again = iter(build(workers[1]))
        again.set_state(state)
        assert [b.tolist() for b in again] == full[k:]
        again.close()


def test_a_full_shuffle_state_is_refused() -> None:
    full, block = th.Dataset.range(50).shuffle(1), th.Dataset.range(50).shuffle(1, block=th.BlockShuffle(5, 2))
    it = iter(full)
    next(it)
    state = it.get_state()
    again = iter(block)
    with pytest.raises(th.errors.IncompatibleStateError, match="shuffle .saved True"):
        again.set_state(state)
    other = iter(th.Dataset.range(50).shuffle(1, block=th.BlockShuffle(5, 3)))  # another window: another stream
    it = iter(block)
    next(it)
    with pytest.raises(th.errors.IncompatibleStateError, match="window_blocks"):
        other.set_state(it.get_state())


def test_block_must_be_a_block_shuffle() -> None:
    with pytest.raises(th.errors.ConfigTypeError, match="BlockShuffle"):
        th.Dataset.range(4).shuffle(0, block=4)  # type: ignore[arg-type]
