"""Filter then slice, batches of a filtered stream's batches, an empty dataset repeated
forever: the same elements as Grain (the live oracle), with exact resume."""

from __future__ import annotations

import json
from typing import Any

import grain
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th

D = th.Dataset
G = grain.MapDataset


def _plain(x: Any) -> Any:
    return x.tolist() if isinstance(x, np.ndarray) else int(x)


def _resumes_exactly(ds: th.Dataset, full: list[Any], workers: int = 0) -> None:
    """Stopping after every k and restoring (through JSON) gives the rest of ``full``."""
    for k in range(len(full) + 1):
        it = iter(ds)
        for _ in range(k):
            next(it)
        state = json.loads(json.dumps(it.get_state()))
        it.close()
        it2 = iter(ds.prefetch(worker_count=workers) if workers else ds)
        it2.set_state(state)
        assert [_plain(x) for x in it2] == full[k:]
        it2.close()


def _mod(m: int) -> Any:
    return lambda x: x % m != 0


def _above(t: int) -> Any:
    return lambda x: x > t


def test_filter_then_slice_issue_example() -> None:
    p, q = _mod(3), _above(2)
    ours = D.range(15).slice(1, 10, 2).filter(p).filter(q).slice(2, 4)
    theirs = G.range(15).slice(slice(1, 10, 2)).filter(p).filter(q).slice(slice(2, 4))
    assert [_plain(x) for x in ours] == [_plain(x) for x in theirs] == [5, 7]
    _resumes_exactly(ours, [5, 7])


@given(m=st.integers(2, 4), t=st.integers(-1, 12), start=st.none() | st.integers(-6, 6),
       stop=st.none() | st.integers(-6, 8), step=st.none() | st.integers(1, 3))
@settings(max_examples=60, deadline=None)
def test_filter_then_slice_takes_positions_as_grain(m: int, t: int, start: int | None, stop: int | None,
                                                    step: int | None) -> None:
    """A slice after a filter takes positions of the unfiltered stream (filtered ones are
    holes), as Grain's MapDataset does."""
    ours = D.range(15).slice(1, 10, 2).filter(_mod(m)).filter(_above(t)).slice(start, stop, step)
    theirs = G.range(15).slice(slice(1, 10, 2)).filter(_mod(m)).filter(_above(t)).slice(slice(start, stop, step))
    got = [_plain(x) for x in ours]
    assert got == [_plain(x) for x in theirs]
    _resumes_exactly(ours, got)


@given(m=st.integers(2, 4), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=20, deadline=None)
def test_shuffle_after_random_map_and_filter_as_grain(m: int, seed: int) -> None:
    """The filter cannot move past the random map, so the shuffle shuffles a view with
    holes: the same elements as Grain's (whose permutation differs)."""
    noop = lambda x, rng: x  # noqa: E731
    ours = D.range(30).random_map(noop).filter(_mod(m)).shuffle(seed=seed)
    theirs = G.range(30).random_map(noop, seed=1).filter(_mod(m)).shuffle(seed=seed)
    got = [_plain(x) for x in ours]
    assert sorted(got) == sorted(_plain(x) for x in theirs) and got != sorted(got)
    _resumes_exactly(ours, got)


def test_batch_of_filtered_batches_issue_example() -> None:
    p = _mod(3)
    ours = D.range(12).filter(p).batch(2, drop_remainder=True).batch(2)
    theirs = G.range(12).filter(p).to_iter_dataset().batch(2, drop_remainder=True).batch(2)
    want = [[[1, 2], [4, 5]], [[7, 8], [10, 11]]]
    assert [_plain(x) for x in ours] == [_plain(x) for x in theirs] == want
    _resumes_exactly(ours, want)
    _resumes_exactly(ours, want, workers=2)


@given(n=st.integers(0, 30), m=st.integers(2, 4), inner=st.integers(1, 4), outer=st.integers(1, 3),
       drop_outer=st.booleans())
@settings(max_examples=60, deadline=None)
def test_batch_of_filtered_batches_as_grain(n: int, m: int, inner: int, outer: int, drop_outer: bool) -> None:
    ours = D.range(n).filter(_mod(m)).batch(inner, drop_remainder=True).batch(outer, drop_remainder=drop_outer)
    theirs = (G.range(n).filter(_mod(m)).to_iter_dataset().batch(inner, drop_remainder=True)
              .batch(outer, drop_remainder=drop_outer))
    got = [_plain(x) for x in ours]
    assert got == [_plain(x) for x in theirs]
    _resumes_exactly(ours, got)


def test_partial_inner_batch_as_grain() -> None:
    ours = D.range(12).filter(_mod(3)).batch(3).batch(2).map_batch(lambda b: b * 10)
    theirs = G.range(12).filter(_mod(3)).to_iter_dataset().batch(3).batch(2).map(lambda b: b * 10)
    want = [[[10, 20, 40], [50, 70, 80]], [[100, 110]]]
    assert [_plain(x) for x in ours] == [_plain(x) for x in theirs] == want
    _resumes_exactly(ours, want)


def test_empty_dataset_repeated_forever_is_empty_as_grain() -> None:
    assert list(D.source([]).repeat(None)) == list(G.source([]).repeat(None)) == []
    assert len(D.source([]).repeat(None)) == len(G.source([]).repeat(None)) == 0
    assert list(D.source([]).shuffle(seed=1).repeat(None).batch(2)) == []
    assert list(D.range(0).random_map(lambda x, rng: x).shuffle(seed=2).repeat()) == []


def test_map_after_batch_maps_whole_batches_as_grain() -> None:
    ours = D.range(7).batch(3).map(lambda b: b.sum())
    theirs = G.range(7).batch(3).map(lambda b: b.sum())
    assert [_plain(x) for x in ours] == [_plain(x) for x in theirs] == [3, 12, 6]
