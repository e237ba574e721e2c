"""BlockShuffle: a bijection per epoch with a window bound, O(1) state, exact resume, disjoint shards."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import thresher as th
from thresher.errors import ConfigError, IncompatibleStateError
from thresher.samplers.block_shuffle import EpochOrder


@st.composite
def _shuffles(draw: st.DrawFn, n: int) -> th.BlockShuffle:
    block = draw(st.one_of(st.just(1), st.just(max(n, 1)), st.integers(1, max(n + 3, 1))))
    window = draw(st.one_of(st.just(1), st.integers(1, 9), st.just(max(n, 1))))
    boundaries = None
    if n > 1 and draw(st.booleans()):  # a source's natural blocks: any strictly increasing starts from 0
        inner = draw(st.sets(st.integers(1, n - 1), max_size=min(n - 1, 40)))
        boundaries = np.array([0, *sorted(inner)], dtype=np.int64)
    return th.BlockShuffle(block_size=block, window_blocks=window, boundaries=boundaries)


@given(data=st.data(), n=st.one_of(st.integers(1, 40), st.integers(41, 5000)), seed=st.integers(0, 2**64 - 1),
       epochs=st.integers(1, 2))
@settings(max_examples=150, deadline=None)
def test_each_epoch_is_a_bijection_and_every_position_stays_in_its_window(
        data: st.DataObject, n: int, seed: int, epochs: int) -> None:
    shuffle = data.draw(_shuffles(n))
    s = th.IndexSampler(n, shuffle=shuffle, seed=seed, num_epochs=epochs)
    keys, ep = s.record_keys(s.to_global(np.arange(len(s))))
    for e in range(epochs):
        assert sorted(keys[e * n:(e + 1) * n].tolist()) == list(range(n))  # each record exactly once
        assert (ep[e * n:(e + 1) * n] == e).all()
        order = s.epoch_order(e)
        for i in range(0, n, max(1, n // 50)):  # the window bound, on a sample of positions
            blocks = order.window_blocks(order.window_of(i))
            assert any(a <= int(keys[e * n + i]) < b for a, b in blocks), (i, blocks)
            if shuffle.boundaries is None:
                assert len(blocks) <= shuffle.window_blocks
    for p in data.draw(st.lists(st.integers(0, len(s) - 1), max_size=5)):
        assert s[p].record_key == int(keys[p])  # the scalar path agrees with the vectorised one


def test_plain_blocks_read_whole_blocks_and_windows_hold_window_blocks() -> None:
    n, b, w = 10_000, 64, 4
    s = th.IndexSampler(n, shuffle=th.BlockShuffle(block_size=b, window_blocks=w), seed=3)
    keys = s.keys(np.arange(n))
    for start in range(0, n - n % (b * w), b * w):
        blocks = set((keys[start:start + b * w] // b).tolist())
        assert len(blocks) == w  # a window is w whole blocks, each read in full
        assert all(sorted(keys[(keys // b) == k].tolist()) == list(range(k * b, k * b + b)) for k in blocks)
    assert keys[: b * w].tolist() != sorted(keys[: b * w].tolist())  # shuffled inside the window
    assert set((keys[-(n % (b * w)):] // b).tolist()) >= {n // b}  # the short last block is last


def test_natural_boundaries_are_the_blocks() -> None:
    starts = np.array([0, 5, 17, 18, 40, 77], dtype=np.int64)
    n = 100
    s = th.IndexSampler(n, shuffle=th.BlockShuffle(block_size=10, window_blocks=2, boundaries=starts), seed=1)
    keys = s.keys(np.arange(n))
    assert sorted(keys.tolist()) == list(range(n))
    order = s.epoch_order(0)
    drawn = {r for w in range(5) for r in order.window_blocks(w)}
    bounds = [*starts.tolist(), n]
    assert drawn == set(itertools.pairwise(bounds))  # every block whole, none cut
    for w in range(5):  # a window's keys all lie in its blocks
        blocks = order.window_blocks(w)
        assert all(any(a <= k < z for a, z in blocks) for k in keys[w * 20:(w + 1) * 20].tolist())


def test_bad_boundaries_and_sizes_are_refused_with_the_option_named() -> None:
    with pytest.raises(ConfigError, match="boundaries"):
        th.BlockShuffle(boundaries=np.array([1, 4]))
    with pytest.raises(ConfigError, match="window_blocks"):
        th.BlockShuffle(window_blocks=0)
    with pytest.raises(ConfigError, match="of another source"):
        th.IndexSampler(10, shuffle=th.BlockShuffle(4, 2, boundaries=np.array([0, 12])), seed=0)
    with pytest.raises(ConfigError, match="seed"):
        th.IndexSampler(10, shuffle=th.BlockShuffle(4, 2))


def test_resume_at_10_12_is_exact_and_memory_does_not_grow() -> None:
    import tracemalloc

    n = 10**12
    shuffle = th.BlockShuffle(block_size=4096, window_blocks=16)
    tracemalloc.start()
    s = th.IndexSampler(n, shuffle=shuffle, seed=5, num_epochs=None)
    g = np.arange(3 * n - 300, 3 * n + 300)  # across an epoch boundary
    keys, epochs = s.record_keys(g)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 << 20, peak
    fresh = th.IndexSampler(n, shuffle=shuffle, seed=5, num_epochs=None)
    assert [fresh[int(p)].record_key for p in g[::97]] == keys[::97].tolist()
    assert epochs[0] == 2 and epochs[-1] == 3 and (keys < n).all()


def test_epochs_and_seeds_differ_and_per_record_seeds_are_the_full_shuffles() -> None:
    shuffle = th.BlockShuffle(block_size=16, window_blocks=4)
    s = th.IndexSampler(1000, shuffle=shuffle, seed=1, num_epochs=2)
    full = th.IndexSampler(1000, shuffle=True, seed=1, num_epochs=2)
    k = s.keys(np.arange(2000))
    assert k[:1000].tolist() != k[1000:].tolist()
    assert th.IndexSampler(1000, shuffle=shuffle, seed=2).keys(np.arange(1000)).tolist() != k[:1000].tolist()
    g = np.arange(2000)
    assert (s.rng_seeds(g) == full.rng_seeds(g)).all()  # RandomMap seeds come from the global position


@given(n=st.integers(1, 3000), shards=st.integers(2, 4), block=st.integers(1, 50), window=st.integers(1, 6),
       epochs=st.integers(1, 2), drop=st.booleans())
@settings(max_examples=80, deadline=None)
@example(n=600, shards=3, block=10, window=3, epochs=2, drop=False)
@example(n=4096, shards=4, block=64, window=4, epochs=1, drop=True)
def test_shards_read_disjoint_blocks_and_cover_the_global_stream(
        n: int, shards: int, block: int, window: int, epochs: int, drop: bool) -> None:
    shuffle = th.BlockShuffle(block_size=block, window_blocks=window)
    one = th.IndexSampler(n, shuffle=shuffle, seed=9, num_epochs=epochs)
    parts = [th.IndexSampler(n, shuffle=shuffle, seed=9, num_epochs=epochs,
                             shard_options=th.ShardOptions(i, shards, drop_remainder=drop)) for i in range(shards)]
    assert all(p.block_size == shuffle.window_records for p in parts)  # dealt in whole windows
    every: dict[int, int] = {}
    for p in parts:
        g = p.to_global(np.arange(len(p)))
        keys = p.keys(g)
        for gg, k in zip(g.tolist(), keys.tolist(), strict=True):
            assert gg not in every
            every[gg] = k
    expect = one.keys(np.arange(len(one)))
    assert all(expect[gg] == k for gg, k in every.items())  # the same global stream as one process
    if not drop:
        assert len(every) == len(one)
    if n % shuffle.window_records == 0:  # windows never straddle epochs: blocks are strictly disjoint
        for e in range(epochs):
            owners: dict[int, int] = {}
            for i, p in enumerate(parts):
                g = p.to_global(np.arange(len(p)))
                g = g[(g >= e * n) & (g < (e + 1) * n)]
                for b in set((p.keys(g) // block).tolist()):
                    assert owners.setdefault(b, i) == i, f"block {b} read by shards {owners[b]} and {i}"


def _loader(shuffle: object, workers: int = 0, mode: str = "process", seed: int = 0) -> th.DataLoader:
    return th.DataLoader(th.sources.RangeDataSource(0, 500), th.IndexSampler(500, shuffle=shuffle, seed=seed,
                         num_epochs=2), [th.Batch(8)], worker_count=workers, worker_mode=mode)


@pytest.mark.parametrize("workers, mode", [(2, "thread"), (2, "process")])
def test_every_worker_count_gives_the_same_batches(workers: int, mode: str) -> None:
    shuffle = th.BlockShuffle(block_size=8, window_blocks=3)
    want = [b.tolist() for b in _loader(shuffle)]
    assert [b.tolist() for b in _loader(shuffle, workers, mode)] == want
    assert sorted([x for b in want for x in b][:500]) == list(range(500))


@given(stop=st.integers(0, 124))
@settings(max_examples=15, deadline=None)
def test_resume_anywhere_gives_the_rest_of_the_run(stop: int) -> None:
    shuffle = th.BlockShuffle(block_size=8, window_blocks=3)
    want = [b.tolist() for b in _loader(shuffle)]
    it = iter(_loader(shuffle))
    for _ in range(stop):
        next(it)
    state = it.get_state()
    again = iter(_loader(shuffle))
    again.set_state(state)
    assert [b.tolist() for b in again] == want[stop:]


def test_a_full_shuffle_state_is_refused_with_the_reason() -> None:
    it = iter(_loader(True))
    next(it)
    with pytest.raises(IncompatibleStateError, match="shuffle"):
        iter(_loader(th.BlockShuffle(8, 3))).set_state(it.get_state())
    it = iter(_loader(th.BlockShuffle(8, 3)))
    next(it)
    with pytest.raises(IncompatibleStateError, match="shuffle"):
        iter(_loader(th.BlockShuffle(8, 4))).set_state(it.get_state())


def test_epoch_order_is_a_bijection_for_tiny_sizes() -> None:
    for n in range(1, 30):
        for b in (1, 2, 3, n, n + 1):
            for w in (1, 2, 5):
                order = EpochOrder(n, th.BlockShuffle(b, w), key=n * 31 + b)
                assert sorted(order.keys(np.arange(n)).tolist()) == list(range(n))


def test_an_explicit_shard_block_of_one_batch_keeps_the_global_batch_of_one_process() -> None:
    shuffle = th.BlockShuffle(block_size=16, window_blocks=4)
    one = th.IndexSampler(1000, shuffle=shuffle, seed=2)
    parts = [th.IndexSampler(1000, shuffle=shuffle, seed=2, shard_options=th.ShardOptions(i, 2, block_size=8))
             for i in range(2)]
    for step in range(10):  # the 2 local batches of a step are positions [16 * step, 16 * step + 16) of one process
        local = [p.keys(p.to_global(np.arange(8 * step, 8 * step + 8))) for p in parts]
        assert np.concatenate(local).tolist() == one.keys(np.arange(16 * step, 16 * step + 16)).tolist()
