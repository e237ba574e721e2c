"""The global stream and the dealing of blocks to shards (docs/architecture.md)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from thresher.errors import ConfigError


def _keys(s: th.IndexSampler) -> list[int]:
    return [s[p].record_key for p in range(len(s))]


def _globals(s: th.IndexSampler) -> list[int]:
    return s.to_global(np.arange(len(s))).tolist()


@given(n=st.integers(1, 300), epochs=st.integers(1, 3), seed=st.integers(0, 2**64 - 1),
       shuffle=st.booleans())
@settings(max_examples=60, deadline=None)
def test_every_record_once_per_epoch(n: int, epochs: int, seed: int, shuffle: bool) -> None:
    s = th.IndexSampler(n, shuffle=shuffle, seed=seed, num_epochs=epochs)
    assert len(s) == n * epochs
    keys = _keys(s)
    for e in range(epochs):
        assert sorted(keys[e * n:(e + 1) * n]) == list(range(n))
    if shuffle and epochs > 1 and n > 20:
        assert keys[:n] != keys[n:2 * n]  # epochs are shuffled differently


@given(n=st.integers(0, 200), epochs=st.integers(1, 3), shards=st.integers(1, 6), block=st.integers(1, 9),
       drop=st.booleans(), data=st.data())
@settings(max_examples=150, deadline=None)
def test_shards_are_disjoint_cover_and_have_the_right_length(n: int, epochs: int, shards: int, block: int,
                                                             drop: bool, data: st.DataObject) -> None:
    total = n * epochs
    samplers = [th.IndexSampler(n, num_epochs=epochs,
                                shard_options=th.ShardOptions(i, shards, drop, block_size=block))
                for i in range(shards)]
    parts = [_globals(s) for s in samplers]
    rounds, rest = divmod(total, shards * block)
    for i, part in enumerate(parts):
        expected = rounds * block if drop else rounds * block + min(max(rest - i * block, 0), block)
        assert len(part) == expected
        # a shard's positions are whole blocks k with k mod P == i, in order
        assert all((g // block) % shards == i for g in part)
        assert part == sorted(part)
    union = sorted(g for part in parts for g in part)
    if drop:
        assert union == list(range(rounds * shards * block))
        assert len({len(p) for p in parts}) == 1  # equal lengths
    else:
        assert union == list(range(total))


def test_local_batches_of_a_step_are_consecutive_global_positions() -> None:
    """With blocks = per-process batch size, step t of P shards is [t*P*b, (t+1)*P*b)."""
    n, shards, b = 1000, 4, 8
    samplers = [th.IndexSampler(n, shard_options=th.ShardOptions(i, shards, True, block_size=b))
                for i in range(shards)]
    for t in range(len(samplers[0]) // b):
        step = []
        for s in samplers:
            step.extend(s.to_global(np.arange(t * b, (t + 1) * b)).tolist())
        assert step == list(range(t * shards * b, (t + 1) * shards * b))


def test_shards_see_a_random_part_of_each_epoch() -> None:
    """Unlike a contiguous split, shard 0's records are spread over the whole key range."""
    s = th.IndexSampler(10_000, shuffle=True, seed=3, shard_options=th.ShardOptions(0, 4))
    keys = np.array(_keys(s))
    assert keys.min() < 500 and keys.max() > 9_500


def test_record_metadata_fields() -> None:
    s = th.IndexSampler(10, shuffle=True, seed=7, num_epochs=3, shard_options=th.ShardOptions(1, 2))
    m = s[4]
    assert m.position == 4 and m.global_position == 9 and m.epoch == 0
    m = s[7]
    assert m.global_position == 15 and m.epoch == 1
    assert s[7].rng_seed == s[7].rng_seed and s[7].rng_seed != s[6].rng_seed


def test_rng_seeds_depend_on_global_position_only() -> None:
    a = th.IndexSampler(100, shuffle=True, seed=5, shard_options=th.ShardOptions(1, 2))
    b = th.IndexSampler(100, shuffle=True, seed=5)
    assert a[3].rng_seed == b[a[3].global_position].rng_seed
    assert a[3].record_key == b[a[3].global_position].record_key


def test_endless_sampler() -> None:
    s = th.IndexSampler(7, shuffle=True, seed=1, num_epochs=None)
    with pytest.raises(TypeError):
        len(s)
    m = s[10**12]
    assert m.epoch == 10**12 // 7 and 0 <= m.record_key < 7


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_records=-1), "num_records"),
    (dict(num_records=10, shuffle=True), "seed"),
    (dict(num_records=10, num_epochs=0), "num_epochs"),
    (dict(num_records=0, num_epochs=None), "empty"),
    (dict(num_records=10, seed=-1), "seed"),
    (dict(num_records=10, seed=2**64), "seed"),
])
def test_bad_sampler_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        th.IndexSampler(**kwargs)


def test_bad_shard_options() -> None:
    with pytest.raises(ConfigError, match="shard_index >= shard_count"):
        th.ShardOptions(shard_index=4, shard_count=4)
    with pytest.raises(ConfigError, match="shard_count"):
        th.ShardOptions(shard_index=0, shard_count=0)
    with pytest.raises(ConfigError, match="block_size"):
        th.ShardOptions(0, 1, block_size=0)


def test_position_out_of_range() -> None:
    with pytest.raises(IndexError):
        th.IndexSampler(5)[5]


@given(n=st.integers(1, 10**13), shards=st.integers(1, 5), block=st.integers(1, 300), seed=st.integers(0, 2**64 - 1),
       shuffle=st.booleans(), data=st.data())
@settings(max_examples=150, deadline=None)
def test_scalar_and_vectorised_paths_agree(n: int, shards: int, block: int, seed: int, shuffle: bool,
                                           data: st.DataObject) -> None:
    s = th.IndexSampler(n, shuffle=shuffle, seed=seed, num_epochs=None,
                        shard_options=th.ShardOptions(data.draw(st.integers(0, shards - 1)), shards,
                                                      block_size=block))
    positions = data.draw(st.lists(st.integers(0, 10**14), min_size=1, max_size=8))
    g = s.to_global(np.array(positions))
    keys, epochs = s.record_keys(g)
    seeds = s.rng_seeds(g)
    for i, p in enumerate(positions):
        m = s[p]
        assert (m.global_position, m.record_key, m.epoch, m.rng_seed) == (int(g[i]), int(keys[i]), int(epochs[i]),
                                                                          int(seeds[i]))


@given(n=st.one_of(st.integers(1, 5000), st.integers(4097, 200_000), st.integers(1, 10**12)),
       shards=st.integers(1, 4), block=st.sampled_from([1, 64, 256]), seed=st.integers(0, 2**64 - 1),
       chunk=st.sampled_from([1, 100, 256, 1024]), data=st.data())
@settings(max_examples=100, deadline=None)
def test_chunked_record_keys_across_epochs_equal_the_scalar_path(n: int, shards: int, block: int, seed: int,
                                                                 chunk: int, data: st.DataObject) -> None:
    """The loader's calls (consecutive chunks of positions, through epoch ends) give sampler[p] for every p."""
    s = th.IndexSampler(n, shuffle=True, seed=seed, num_epochs=None,
                        shard_options=th.ShardOptions(data.draw(st.integers(0, shards - 1)), shards,
                                                      block_size=block))
    # Start a little before an epoch boundary of this shard, so chunks straddle it.
    start = max(0, data.draw(st.integers(0, 3)) * n // shards - data.draw(st.integers(0, 2 * chunk)))
    for c in range(4):
        positions = np.arange(start + c * chunk, start + (c + 1) * chunk, dtype=np.int64)
        keys, epochs = s.record_keys(s.to_global(positions))
        expected = [s[int(p)] for p in positions]
        assert keys.tolist() == [m.record_key for m in expected]
        assert epochs.tolist() == [m.epoch for m in expected]
