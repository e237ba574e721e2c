"""One options object: DataLoader and Dataset.prefetch build a LoaderOptions that reaches the Engine whole."""

from __future__ import annotations

import pytest

import thresher as th
from thresher.dataset.nodes import Prefetch
from thresher.errors import ConfigError, ConfigTypeError
from thresher.loader.coalesce import CoalescingProducer
from thresher.loader.options import LoaderOptions
from thresher.loader.pool.threads import ThreadPoolProducer
from thresher.loader.pool.workers import WorkerPoolProducer
from thresher.loader.producer import ChunkLoop, InProcessProducer


def test_the_loaders_options_reach_the_engine_whole() -> None:
    reads = th.ReadOptions(num_threads=2)
    loader = th.DataLoader(th.sources.RangeDataSource(0, 10), th.IndexSampler(10), [th.Batch(4)],
                           worker_count=2, worker_mode="thread", worker_buffer_size=3, worker_timeout_s=9,
                           read_options=reads, warm_start=True)
    options = loader.engine.options
    assert options is loader.options
    assert options == LoaderOptions(2, 256, 3, "thread", 9.0, reads, True)
    assert (loader.worker_count, loader.chunk_size, loader.read_options, loader.warm_start) == (2, 256, reads, True)


def test_a_loader_from_options_is_the_loader_from_keywords() -> None:
    source, ops = th.sources.RangeDataSource(0, 13), [lambda x: x * 3, th.Batch(4)]
    a = th.DataLoader(source, th.IndexSampler(13, shuffle=True, seed=2), ops, chunk_size=5)
    b = th.DataLoader.of(source, th.IndexSampler(13, shuffle=True, seed=2), ops, LoaderOptions(chunk_size=5))
    assert a.options == b.options
    assert [x.tolist() for x in a] == [x.tolist() for x in b]


def test_prefetch_hands_its_options_to_the_chains_loader() -> None:
    ds = th.Dataset.range(8).map(abs).prefetch(worker_count=2, buffer=3, worker_mode="thread", worker_timeout_s=7)
    node = ds.nodes[-1]
    assert isinstance(node, Prefetch)
    assert node.options == LoaderOptions(2, None, 3, "thread", 7.0)
    assert ds.to_data_loader().options == LoaderOptions(2, 256, 3, "thread", 7.0)
    assert list(ds) == list(range(8))


def test_bad_options_are_named_as_before() -> None:
    with pytest.raises(ConfigTypeError, match="prefetch buffer must be an int >= 1"):
        th.Dataset.range(3).prefetch(buffer="2")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="prefetch buffer must be an int >= 1, got 0"):
        th.Dataset.range(3).prefetch(buffer=0)
    with pytest.raises(ConfigError, match="worker_timeout_s must be None or a number of seconds > 0"):
        LoaderOptions(worker_timeout_s=float("inf"))


def test_the_producers_share_one_chunk_loop() -> None:
    for producer in (InProcessProducer, CoalescingProducer, ThreadPoolProducer, WorkerPoolProducer):
        assert issubclass(producer, ChunkLoop)
        assert "next_chunk" not in vars(producer), producer  # the loop is ChunkLoop's, not a copy
