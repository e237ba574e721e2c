"""Prepared and TFDS splits report their shards' natural blocks and pass block hints on: a
BlockShuffle over ``th.data_source(...)`` reads whole chunks, and from a bucket fetches each
chunk once per epoch (counted by the local object server)."""

from __future__ import annotations

import glob
import os
import shutil
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.sources.remote.range_server import RangeServer
from thresher.sources.remote import RemoteReadOptions

N, SHARDS, GROUP = 256, 2, 4
TFDS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "tfds", "data")


def _regroup(directory: str, group_size: int) -> None:
    """Rewrites every shard with ``group_size`` records per chunk (same records, same lengths)."""
    for path in glob.glob(os.path.join(directory, "*.array_record*")):
        records = th.sources.ArrayRecordSource(path).__getitems__(list(range(len(th.sources.ArrayRecordSource(path)))))
        os.remove(path)
        th.sources.write_array_record(path, records, group_size=group_size)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: Any) -> str:
    """A prepared dataset of N records {"x": i} in SHARDS shards of GROUP records per chunk, in order."""
    root = str(tmp_path_factory.mktemp("buckets"))
    path = os.path.join(root, "ds", "toy")
    th.prepare(path, {"train": [{"x": i, "pad": np.zeros(200, np.uint8)} for i in range(N)]}, num_shards=SHARDS,
               features={"x": th.features.Scalar("int64"), "pad": th.features.Tensor((200,), "uint8")},
               shuffle=False, progress=False)
    _regroup(path, GROUP)
    return path


SPLITS = ["train", "train[10:]", "train[200:]+train[:200]", "train[:50%]+train[60%:]", "train[1:255]"]


def _chunk_of(src: Any, keys: list[int]) -> list[tuple[str, int]]:
    return [(path, i // GROUP) for path, i in src.record_locations(keys)]


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("min_records", [1, 4, 7, 64, 1000])
def test_prepared_blocks_are_whole_chunks(prepared: str, split: str, min_records: int) -> None:
    src = th.data_source(prepared, split=split)
    starts = src.block_boundaries(min_records)
    assert starts[0] == 0 and bool((np.diff(starts) > 0).all()) and int(starts[-1]) < len(src)
    stops = [*starts[1:].tolist(), len(src)]
    # a chunk is split between two blocks only where the split itself cuts it (a piece ends mid-chunk)
    piece_cuts = set(src._starts.tolist())
    for a in starts.tolist()[1:]:
        if a not in piece_cuts:
            assert _chunk_of(src, [a - 1]) != _chunk_of(src, [a]), (split, a)
    sizes = np.diff([*starts.tolist(), len(src)])
    assert (sizes[:-1] >= min(min_records, len(src))).all()  # joined to at least min_records but the last
    shuffle = th.BlockShuffle.of_source(src, block_size=min_records, window_blocks=2)
    assert shuffle.boundaries is not None and shuffle.boundaries.tolist() == starts.tolist()
    sampler = th.IndexSampler(len(src), shuffle=shuffle, seed=3)
    keys = sampler.keys(np.arange(len(src))).tolist()
    assert sorted(keys) == list(range(len(src)))
    assert len(stops) == len(starts)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, N - 1), st.integers(1, N), st.integers(1, 300))
def test_hints_name_the_shard_ranges_of_the_split_blocks(prepared: str, lo: int, take: int, min_records: int) -> None:
    """upcoming_blocks passes each split block on as the shards' key ranges holding exactly its records."""
    hi = min(N, lo + take)
    src = th.data_source(prepared, split=f"train[{hi}:]+train[:{hi}]" if lo % 2 else f"train[{lo}:{hi}]")
    told: list[tuple[int, int]] = []
    starts = src.block_boundaries(min_records).tolist()
    stops = [*starts[1:], len(src)]
    wrapped = src._reader
    src._reader = _Tap(wrapped, told)
    src.upcoming_blocks(np.asarray(starts), np.asarray(stops))
    src._reader = wrapped
    hinted = sorted(k for a, e in told for k in range(a, e))
    assert hinted == sorted(src._global(np.arange(len(src))).tolist())


class _Tap:
    """An ArrayRecordSource that records the hints it is given (and passes them on)."""

    def __init__(self, inner: Any, told: list[tuple[int, int]]) -> None:
        self._inner, self._told = inner, told

    def __len__(self) -> int:
        return len(self._inner)

    def __getitem__(self, key: int) -> Any:
        return self._inner[key]

    def upcoming_blocks(self, starts: Any, stops: Any) -> None:
        self._told.extend(zip(np.asarray(starts).tolist(), np.asarray(stops).tolist(), strict=True))
        self._inner.upcoming_blocks(starts, stops)


def test_tfds_splits_report_shard_blocks() -> None:
    src = th.data_source(os.path.join(TFDS, "images"), split="train")  # array_record, group_size 1, 3 x 16
    assert src.block_boundaries(10).tolist() == [0, 10, 26, 42]  # chunks of 1: joined to >= 10
    tf = th.data_source(os.path.join(TFDS, "images_tfrecord"), split="train[8:]+train[:8]")  # tfrecord: files
    assert tf.block_boundaries(1).tolist() == [0, 8, 24, 40]
    for s in (src, tf):
        shuffle = th.BlockShuffle.of_source(s, block_size=8, window_blocks=2)
        sampler = th.IndexSampler(len(s), shuffle=shuffle, seed=1)
        assert sorted(sampler.keys(np.arange(len(s))).tolist()) == list(range(len(s)))


def _counted(server: RangeServer, url: str, split: str, block: int, window: int, workers: int,
             record_bytes: int, decode: Any) -> tuple[list[Any], list[Any], int, dict[str, int], int]:
    options = RemoteReadOptions(cache_bytes=3 * block * window * record_bytes, fill_cache=False)
    src = th.data_source(url, split=split, storage_options=server.s3_options(), read_options=options)
    shuffle = th.BlockShuffle.of_source(src, block_size=block, window_blocks=window)
    sampler = th.IndexSampler(len(src), shuffle=shuffle, seed=5, num_epochs=1)
    server.stats(reset=True)
    loader = th.DataLoader(src, sampler, [decode], worker_count=workers, worker_mode="thread",
                           read_options=th.ReadOptions(num_threads=2))
    got = list(loader)
    stats = server.stats()
    fetched = src._reader._ranges.chunks_fetched
    expected = [decode(src[k]) for k in sampler.keys(np.arange(len(src))).tolist()]
    return got, expected, fetched, stats, len(shuffle.boundaries)


@pytest.mark.parametrize("workers", [0, 2])
def test_prepared_from_a_bucket_fetches_each_chunk_once_per_epoch(prepared: str, workers: int) -> None:
    root = os.path.dirname(os.path.dirname(prepared))
    with RangeServer(root) as server:
        for split in ("train", "train[64:]+train[:64]"):
            got, expected, fetched, stats, blocks = _counted(server, "s3://ds/toy", split, 16, 4, workers, 300,
                                                           lambda r: int(r["x"]))
            assert got == expected
            assert fetched == N // GROUP  # every chunk once
            assert stats["requests"] <= blocks + 2, stats  # one request per block (+ a piece's split block)


@pytest.mark.parametrize("workers", [0, 2])
def test_tfds_from_a_bucket_fetches_each_record_once_per_epoch(tmp_path: Any, workers: int) -> None:
    shutil.copytree(os.path.join(TFDS, "images", "2.0.1"), str(tmp_path / "tfds" / "images" / "2.0.1"))
    with RangeServer(str(tmp_path)) as server:
        got, expected, fetched, stats, blocks = _counted(server, "s3://tfds/images/2.0.1", "train", 4, 2, workers,
                                                       1000, lambda r: int(r["label"]))
        assert got == expected
        assert fetched == 48  # group_size 1: each record is a chunk, fetched once
        assert stats["requests"] <= blocks, stats  # one request per block


def test_a_tfds_split_in_a_bucket_passes_the_next_window_on_to_its_reader(tmp_path: Any) -> None:
    """A split's keys map to its shards' keys; a window named ahead is fetched in the background."""
    import time

    shutil.copytree(os.path.join(TFDS, "images", "2.0.1"), str(tmp_path / "tfds" / "images" / "2.0.1"))
    with RangeServer(str(tmp_path)) as server:
        src = th.data_source("s3://tfds/images/2.0.1", split="train[4:]", storage_options=server.s3_options(),
                             read_options=RemoteReadOptions(cache_bytes=64 << 20, fill_cache=False))
        src.upcoming_blocks(np.array([0]), np.array([8]))
        expected = [src[k] for k in range(8)]  # a first block read: the reader learns what a block costs
        ranges = src._reader._ranges
        before = ranges.chunks_fetched
        src.prefetch_blocks(np.array([10]), np.array([20]))  # split keys 10..19: keys 14..23 of two shards
        deadline = time.monotonic() + 30
        while ranges.chunks_fetched < before + 10:
            assert time.monotonic() < deadline, "the window was not fetched ahead"
            time.sleep(0.01)
        requests = ranges.requests
        got = [int(src[k]["label"]) for k in range(10, 20)]
        assert ranges.requests == requests  # held: no request of their own
        local = th.data_source(os.path.join(str(tmp_path), "tfds", "images", "2.0.1"), split="train[4:]")
        assert got == [int(local[k]["label"]) for k in range(10, 20)]
        assert [int(r["label"]) for r in expected] == [int(local[k]["label"]) for k in range(8)]
