"""thresher.beam holds one shard at most, whatever the dataset's size (DirectRunner, 2 worker processes).

The shard writer (and, with the file exchange, the encoder) reports what each of its calls held as Beam metrics; the test reads them
back from the runner at two dataset sizes with the same shard size. No RSS or timing is
asserted here (the figures are in benchmarks/beam_prepare.py).
"""

from __future__ import annotations

import os
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

import thresher as th
import thresher.beam  # noqa: F401 - makes th.beam available
from tests.helpers import dir_files
from thresher import features as F
from thresher.sources.formats.prepared.layout import is_temp_dir

MP = {"direct_num_workers": 2, "direct_running_mode": "multi_processing"}
FEATS = {"x": F.Scalar("int64"), "pad": F.Tensor((None,), "uint8")}
PER_SHARD = 40


def _example(i: int) -> tuple[int, dict]:
    return i, {"x": i, "pad": np.full(i % 5, i % 256, np.uint8)}


def _run(path: str, n: int, shuffle: bool, **kw: object) -> Any:
    p = beam.Pipeline("DirectRunner", options=PipelineOptions(flags=[], **MP))
    _ = (p | beam.Create(range(n)) | beam.Map(_example)
         | th.beam.WriteDataset(path, features=FEATS, num_shards=n // PER_SHARD, shuffle=shuffle, name="m", **kw))
    result = p.run()
    result.wait_until_finish()
    return result


def _dist(result: Any, name: str) -> Any:
    found = result.metrics().query(MetricsFilter().with_namespace(th.beam.METRICS).with_name(name))
    (d,) = found["distributions"]
    return d.committed


def _held(path: str, n: int, shuffle: bool) -> tuple[int, int, int]:
    """(most records one WriteShard call held, largest shard, WriteShard calls)."""
    result = _run(path, n, shuffle, exchange="runner")
    held, shard = _dist(result, "held_records"), _dist(result, "shard_records")
    return held.max, shard.max, held.count


def test_a_shard_writer_holds_one_shard_at_every_dataset_size(tmp_path) -> None:
    small, big = 4 * PER_SHARD, 16 * PER_SHARD
    held_small, shard_small, calls_small = _held(str(tmp_path / "small"), small, shuffle=True)
    held_big, shard_big, calls_big = _held(str(tmp_path / "big"), big, shuffle=True)
    assert (calls_small, calls_big) == (4, 16)  # one call per shard, each shard written once
    assert shard_small == shard_big == PER_SHARD
    # a shard plus the parts of its two edge buckets (65,536 buckets: a record or two each)
    assert PER_SHARD <= held_small <= PER_SHARD + 4
    assert PER_SHARD <= held_big <= PER_SHARD + 4
    th.prepare(str(tmp_path / "one"), {"train": [_example(i) for i in range(big)]}, features=FEATS,
               num_shards=big // PER_SHARD, keyed=True, progress=False, name="m")
    assert dir_files(str(tmp_path / "big")) == dir_files(str(tmp_path / "one"))


def test_keys_in_their_own_order_are_cut_at_quantiles_not_into_one_bucket(tmp_path) -> None:
    """Keys 0..n-1 share all leading bytes; with shuffle=False a bucket must still be small."""
    n = 16 * PER_SHARD
    held, shard, calls = _held(str(tmp_path / "ordered"), n, shuffle=False)
    assert (shard, calls) == (PER_SHARD, 16)
    assert held <= PER_SHARD + 8
    assert [int(e["x"]) for e in th.data_source(str(tmp_path / "ordered"), split="train")] == list(range(n))


def test_prepare_on_beam_streams_a_generator_and_cleans_up(tmp_path) -> None:
    n = 3 * PER_SHARD
    info = th.prepare(str(tmp_path / "beam"), {"train": (_example(i) for i in range(n))}, features=FEATS,
                      num_shards=3, beam_runner="DirectRunner", beam_options=MP, name="m")
    assert info.splits["train"].shard_lengths == (PER_SHARD,) * 3
    th.prepare(str(tmp_path / "one"), {"train": (_example(i) for i in range(n))}, features=FEATS,
               num_shards=3, keyed=True, progress=False, name="m")
    assert dir_files(str(tmp_path / "beam")) == dir_files(str(tmp_path / "one"))
    assert sorted(os.listdir(tmp_path)) == ["beam", "one"]  # the spool files are gone
    assert not any(is_temp_dir(d) for d in os.listdir(tmp_path))


def test_an_encoder_holds_one_run_at_every_dataset_size(tmp_path) -> None:
    """With the file exchange an encoder buffers at most ``run_bytes`` (plus one record) before
    it writes a sorted run, and a shard writer still holds one shard: at 4 and 16 shards."""
    run_bytes = 2000  # records here are 1-5 bytes (+ 17 of sort key + 128 counted per record)
    for n in (4 * PER_SHARD, 16 * PER_SHARD):
        result = _run(str(tmp_path / f"n{n}"), n, True, exchange="files", run_bytes=run_bytes)
        runs, held = _dist(result, "run_records"), _dist(result, "held_records")
        assert runs.sum == n and runs.max <= run_bytes // (17 + 128) + 1
        assert runs.count >= n // (run_bytes // (17 + 128) + 1)
        assert PER_SHARD <= held.max <= PER_SHARD + 4 and held.count == n // PER_SHARD
    th.prepare(str(tmp_path / "one"), {"train": [_example(i) for i in range(n)]}, features=FEATS,
               num_shards=n // PER_SHARD, keyed=True, progress=False, name="m")
    assert dir_files(str(tmp_path / f"n{n}")) == dir_files(str(tmp_path / "one"))
