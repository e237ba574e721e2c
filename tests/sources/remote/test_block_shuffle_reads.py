"""A BlockShuffle over a bucket: each chunk fetched once per epoch per process, whole blocks per request,
and shards that fetch disjoint chunks (counted by the local object server)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import thresher as th
from tests.sources.remote.range_server import RangeServer
from thresher.sources.remote import RemoteReadOptions

N, GROUP, BLOCK, WINDOW = 2048, 4, 64, 4  # 512 chunks, blocks of 16 chunks, windows of 256 records


@pytest.fixture(scope="module")
def bucket(tmp_path_factory: Any) -> Any:
    root = str(tmp_path_factory.mktemp("buckets"))
    rng = np.random.default_rng(0)
    records = [rng.bytes(int(rng.integers(1000, 3000))) for _ in range(N)]
    os.makedirs(os.path.join(root, "bs"))
    th.sources.write_array_record(os.path.join(root, "bs", "d.array_record"), records, group_size=GROUP)
    with RangeServer(root) as server:
        yield server, records


def _source(server: RangeServer, records: list[bytes]) -> th.sources.ArrayRecordSource:
    window = sum(len(r) for r in records) * BLOCK * WINDOW // N
    options = RemoteReadOptions(cache_bytes=3 * window, fill_cache=False)  # the sizing rule: ~2-3 windows
    return th.sources.ArrayRecordSource("s3://bs/d.array_record", storage_options=server.s3_options(),
                                        read_options=options)


def _run(server: RangeServer, records: list[bytes], shuffle: Any, shard: th.ShardOptions | None = None,
         workers: int = 0, epochs: int = 1, mode: str = "thread") -> tuple[list[bytes], dict[str, int], Any]:
    src = _source(server, records)
    len(src)
    server.stats(reset=True)
    sampler = th.IndexSampler(N, shuffle=shuffle, seed=4, num_epochs=epochs, shard_options=shard)
    loader = th.DataLoader(src, sampler, [th.Batch(32, drop_remainder=False)], worker_count=workers,
                           worker_mode=mode, read_options=th.ReadOptions(num_threads=2))
    got = [bytes(r) for b in loader for r in b]  # a batch of bytes is a NumPy "S" array: trailing NULs go
    assert src._ranges is not None
    return got, server.stats(), src._ranges._process()["cache"]


def test_each_chunk_is_fetched_once_per_epoch_in_whole_blocks(bucket: Any) -> None:
    server, records = bucket
    shuffle = th.BlockShuffle.of_source(_source(server, records), block_size=BLOCK, window_blocks=WINDOW)
    assert shuffle.boundaries is not None and shuffle.boundaries.size == N // BLOCK
    sampler = th.IndexSampler(N, shuffle=shuffle, seed=4, num_epochs=2)
    size = os.path.getsize(os.path.join(server.root, "bs", "d.array_record"))
    for workers in (0, 2):
        got, stats, cache = _run(server, records, shuffle, workers=workers)
        assert got == [records[k].rstrip(b"\0") for k in sampler.keys(np.arange(N)).tolist()]
        assert cache.misses == N // GROUP  # every chunk fetched exactly once in the epoch
        assert stats["body_bytes"] <= size
        assert stats["requests"] <= N // BLOCK + 2, stats  # one request per block (+ footer)
    got, stats, cache = _run(server, records, shuffle, epochs=2)
    assert got == [records[k].rstrip(b"\0") for k in sampler.keys(np.arange(2 * N)).tolist()]
    assert N // GROUP < cache.misses <= 2 * N // GROUP and stats["body_bytes"] <= 2 * size
    _, full, _ = _run(server, records, True)
    assert full["requests"] > 4 * stats["requests"]  # a full shuffle with the same cache: a request per chunk


def test_worker_processes_fetch_whole_blocks_from_their_first_window(bucket: Any) -> None:
    """Each worker process has its own cache (threads share one): it fetches the blocks of the windows it
    reads, whole, from the first window on (the hint reads the footer a fresh process lacks)."""
    server, records = bucket
    shuffle = th.BlockShuffle.of_source(_source(server, records), block_size=BLOCK, window_blocks=WINDOW)
    got, stats, _ = _run(server, records, shuffle, workers=2, mode="process")
    sampler = th.IndexSampler(N, shuffle=shuffle, seed=4)
    assert got == [records[k].rstrip(b"\0") for k in sampler.keys(np.arange(N)).tolist()]
    size = os.path.getsize(os.path.join(server.root, "bs", "d.array_record"))
    assert stats["body_bytes"] <= 2 * size + 2 * (1 << 17)  # each block at most once per worker (+ footers)
    assert stats["requests"] <= 2 * (N // BLOCK + 2), stats  # a request per block and worker, not per record


def test_a_hint_to_a_fresh_process_reads_the_footer_first(bucket: Any) -> None:
    """A source sent to a new process has no footer index yet: the first window's hint is kept (the footer
    is read for it), so the first read brings its whole block, not one chunk."""
    import pickle

    server, records = bucket
    fresh = pickle.loads(pickle.dumps(_source(server, records)))  # as a worker process receives it
    assert fresh._ranges is not None and not fresh._ranges._process()["indexes"]
    fresh.upcoming_blocks(np.array([BLOCK]), np.array([2 * BLOCK]))  # keys 64..127: chunks 16..31
    assert fresh[70] == records[70]
    assert len(fresh._ranges._process()["cache"]) == BLOCK // GROUP


def test_shards_fetch_disjoint_chunks(bucket: Any) -> None:
    server, records = bucket
    shuffle = th.BlockShuffle(block_size=BLOCK, window_blocks=WINDOW)
    seen, total = [], 0
    for i in range(2):
        got, stats, cache = _run(server, records, shuffle, th.ShardOptions(i, 2))
        seen += got
        total += stats["body_bytes"]
        assert cache.misses == N // GROUP // 2  # half of the epoch: each chunk of its windows once
    assert sorted(seen) == sorted(r.rstrip(b"\0") for r in records)
    size = os.path.getsize(os.path.join(server.root, "bs", "d.array_record"))
    assert total <= size  # both shards together: no chunk fetched by both


def test_a_hinted_block_is_fetched_whole_and_each_chunk_checked_when_read(bucket: Any) -> None:
    """One request brings a block; its chunks are decoded (and their hashes checked) by the read that
    needs them: bytes damaged on their way in a chunk not read yet cost nothing until it is read, and
    are then fetched again, never returned."""
    from thresher.sources.remote.chunk_cache import Raw

    server, records = bucket
    src = _source(server, records)
    len(src)
    assert src._ranges is not None
    data = open(os.path.join(server.root, "bs", "d.array_record"), "rb").read()
    server.flip_once("bs", "d.array_record", data.find(records[41][100:200]) + 10)  # inside chunk 10
    server.stats(reset=True)
    src.upcoming_blocks(np.array([0]), np.array([BLOCK]))  # keys 0..63: chunks 0..15
    cache = src._ranges._process()["cache"]

    def raw() -> int:
        return sum(isinstance(cache._entries[(0, c)][0], Raw) for c in range(BLOCK // GROUP))

    assert src[5] == records[5]
    assert server.stats()["requests"] == 1 and raw() == BLOCK // GROUP - 1  # chunk 1 decoded, 15 held as fetched
    assert src._ranges.refetches == 0  # the damaged chunk was not read: nothing checked it yet
    assert src[41] == records[41] and src._ranges.refetches == 1  # checked when read: fetched again
    assert src[40] == records[40] and server.stats()["requests"] == 2 and raw() == BLOCK // GROUP - 2
