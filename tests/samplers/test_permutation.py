"""Invariant 4: an O(1)-memory keyed bijection for every N; seeds derived by hashing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.randomness.permutation import SMALL_N, Permutation
from thresher.randomness.seeds import DOMAIN_PERMUTATION, derive_seed


def _is_bijection(n: int, key: int) -> bool:
    out = Permutation(n, key)(np.arange(n, dtype=np.uint64))
    return out.size == n and bool(np.array_equal(np.sort(out), np.arange(n, dtype=np.uint64)))


def test_bijection_for_every_n_up_to_5000() -> None:
    for n in range(1, 5001):
        assert _is_bijection(n, key=n * 7919), n


@pytest.mark.parametrize("k", range(1, 21))
def test_bijection_around_powers_of_two(k: int) -> None:
    for n in (2**k - 1, 2**k, 2**k + 1):
        assert _is_bijection(n, key=12345 + k), n


def test_sampled_injective_at_10_to_the_12() -> None:
    n = 10**12
    perm = Permutation(n, key=99)
    rng = np.random.default_rng(0)
    xs = np.unique(rng.integers(0, n, size=200_000, dtype=np.int64)).astype(np.uint64)
    ys = perm(xs)
    assert ys.max() < n
    assert np.unique(ys).size == xs.size
    # the last indices and a contiguous run too
    tail = np.arange(n - 50_000, n, dtype=np.uint64)
    assert np.unique(perm(tail)).size == tail.size
    assert perm.at(n - 1) == int(perm(np.array([n - 1], dtype=np.uint64))[0])


@given(n=st.integers(1, 10**15), key=st.integers(0, 2**64 - 1), data=st.data())
@settings(max_examples=200, deadline=None)
def test_any_size_any_key_maps_into_range_injectively(n: int, key: int, data: st.DataObject) -> None:
    xs = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=50, unique=True))
    ys = Permutation(n, key)(np.array(xs, dtype=np.uint64))
    assert all(0 <= y < n for y in ys.tolist())
    assert len(set(ys.tolist())) == len(xs)


def test_keys_give_different_permutations() -> None:
    n = 1000
    a = Permutation(n, derive_seed(5, DOMAIN_PERMUTATION, 0))(np.arange(n))
    b = Permutation(n, derive_seed(5, DOMAIN_PERMUTATION, 1))(np.arange(n))
    c = Permutation(n, derive_seed(6, DOMAIN_PERMUTATION, 0))(np.arange(n))
    assert not np.array_equal(a, b) and not np.array_equal(a, c)
    # (seed s, epoch e+1) is not (seed s+1, epoch e)
    assert derive_seed(0, DOMAIN_PERMUTATION, 1) != derive_seed(1, DOMAIN_PERMUTATION, 0)
    for s in range(20):
        for e in range(20):
            assert derive_seed(s, DOMAIN_PERMUTATION, e + 1) != derive_seed(s + 1, DOMAIN_PERMUTATION, e)


def test_position_of_a_record_is_uniform_over_keys() -> None:
    """Chi-square test: where record 0 lands, over 20,000 keys, for n = 10."""
    n, trials = 10, 20_000
    counts = np.zeros(n)
    for key in range(trials):
        counts[Permutation(n, derive_seed(key, 1)).at(0)] += 1
    expected = trials / n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 30.0, counts  # 9 dof: p ~ 0.0004 at 30


def test_every_position_is_uniform_for_small_n() -> None:
    """The full n x n table of (record -> slot) frequencies is flat for n = 5."""
    n, trials = 5, 20_000
    table = np.zeros((n, n))
    for key in range(trials):
        out = Permutation(n, derive_seed(key, 2))(np.arange(n)).astype(int)
        table[np.arange(n), out] += 1
    expected = trials / n
    chi2 = float(((table - expected) ** 2 / expected).sum())
    assert chi2 < 60.0, table  # 16 dof: p ~ 1e-6 at 60


def test_adjacent_records_do_not_stay_adjacent() -> None:
    n = 100_000
    out = Permutation(n, key=2024)(np.arange(n)).astype(np.int64)
    adjacent = np.mean(np.abs(np.diff(out)) == 1)
    assert adjacent < 0.001  # a random permutation keeps ~2/n adjacent
    # and the identity-like structure is gone: correlation of input and output ~ 0
    assert abs(np.corrcoef(np.arange(n), out)[0, 1]) < 0.02


def test_size_zero_and_one() -> None:
    assert Permutation(0, 1)(np.array([], dtype=np.uint64)).size == 0
    assert Permutation(1, 1).at(0) == 0
    with pytest.raises(IndexError):
        Permutation(3, 1).at(3)


def test_feistel_regime_is_uniform_too() -> None:
    """Above SMALL_N the Feistel walk is used: record 0's slot, bucketed, is flat over keys."""
    from thresher.randomness.permutation import SMALL_N

    n, trials, buckets = SMALL_N + 905, 12_000, 10
    counts = np.zeros(buckets)
    before = 0
    for key in range(trials):
        perm = Permutation(n, derive_seed(key, 3))
        a, b = perm(np.array([0, 1], dtype=np.uint64)).tolist()
        counts[a * buckets // n] += 1
        before += a < b
    expected = trials / buckets
    assert float(((counts - expected) ** 2 / expected).sum()) < 30.0, counts
    assert abs(before / trials - 0.5) < 0.025


def test_shuffle_memory_does_not_grow_with_n() -> None:
    """Invariant 4: shuffling 10**12 records allocates what shuffling 10**5 does (no array of N)."""
    import tracemalloc

    import thresher as th

    peaks = {}
    for n in (10**5, 10**12):
        tracemalloc.start()
        sampler = th.IndexSampler(n, shuffle=True, seed=1, num_epochs=None)
        keys, _ = sampler.record_keys(sampler.to_global(np.arange(10**12 - 1000, 10**12)))
        assert keys.max() < n
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[10**12] < 256 * 1024, peaks
    assert peaks[10**12] < 2 * peaks[10**5] + 64 * 1024, peaks


_SIZES = st.one_of(st.integers(SMALL_N + 1, 70_000), st.integers(2, 40).map(lambda k: 2**k + 1),
                   st.integers(2, 40).map(lambda k: 2**k), st.integers(1, 10**15))


@given(n=_SIZES, key=st.integers(0, 2**64 - 1), data=st.data())
@settings(max_examples=150, deadline=None)
def test_windowed_calls_equal_the_per_position_path(n: int, key: int, data: st.DataObject) -> None:
    """Whatever sequence of calls (sequential chunks, strided shards, jumps, restores), every index gets
    the key that ``at`` computes alone; windows only change when work is done, never the result."""
    perm = Permutation(n, key)
    start = data.draw(st.integers(0, n - 1))
    for _ in range(data.draw(st.integers(1, 12))):
        size = data.draw(st.integers(1, 600))
        stride = data.draw(st.sampled_from([1, 1, 1, 2, 7, 64]))
        if data.draw(st.booleans()):
            start = data.draw(st.integers(0, n - 1))  # a jump (a restore, another epoch's position)
        xs = np.arange(start, min(start + size * stride, n), stride, dtype=np.int64)
        if data.draw(st.booleans()):
            xs = xs[::-1].copy()  # any order
        got = perm(xs)
        assert got.dtype == np.uint64
        assert got.tolist() == [perm.at(i) for i in xs.tolist()]
        assert perm.keys(xs).tolist() == got.tolist()
        start = int(xs.max()) + 1 if int(xs.max()) + 1 < n else 0


def test_window_and_tables_stay_bounded_and_are_not_pickled() -> None:
    """Invariant 4 with the speed-ups: a full pass keeps at most WINDOW_MAX keys and TABLE_BITS tables."""
    import pickle

    from thresher.randomness.permutation import TABLE_BITS, WINDOW_MAX

    for n in (10**6, 2**28 + 3, 10**12):
        perm = Permutation(n, 7)
        for start in range(0, 300_000, 256):
            perm(np.arange(start, start + 256))
        window = perm._window
        assert window is not None and window[1].size <= WINDOW_MAX
        tables = perm._tables or []
        assert all(t.size <= 2**TABLE_BITS for t, *_ in tables)
        assert (tables != []) == (n <= 2**28)
        assert len(pickle.dumps(perm)) < 200
        assert pickle.loads(pickle.dumps(perm))(np.arange(5)).tolist() == perm(np.arange(5)).tolist()


def test_out_of_range_indices_are_refused() -> None:
    for n in (100, 10**6):
        perm = Permutation(n, 3)
        perm(np.arange(10))  # a window exists now
        for bad in ([n], [-1], [0, n + 5]):
            with pytest.raises(IndexError, match="out of range"):
                perm(np.array(bad))
