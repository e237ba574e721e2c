"""Sequence packing: no token lost or duplicated, well-formed rows, padding reported, exact resume."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.dataset.spec import build, run_fresh_many, take, tokens_of
from thresher.dataset.packing import pack_window

D = th.Dataset


def _check_rows(rows: dict) -> None:
    """segment_ids count 1, 2, ... along each row; positions restart at 0 per segment; padding is 0."""
    seg, pos, tok = rows["segment_ids"], rows["positions"], rows["tokens"]
    for r in range(seg.shape[0]):
        s, p, t = seg[r], pos[r], tok[r]
        real = s > 0
        n = int(real.sum())
        assert real[:n].all() and not real[n:].any()  # segments first, padding last
        assert (p[~real] == 0).all() and (t[~real] == 0).all()
        starts = np.flatnonzero(np.diff(np.concatenate([[0], s[:n]])) != 0)
        assert s[:n][starts].tolist() == list(range(1, len(starts) + 1))
        for a, b in zip(starts, list(starts[1:]) + [n]):
            assert p[a:b].tolist() == list(range(b - a))
            k = t[a:b] // 1000
            assert (k == k[0]).all() and (t[a:b] % 1000).tolist() == list(range(b - a))  # one whole record


@pytest.mark.parametrize("shards", [1, 3])
def test_no_token_lost_or_duplicated_across_an_epoch(shards: int) -> None:
    n = 500
    base = D.range(n).shuffle(seed=4).map(tokens_of).filter(lambda t: len(t) != 7)
    expected = collections.Counter(np.concatenate([t for t in map(tokens_of, range(n)) if len(t) != 7]).tolist())
    got: collections.Counter = collections.Counter()
    for s in range(shards):
        ds = base.pack(64, window=32).batch(8).shard(th.ShardOptions(s, shards))
        it = iter(ds)
        for b in it:
            assert b["tokens"].shape[1] == 64 and b["tokens"].dtype == np.int32
            _check_rows(b)
            got.update(b["tokens"][b["segment_ids"] > 0].tolist())
        stats = it.packing_stats()
        assert 0 < stats.padding_fraction < 0.2 and stats.tokens + stats.padding_tokens == stats.rows * 64
    assert got == expected


def test_padding_is_reported_and_matches_the_rows() -> None:
    it = iter(D.range(300).map(tokens_of).pack(48, window=64).batch(16))
    pad = total = 0
    for b in it:
        pad += int((b["segment_ids"] == 0).sum())
        total += b["segment_ids"].size
    stats = it.packing_stats()
    assert stats.padding_tokens == pad and stats.tokens + stats.padding_tokens == total
    assert stats.padding_fraction == pytest.approx(pad / total)
    assert stats.records == 300 and "padding" in str(stats)


@given(lengths=st.lists(st.integers(0, 20), max_size=60), seq_len=st.integers(20, 40))
@settings(max_examples=100, deadline=None)
def test_pack_window_keeps_every_record_whole(lengths: list[int], seq_len: int) -> None:
    records = [(np.int64(k) * 1000 + np.arange(n)).astype(np.int32) for k, n in enumerate(lengths)]
    block = pack_window(records, seq_len)
    _check_rows(block.rows)
    assert block.row_tokens.sum() == sum(lengths)
    got = sorted(block.rows["tokens"][block.rows["segment_ids"] > 0].tolist())
    assert got == sorted(np.concatenate(records + [np.zeros(0, np.int32)]).tolist())
    # best fit decreasing never needs more than twice the ideal number of rows (+1)
    assert block.num_rows <= 2 * (-(-sum(lengths) // seq_len)) + 1


def test_rows_without_batch_and_dict_records() -> None:
    ds = D.range(20).map(lambda k: {"inputs": tokens_of(k), "targets": tokens_of(k) + 1}).pack(64)
    rows = list(ds)
    assert set(rows[0]) == {"inputs", "targets", "segment_ids", "positions"}
    assert all(r["inputs"].shape == (64,) for r in rows)
    real = np.concatenate([r["inputs"][r["segment_ids"] > 0] for r in rows])
    assert sorted(real.tolist()) == sorted(np.concatenate([tokens_of(k) for k in range(20)]).tolist())


def test_long_records_truncate_or_raise() -> None:
    long = D.source([np.arange(10, dtype=np.int32), np.arange(3, dtype=np.int32)])
    with pytest.raises(th.errors.TransformError, match="truncate=True"):
        list(long.pack(8))
    it = iter(long.pack(8, truncate=True))
    rows = list(it)
    assert it.packing_stats().truncated_tokens == 2 and sum(int((r["segment_ids"] > 0).sum()) for r in rows) == 11


PACK_SPEC = {"source": ["tokens", 400], "steps": [["shuffle", 9], ["filter"], ["repeat", 2], ["pack", 96, 40],
                                                 ["batch", 5, True]]}


def test_resume_exact_at_every_batch() -> None:
    full = take(build(PACK_SPEC), 10**6)
    assert len(full) > 30
    it = iter(build(PACK_SPEC))
    states = []
    for _ in range(len(full)):
        states.append(json.loads(json.dumps(it.get_state())))
        next(it)
    states.append(it.get_state())
    for k in range(0, len(full) + 1, 3):
        it2 = iter(build(PACK_SPEC))
        it2.set_state(states[k])
        assert take(it2, 10**6) == full[k:]
    assert max(len(json.dumps(s)) for s in states) < 1024
    # and in a fresh process
    ks = [1, len(full) // 2, len(full) - 1]
    assert run_fresh_many([{"spec": PACK_SPEC, "state": states[k], "limit": 10**6} for k in ks]) == [full[k:] for k in ks]


def test_restore_repacks_at_most_one_window() -> None:
    calls = []

    def counted(k: int) -> np.ndarray:
        calls.append(k)
        return tokens_of(k)

    ds = D.range(10**6).map(counted).pack(64, window=50).batch(4)
    it = iter(ds)
    for _ in range(200):
        next(it)
    state = it.get_state()
    calls.clear()
    it2 = iter(ds)
    it2.set_state(state)
    assert len(calls) <= 50  # the window being emitted, re-packed; nothing before it
    next(it2)


def test_pack_errors() -> None:
    with pytest.raises(th.errors.ConfigError, match="before pack"):
        list(D.range(5).map(tokens_of).pack(64).map(lambda r: r))
    with pytest.raises(th.errors.ConfigError, match="before batch"):
        list(D.range(5).map(tokens_of).batch(2).pack(64))
    with pytest.raises(th.errors.RandomAccessError, match="pack at step 2"):
        D.range(5).map(tokens_of).pack(64)[0]
    with pytest.raises(th.errors.InvalidStateError, match="pack"):
        iter(D.range(5).map(tokens_of).pack(64)).set_state(iter(D.range(5)).get_state())


def test_packing_same_output_for_worker_counts() -> None:
    full = take(build(PACK_SPEC), 10**6)
    for workers in (1, 2):
        assert take(build(PACK_SPEC, worker_count=workers), 10**6) == full
