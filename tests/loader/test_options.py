"""One options object: DataLoader and Dataset.prefetch build a LoaderOptions that reaches the Engine whole."""

from __future__ import annotations

import importlib
import pathlib

import pytest

import thresher as th
import thresher.loader.producers
from thresher.dataset.nodes import Prefetch
from thresher.errors import ConfigError, ConfigTypeError
from thresher.loader.options import LoaderOptions
from thresher.loader.producers.base import ChunkLoop, SwitchingLoop
from thresher.loader.producers.coalescing import CoalescingProducer
from thresher.loader.producers.in_process import InProcessProducer
from thresher.loader.producers.measuring import MeasuringProducer
from thresher.loader.producers.processes import WorkerPoolProducer
from thresher.loader.producers.threads import ThreadPoolProducer
from thresher.loader.producers.warm_start import WarmStartProducer


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
    producers = (InProcessProducer, CoalescingProducer, ThreadPoolProducer, WorkerPoolProducer, MeasuringProducer,
                 WarmStartProducer)
    for producer in producers:
        assert issubclass(producer, ChunkLoop)
        assert "next_chunk" not in vars(producer), producer  # the loop is ChunkLoop's, not a copy
        assert producer.__module__.startswith("thresher.loader.producers."), producer  # they sit together
    assert issubclass(MeasuringProducer, SwitchingLoop) and issubclass(WarmStartProducer, SwitchingLoop)


def test_one_chunk_loop_in_the_producers_folder() -> None:
    """No class of thresher.loader.producers but ChunkLoop runs a loop of its own (a ``next_chunk``
    or a chunk counter)."""
    folder = pathlib.Path(thresher.loader.producers.__file__).parent
    loops = []
    for path in sorted(folder.glob("*.py")):
        module = importlib.import_module(f"thresher.loader.producers.{path.stem}")
        for name, cls in vars(module).items():
            protocol = getattr(cls, "_is_protocol", False)  # Producer, Deferred: interfaces, no loop
            if isinstance(cls, type) and cls.__module__ == module.__name__ and "next_chunk" in vars(cls) \
                    and not protocol:
                loops.append(name)
        if path.stem != "base":  # no counter of chunks handed out but ChunkLoop's
            source = path.read_text()
            assert "self._index +=" not in source and "self._done" not in source, path
    assert loops == ["ChunkLoop"]
