"""The chunk cache of the byte-range reader: budget, sharing of fetches, determinism, errors.

Files are written by array_record's own writer; reads go through real threads, the range
server on 127.0.0.1 and real worker processes.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.sources.remote.range_server import RangeServer
from tests.sources.remote.test_range_reader import read_native, write_native
from thresher.errors import ConfigError, SourceError
from thresher.sources.remote import RemoteReadOptions
from thresher.sources.remote.chunk_cache import ChunkCache


def test_cache_keeps_the_most_recent_chunks_within_its_budget() -> None:
    cache = ChunkCache(budget=100)
    for c in range(3):
        assert cache.claim([(0, c)]) == ({}, {}, [(0, c)])
        cache.fulfil((0, c), ([0, 30], bytes(30)))  # 30 + 2 * 8 bytes each
    assert len(cache) == 2 and cache.size == 92 and cache.evictions == 1
    hits, waits, mine = cache.claim([(0, 0), (0, 1), (0, 2)])
    assert sorted(hits) == [(0, 1), (0, 2)] and mine == [(0, 0)] and not waits
    cache.claim([(0, 1)])  # (0, 1) is now the most recent: (0, 2) goes first
    cache.fulfil((0, 0), ([0, 30], bytes(30)))
    assert cache.claim([(0, 1), (0, 0)])[0].keys() == {(0, 1), (0, 0)}
    assert cache.claim([(0, 2)])[2] == [(0, 2)]
    cache.fulfil((0, 2), ([0, 500], bytes(500)))  # larger than the budget: handed over, not kept
    assert cache.claim([(0, 2)])[2] == [(0, 2)] and cache.size <= 100


def test_concurrent_claims_share_one_fetch_and_its_error() -> None:
    cache = ChunkCache(budget=1 << 20)
    _, _, mine = cache.claim([(1, 5), (1, 6)])
    _, waits, again = cache.claim([(1, 5), (1, 6)])
    assert mine == [(1, 5), (1, 6)] and not again and set(waits) == {(1, 5), (1, 6)}
    cache.fulfil((1, 5), ([0, 1], b"x"))
    assert waits[(1, 5)].result(timeout=1) == ([0, 1], b"x")
    cache.abandon([(1, 6)], SourceError("the bucket is gone"))
    with pytest.raises(SourceError, match="gone"):
        waits[(1, 6)].result(timeout=1)
    assert cache.claim([(1, 6)])[2] == [(1, 6)]  # a later read tries again


def test_a_claim_takes_the_rest_of_a_block_in_the_same_step() -> None:
    """``extra`` chunks (the rest of a hinted block) are claimed with the wanted ones unless held or being
    fetched, never waited for nor counted as hits: a second thread starting on the block gets waits for its
    chunks, not a claim of its own on a part of the block."""
    cache = ChunkCache(budget=1 << 20)
    cache.fulfil((0, 9), ([0, 1], b"x"))
    hits, waits, mine = cache.claim([(0, 1)], extra=[(0, 0), (0, 2), (0, 9)])
    assert (hits, waits, sorted(mine)) == ({}, {}, [(0, 0), (0, 1), (0, 2)]) and cache.hits == 0
    hits, waits, mine = cache.claim([(0, 2)], extra=[(0, 0), (0, 1), (0, 3)])
    assert list(waits) == [(0, 2)] and mine == [(0, 3)] and not hits
    cache.fulfil((0, 2), ([0, 1], b"y"))
    assert waits[(0, 2)].result(timeout=1) == ([0, 1], b"y")
    assert cache.holds((0, 2)) and not cache.holds((0, 0))


@pytest.mark.parametrize("value", [-1, True, 2**63, 1.5])
def test_cache_budget_is_checked(value: Any) -> None:
    with pytest.raises(ConfigError, match="cache_bytes"):
        RemoteReadOptions(cache_bytes=value)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(group=st.sampled_from([1, 3, 8, 64]), budget=st.sampled_from([0, 2_000, 20_000, 1 << 30]),
       seed=st.integers(0, 2**32 - 1), threads=st.integers(1, 6), fill=st.booleans())
def test_concurrent_reads_with_any_budget_return_what_array_record_returns(
        tmp_path_factory: pytest.TempPathFactory, group: int, budget: int, seed: int, threads: int,
        fill: bool) -> None:
    path = str(tmp_path_factory.getbasetemp() / f"cache-g{group}.array_record")
    if not os.path.exists(path):
        rng = np.random.default_rng(group)
        write_native(path, [rng.bytes(int(rng.integers(0, 700))) for _ in range(200)],
                     f"group_size:{group},zstd:1")
    expected = read_native(path)
    options = RemoteReadOptions(cache_bytes=budget, fill_cache=fill, max_request_bytes=4096)
    src = th.sources.ArrayRecordSource(path, reader="ranges", read_options=options)
    reader = src._ranges
    assert reader is not None
    rng = np.random.default_rng(seed)
    batches = [rng.integers(0, len(expected), int(rng.integers(1, 40))).tolist() for _ in range(24)]
    with ThreadPoolExecutor(threads) as pool:
        got = list(pool.map(src.__getitems__, batches))
    assert got == [[expected[k] for k in keys] for keys in batches]
    cache = reader._process()["cache"]
    assert cache.size <= budget
    if budget >= 1 << 30:  # everything fits: no chunk is ever fetched twice
        chunks = {k // group for keys in batches for k in keys}
        if fill:  # and the 4 KiB windows around the chunks read are fetched with them
            assert len(chunks) <= cache.misses <= len(reader.index(0).chunk_offsets)
            assert reader.requests <= 1 + 2 * (os.path.getsize(path) // 4096 + 1)  # footer; windows
        else:
            assert cache.misses == len(chunks)
    src.close()


def _bucket(srv: RangeServer, name: str, group: int, n: int = 96) -> list[bytes]:
    folder = os.path.join(srv.root, srv.make_bucket(name))
    rng = np.random.default_rng(3)
    records = [rng.bytes(int(rng.integers(1, 400))) for _ in range(n)]
    th.sources.write_array_record(os.path.join(folder, "part-0.array_record"), records[: n // 2],
                                  group_size=group)
    th.sources.write_array_record(os.path.join(folder, "part-1.array_record"), records[n // 2:],
                                  group_size=group)
    return records


def _digest(record: bytes) -> np.ndarray:
    return np.frombuffer(record.ljust(8, b"\0")[:8], np.uint8)


def test_an_epoch_fetches_each_chunk_once_and_batches_do_not_change(tmp_path: Any) -> None:
    with RangeServer(str(tmp_path), latency_s=0.005) as srv:
        records = _bucket(srv, "epoch", group=8)
        url = "s3://epoch/part-*.array_record"
        src = th.sources.ArrayRecordSource(url, storage_options=srv.s3_options())
        assert src.suggested_reads_in_flight > 0  # the loader reads the next batches ahead
        sampler = th.IndexSampler(len(src), shuffle=True, seed=4, num_epochs=2)
        srv.stats(reset=True)
        got = list(th.DataLoader(src, sampler, [_digest, th.Batch(8)], worker_count=0))
        stats = srv.stats(reset=True)
        # Two epochs, 12 chunks of 8 records: each chunk fetched once (neighbours may share a request).
        assert stats["requests"] <= 12
        keys = [sampler[p].record_key for p in range(2 * len(records))]
        expected = np.stack([_digest(records[k]) for k in keys]).reshape(len(got), 8, 8)
        assert np.array_equal(np.stack(got), expected)
        src.close()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(1, 22), budget=st.sampled_from([0, 3_000, 1 << 20]), workers=st.sampled_from([0, 2]))
def test_resume_from_a_bucket_with_the_cache_gives_the_same_batches(
        tmp_path_factory: pytest.TempPathFactory, cut: int, budget: int, workers: int) -> None:
    root = tmp_path_factory.getbasetemp() / "resume-buckets"
    with RangeServer(str(root)) as srv:
        records = _bucket(srv, "resume", group=4)
        src = th.sources.ArrayRecordSource("s3://resume/part-*.array_record", storage_options=srv.s3_options(),
                                           read_options=RemoteReadOptions(cache_bytes=budget))
        sampler = th.IndexSampler(len(src), shuffle=True, seed=9, num_epochs=2)

        def loader() -> th.DataLoader:
            return th.DataLoader(src, sampler, [_digest, th.Batch(8)], worker_count=workers)

        it = iter(loader())
        first = [next(it) for _ in range(cut)]
        state = it.get_state()
        rest = list(it)
        it2 = iter(loader())
        it2.set_state(state)
        assert all(np.array_equal(a, b) for a, b in zip(list(it2), rest, strict=True))
        keys = [sampler[p].record_key for p in range(2 * len(records))]
        want = np.stack([_digest(records[k]) for k in keys]).reshape(-1, 8, 8)
        assert np.array_equal(np.stack(first + rest), want)
        src.close()


def test_cached_chunks_still_read_when_the_server_goes_away_others_fail_in_time(tmp_path: Any) -> None:
    srv = RangeServer(str(tmp_path), process=True)  # stopped: its open connections end too
    try:
        records = _bucket(srv, "gone", group=8)
        so = dict(srv.s3_options(), config_kwargs={"retries": {"max_attempts": 1}})
        src = th.sources.ArrayRecordSource("s3://gone/part-*.array_record", storage_options=so,
                                           read_options=RemoteReadOptions(timeout=3.0))
        assert src.__getitems__(list(range(16))) == records[:16]  # chunks 0 and 1 of part-0 cached
        srv.stop()
        assert src.__getitems__([15, 3, 8]) == [records[15], records[3], records[8]]
        errors: list[BaseException] = []

        def read() -> None:
            try:
                src.__getitems__([2, 40, 70])
            except SourceError as e:
                errors.append(e)

        start = time.monotonic()
        readers = [threading.Thread(target=read) for _ in range(3)]  # the same chunks at once
        for t in readers:
            t.start()
        for t in readers:
            t.join(60)
        assert time.monotonic() - start < 60 and not any(t.is_alive() for t in readers)
        assert len(errors) == 3 and all("part-" in str(e) and "record" in str(e) for e in errors)
        src.close()
    finally:
        srv.stop()


@settings(max_examples=50, deadline=None)
@given(order=st.lists(st.integers(0, 9), max_size=80), slots=st.integers(1, 12))
def test_cache_policy_simulation_belady_never_fetches_more_than_lru(order: list[int], slots: int) -> None:
    from benchmarks.cache_policy import belady_fetches, lru_fetches

    distinct = len(set(order))
    assert distinct <= belady_fetches(order, slots) <= lru_fetches(order, slots) <= len(order)
    if slots >= distinct:
        assert lru_fetches(order, slots) == distinct
    assert lru_fetches([0, 1, 2, 0, 1, 2], 2) == 6 and belady_fetches([0, 1, 2, 0, 1, 2], 2) == 4


def test_a_small_dataset_is_fetched_in_a_few_windows_then_read_from_memory(tmp_path: Any) -> None:
    with RangeServer(str(tmp_path)) as srv:
        records = _bucket(srv, "small", group=1)
        url, so = "s3://small/part-*.array_record", srv.s3_options()
        src = th.sources.ArrayRecordSource(url, storage_options=so,
                                           read_options=RemoteReadOptions(max_request_bytes=8192))
        srv.stats(reset=True)
        assert src.__getitems__([5, 60]) == [records[5], records[60]]
        # Each object (about 10 KiB of chunks) in its 8 KiB windows: a few requests, not 96.
        assert srv.stats()["requests"] <= 6
        assert src.__getitems__(list(range(len(records)))) == records
        assert srv.stats()["requests"] <= 6  # and nothing more afterwards
        exact = th.sources.ArrayRecordSource(url, storage_options=so,
                                             read_options=RemoteReadOptions(fill_cache=False))
        srv.stats(reset=True)
        assert exact.__getitems__([5, 60]) == [records[5], records[60]]
        assert srv.stats()["requests"] == 2  # only the chunks asked for
        src.close()
        exact.close()


def test_prepared_datasets_in_a_bucket_ask_the_loader_to_read_ahead(tmp_path: Any) -> None:
    with RangeServer(str(tmp_path / "buckets")) as srv:
        so = srv.s3_options()
        srv.make_bucket("prep")
        data = {"train": [{"x": i} for i in range(40)]}
        features = {"x": th.features.Scalar("int64")}
        th.prepare("s3://prep/toy", data, features=features, storage_options=so, progress=False)
        th.prepare(str(tmp_path / "toy"), data, features=features, progress=False)
        remote = th.data_source("s3://prep/toy", split="train", storage_options=so)
        local = th.data_source(str(tmp_path / "toy"), split="train")
        assert th.sources.suggested_reads_in_flight(remote) > 0
        assert th.sources.suggested_reads_in_flight(local) == 0
        sampler = th.IndexSampler(40, shuffle=True, seed=1)
        got = [b["x"] for b in th.DataLoader(remote, sampler, [th.Batch(8)], worker_count=0)]
        want = [b["x"] for b in th.DataLoader(local, sampler, [th.Batch(8)], worker_count=0)]
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
        remote.close()


def test_filling_stops_once_decoded_chunks_do_not_fit(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "zeros.array_record")
    write_native(path, [bytes(2000)] * 400, "group_size:8,zstd:1")  # tiny on disk, 800 KB decoded
    size = os.path.getsize(path)
    src = th.sources.ArrayRecordSource(path, reader="ranges",
                                       read_options=RemoteReadOptions(cache_bytes=max(4 * size, 50_000)))
    reader = src._ranges
    assert reader is not None
    cache = reader._process()["cache"]
    key = 0
    while not cache.evictions:  # fills while it fits, then evicts
        assert src[key] == bytes(2000)
        key += 8
    index = reader.index(0)
    for k in (399, 200, 3):
        if (0, k // 8) in cache._entries:
            continue
        before = reader.bytes_read
        assert src[k] == bytes(2000)
        c = k // 8
        assert reader.bytes_read - before == int(index.chunk_ends()[c] - index.chunk_offsets[c])  # its chunk only
    src.close()


def test_a_list_of_bucket_urls_is_found_with_one_listing_and_read_in_the_order_given(tmp_path: Any) -> None:
    from thresher.sources.formats.array_record.source import _objects

    with RangeServer(str(tmp_path)) as srv:
        records = _bucket(srv, "listed", group=8)
        urls = ["s3://listed/part-1.array_record", "s3://listed/part-0.array_record"]
        srv.stats(reset=True)
        found = _objects(urls, srv.s3_options())
        assert [o.url for o in found] == urls and srv.stats()["requests"] == 1  # one listing, not a lookup each
        src = th.sources.ArrayRecordSource(urls, storage_options=srv.s3_options())
        assert len(src) == len(records)
        assert [src[i] for i in (0, 47, 48, 95)] == [records[48], records[95], records[0], records[47]]
        src.close()
