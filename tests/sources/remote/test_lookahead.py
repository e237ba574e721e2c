"""Eviction by the sampler's look-ahead window (Belady within a window): fewer fetches,
the same records and batches, memory bounded by the window."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from benchmarks.cache_policy import lru_fetches, window_fetches
from thresher.errors import ConfigError
from thresher.sources.remote import RemoteReadOptions
from thresher.sources.remote.chunk_cache import ChunkCache


def _put(cache: ChunkCache, key: tuple[int, int]) -> None:
    assert cache.claim([key])[2] == [key]
    cache.fulfil(key, ([0, 12], bytes(12)))  # 12 + 2 * 8 = 28 bytes


def _window(cache: ChunkCache, keys: list[tuple[int, int]]) -> None:
    cache.upcoming(np.array([f for f, _ in keys], dtype=np.int64), np.array([c for _, c in keys], dtype=np.int64))


def test_eviction_spares_the_chunks_the_window_needs() -> None:
    cache = ChunkCache(budget=3 * 28)
    for c in range(3):
        _put(cache, (0, c))
    _window(cache, [(0, 0), (0, 5), (0, 1)])  # (0, 0) is the least recent, but needed soon
    _put(cache, (0, 3))
    assert sorted(cache._entries) == [(0, 0), (0, 1), (0, 3)]  # (0, 2): not needed, evicted
    _window(cache, [(0, 3), (0, 1), (0, 0), (0, 9)])  # every chunk is needed: the one needed last goes,
    _put(cache, (0, 9))                               # here the new one (handed over, not kept)
    assert sorted(cache._entries) == [(0, 0), (0, 1), (0, 3)]
    _window(cache, [(0, 9), (0, 3), (0, 1), (0, 0)])
    _put(cache, (0, 9))
    assert sorted(cache._entries) == [(0, 1), (0, 3), (0, 9)]
    _window(cache, [])  # no window: plain LRU
    _put(cache, (0, 4))
    assert sorted(cache._entries) == [(0, 3), (0, 4), (0, 9)]
    assert len(cache._window) == 0 and not cache._soon


def test_the_window_is_bounded_and_off_by_default() -> None:
    assert RemoteReadOptions().lookahead == 0
    with pytest.raises(ConfigError, match="lookahead"):
        RemoteReadOptions(lookahead=2**21)
    with pytest.raises(ConfigError, match="lookahead"):
        RemoteReadOptions(lookahead=-1)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), chunks=st.integers(20, 80), slots=st.integers(2, 40))
def test_window_never_fetches_more_than_lru_in_simulation(seed: int, chunks: int, slots: int) -> None:
    order = (np.random.default_rng(seed).permutation(chunks * 8) // 8).tolist() * 2
    assert window_fetches(order, slots, window=len(order), every=1) <= lru_fetches(order, slots)


def _files(folder: str, group: int, n: int = 600) -> tuple[list[str], list[bytes]]:
    rng = np.random.default_rng(group)
    records = [rng.bytes(int(rng.integers(1, 300))) for _ in range(n)]
    paths = []
    for i in range(2):
        path = os.path.join(folder, f"la-{group}-{i}.array_record")
        th.sources.write_array_record(path, records[i * n // 2:(i + 1) * n // 2], group_size=group)
        paths.append(path)
    return paths, records


def _source(paths: list[str], records: list[bytes], lookahead: int) -> Any:
    budget = sum(len(r) for r in records) // 4  # a quarter of the data: evictions all the time
    return th.sources.ArrayRecordSource(paths, reader="ranges", read_options=RemoteReadOptions(
        cache_bytes=budget, lookahead=lookahead, fill_cache=False))


def test_the_window_cuts_the_fetches_of_two_epochs(tmp_path: Any) -> None:
    paths, records = _files(str(tmp_path), 16)
    sampler = th.IndexSampler(len(records), shuffle=True, seed=1, num_epochs=2)
    keys = np.array([sampler[p].record_key for p in range(len(sampler))])
    misses = {}
    for lookahead in (0, 2048):
        src = _source(paths, records, lookahead)
        for lo in range(0, len(keys), 8):  # as the loader does: the keys after the batch, then the batch
            if src.lookahead_records:
                src.upcoming(keys[lo + 8:lo + 8 + src.lookahead_records])
            assert src.__getitems__(keys[lo:lo + 8].tolist()) == [records[k] for k in keys[lo:lo + 8]]
        assert src._ranges is not None
        misses[lookahead] = src._ranges._process()["cache"].misses
    assert misses[2048] * 4 < misses[0] * 3  # 558 against 864: a quarter less at least


def _batches(paths: list[str], records: list[bytes], lookahead: int, workers: int, seed: int,
             batch: int) -> list[list[int]]:
    src = _source(paths, records, lookahead)
    sampler = th.IndexSampler(len(src), shuffle=True, seed=seed, num_epochs=2)
    ops = [lambda r: np.frombuffer(r[:8].ljust(8, b"\0"), np.uint8).astype(np.int64), th.Batch(batch)]
    loader = th.DataLoader(src, sampler, ops, worker_count=workers, read_options=th.ReadOptions(num_threads=1))
    out = [b.tolist() for b in loader]
    if workers == 0 and lookahead:  # the loader told this process's cache the keys ahead
        assert src._ranges is not None and len(src._ranges._process()["cache"]._window)
    return out


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(group=st.sampled_from([1, 4, 16]), seed=st.integers(0, 1000), batch=st.integers(1, 40),
       lookahead=st.integers(1, 3000))
def test_batches_are_bit_identical_with_and_without_the_window(tmp_path: Any, group: int, seed: int, batch: int,
                                                               lookahead: int) -> None:
    paths, records = _files(str(tmp_path), group)
    assert _batches(paths, records, lookahead, 0, seed, batch) == _batches(paths, records, 0, 0, seed, batch)


def test_batches_and_resume_with_workers_do_not_change(tmp_path: Any) -> None:
    paths, records = _files(str(tmp_path), 8)
    expected = _batches(paths, records, 0, 0, 5, 16)
    assert _batches(paths, records, 4096, 2, 5, 16) == expected
    src = _source(paths, records, 4096)
    sampler = th.IndexSampler(len(src), shuffle=True, seed=5, num_epochs=2)
    ops = [lambda r: np.frombuffer(r[:8].ljust(8, b"\0"), np.uint8).astype(np.int64), th.Batch(16)]
    reads = th.ReadOptions(num_threads=1)  # reads ahead on a thread: the path that tells the window
    it = iter(th.DataLoader(src, sampler, ops, worker_count=2, read_options=reads))
    first = [next(it).tolist() for _ in range(20)]
    state = it.get_state()
    it.close()
    again = iter(th.DataLoader(src, sampler, ops, worker_count=2, read_options=reads))
    again.set_state(state)
    assert first + [b.tolist() for b in again] == expected


def test_a_prepared_split_in_a_bucket_passes_the_window_on(tmp_path: Any) -> None:
    from tests.sources.remote.range_server import RangeServer

    with RangeServer(str(tmp_path / "buckets")) as srv:
        so = srv.s3_options()
        srv.make_bucket("prep")
        data = {"train": [{"x": i, "pad": "y" * (i % 50)} for i in range(300)]}
        features = {"x": th.features.Scalar("int64"), "pad": th.features.Text()}
        th.prepare("s3://prep/toy", data, features=features, storage_options=so, progress=False, num_shards=2)
        th.prepare(str(tmp_path / "toy"), data, features=features, progress=False, num_shards=2)
        small = RemoteReadOptions(cache_bytes=4000, fill_cache=False, lookahead=8192)
        remote = th.data_source("s3://prep/toy", split="train[10:]", storage_options=so, read_options=small)
        local = th.data_source(str(tmp_path / "toy"), split="train[10:]")
        assert remote.lookahead_records == 8192 and local.lookahead_records == 0
        sampler = th.IndexSampler(len(local), shuffle=True, seed=2, num_epochs=2)
        reads = th.ReadOptions(num_threads=1)
        got = [b["x"] for b in th.DataLoader(remote, sampler, [th.Batch(8)], worker_count=0, read_options=reads)]
        want = [b["x"] for b in th.DataLoader(local, sampler, [th.Batch(8)], worker_count=0)]
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
        cache = remote._reader._ranges._process()["cache"]
        assert len(cache._window) and cache.evictions > 0
        remote.close()
