"""thresher.beam on the DirectRunner (2 worker processes): the same bytes as one-process prepare.

Every run here is a real Beam pipeline in multi-processing mode with two SDK worker
processes; example counts stay small because each run costs a few seconds.
"""

from __future__ import annotations

import os

import apache_beam as beam
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
import thresher.beam  # noqa: F401 - makes th.beam available
from tests.helpers import dir_files
from thresher import features as F
from thresher.sources.formats.prepared.layout import is_temp_dir
from thresher.sources.write.spill import RUN_BYTES

MP = {"direct_num_workers": 2, "direct_running_mode": "multi_processing"}

_FEATURES = {
    "scalar": (F.Scalar("int64"), lambda i, r: int(r.integers(-99, 99))),
    "float": (F.Scalar("float32"), lambda i, r: np.float32(r.random())),
    "tensor": (F.Tensor((None, 2), "int16"), lambda i, r: r.integers(0, 9, (i % 3, 2)).astype(np.int16)),
    "text": (F.Text(), lambda i, r: "x" * (i % 4) + str(i)),
    "label": (F.ClassLabel(num_classes=3), lambda i, r: i % 3),
    "image": (F.Image((2, 3, 1), encoding="none"), lambda i, r: r.integers(0, 255, (2, 3, 1), dtype=np.uint8)),
}


def _examples(names: list[str], n: int, seed: int, str_keys: bool) -> list[tuple[object, dict]]:
    rng = np.random.default_rng(seed)
    return [(f"id-{i * 7919 % 1000}" if str_keys else i * 31 - 200,
             {k: _FEATURES[k][1](i, rng) for k in names}) for i in range(n)]


def _write(path: str, splits: dict, **kw: object) -> None:
    """WriteDataset in a user pipeline on the DirectRunner with 2 worker processes."""
    opts = beam.options.pipeline_options.PipelineOptions(flags=[], **MP)
    with beam.Pipeline("DirectRunner", options=opts) as p:
        pcolls = {s: p | f"make {s}" >> beam.Create(v) for s, v in splits.items()}
        _ = pcolls | th.beam.WriteDataset(path, **kw)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.sampled_from(sorted(_FEATURES)), min_size=1, max_size=3, unique=True),
       n_train=st.integers(0, 40), n_test=st.integers(1, 9), shards=st.sampled_from([None, 1, 3]),
       shuffle=st.booleans(), str_keys=st.booleans(), seed=st.integers(0, 2**16),
       exchange=st.sampled_from([("runner", RUN_BYTES), ("files", 64), ("files", RUN_BYTES)]), data=st.data())
def test_beam_writes_the_bytes_of_one_process_prepare(tmp_path_factory, names, n_train, n_test, shards,
                                                      shuffle, str_keys, seed, exchange, data) -> None:
    """prepare(beam_runner=) (spill files) and a user pipeline with either exchange (runs of 64
    bytes: many runs per bundle) write the same files as one process."""
    tmp = str(tmp_path_factory.mktemp("beam"))
    feats = {k: _FEATURES[k][0] for k in names}
    train = _examples(names, n_train, seed, str_keys)
    test = _examples(names, n_test, seed + 1, str_keys)
    common = dict(features=feats, num_shards=shards, shuffle=shuffle, name="ds")
    th.prepare(os.path.join(tmp, "one"), {"train": train, "test": test}, keyed=True, progress=False, **common)
    arrival = data.draw(st.permutations(train))  # Beam sees another order: the bytes must not change
    th.prepare(os.path.join(tmp, "beam"), {"train": arrival, "test": test}, beam_runner="DirectRunner",
               beam_options=MP, **common)
    _write(os.path.join(tmp, "mine"), {"train": arrival[::-1], "test": test}, exchange=exchange[0],
           run_bytes=exchange[1], **common)
    assert dir_files(os.path.join(tmp, "beam")) == dir_files(os.path.join(tmp, "one"))
    assert dir_files(os.path.join(tmp, "mine")) == dir_files(os.path.join(tmp, "one"))
    assert sorted(os.listdir(tmp)) == ["beam", "mine", "one"]  # no temporary or spill directory is left


def test_a_user_pipeline_writes_a_dataset_that_reads_back_with_split_strings(tmp_path) -> None:
    path = str(tmp_path / "mnistish")
    feats = {"image": F.Image((4, 4, 1), encoding="none"), "label": F.ClassLabel(num_classes=10)}

    def make(i: int) -> tuple[str, dict]:
        return f"img-{i:04d}", {"image": np.full((4, 4, 1), i % 256, np.uint8), "label": i % 10}

    opts = beam.options.pipeline_options.PipelineOptions(flags=[], **MP)
    with beam.Pipeline("DirectRunner", options=opts) as p:
        splits = {"train": p | "train" >> beam.Create(range(60)) | "mk_train" >> beam.Map(make),
                  "test": p | "test" >> beam.Create(range(60, 75)) | "mk_test" >> beam.Map(make)}
        done = splits | th.beam.WriteDataset(path, features=feats, num_shards={"train": 4})
        assert isinstance(done, beam.PCollection)
    info = th.builder(path).info
    assert info.splits["train"].shard_lengths == (15, 15, 15, 15)
    train = th.data_source(path, split="train")
    labels = sorted((int(e["image"][0, 0, 0]), int(e["label"])) for e in train)
    assert labels == [(i, i % 10) for i in range(60)]
    part = th.data_source(path, split="train[:25%]+test[-5:]")
    assert len(part) == 20
    assert [int(e["image"][0, 0, 0]) for e in part][:15] == [int(train[i]["image"][0, 0, 0]) for i in range(15)]
    # the same examples through one-process prepare give the same files
    th.prepare(str(tmp_path / "one"), {"train": [make(i) for i in range(60)], "test": [make(i) for i in range(60, 75)]},
               features=feats, num_shards={"train": 4}, keyed=True, progress=False, name="mnistish")
    assert dir_files(path) == dir_files(str(tmp_path / "one"))


def _no_dataset_under(root: str) -> None:
    for dirpath, _, files in os.walk(root):
        assert "dataset_info.json" not in files, f"{dirpath} looks complete"


def test_a_worker_failure_before_the_shuffle_leaves_no_directory(tmp_path) -> None:
    feats = {"x": F.Scalar("int64")}
    bad = [(i, {"x": i}) for i in range(30)] + [(99, {"x": "not a number"})]
    with pytest.raises(th.errors.FeatureError, match="key 99 of split 'train', feature 'x'"):
        th.prepare(str(tmp_path / "ds"), {"train": bad}, features=feats, beam_runner="DirectRunner",
                   beam_options=MP)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("exchange", ["files", "runner"])
def test_a_worker_failure_mid_pipeline_leaves_nothing_complete_looking(tmp_path, exchange) -> None:
    """Duplicate keys are found after the exchange, by a worker placing one bucket."""
    feats = {"x": F.Scalar("int64")}
    dup = [(i, {"x": i}) for i in range(40)] + [(7, {"x": 1000})]
    with pytest.raises(Exception, match="same key|the key 7"):
        _write(str(tmp_path / "ds"), {"train": dup}, features=feats, num_shards=2, exchange=exchange, run_bytes=200)
    assert not os.path.exists(tmp_path / "ds")
    _no_dataset_under(str(tmp_path))
    (left,) = os.listdir(tmp_path)  # what a failed user pipeline leaves is refused by readers
    assert is_temp_dir(left)
    with pytest.raises(th.errors.ThresherError):
        th.data_source(str(tmp_path / left), split="train")
    # prepare(beam_runner=) removes the temporary directory and the spill files with it
    with pytest.raises(th.errors.ConfigError, match="key 7"):
        th.prepare(str(tmp_path / "p" / "ds"), {"train": dup}, features=feats, num_shards=2,
                   beam_runner="DirectRunner", beam_options=MP)
    assert os.listdir(tmp_path / "p") == []


def test_spill_files_on_object_storage(tmp_path) -> None:
    """spill_dir on S3 (a moto server on 127.0.0.1): the same bytes; the spill prefix is emptied.
    prepare(beam_runner=) to an s3:// path reads back with split strings."""
    import fsspec

    from tests.sources.remote.s3_server import S3Server

    feats = {"x": F.Scalar("int64"), "t": F.Text()}
    pairs = [(f"k{i}", {"x": i, "t": "y" * (i % 9)}) for i in range(120)]
    with S3Server() as s3:
        bucket = s3.new_bucket()
        so = s3.storage_options()
        _write(str(tmp_path / "s3"), {"train": pairs}, features=feats, num_shards=3, name="ds",
               spill_dir=f"s3://{bucket}/spill", storage_options=so, run_bytes=1000)
        fs = fsspec.filesystem("s3", **so)
        fs.invalidate_cache()
        assert fs.find(f"{bucket}/spill") == []
        with pytest.raises(Exception, match="same key|the key 'k7'"):
            _write(str(tmp_path / "bad"), {"train": pairs + [("k7", {"x": 0, "t": ""})]}, features=feats,
                   num_shards=3, spill_dir=f"s3://{bucket}/spill", storage_options=so, run_bytes=1000)
        fs.invalidate_cache()
        left = fs.find(f"{bucket}/spill")  # a failed user pipeline leaves its runs under one folder
        assert left and {p.split("/")[2] for p in left} == {d for d in os.listdir(tmp_path) if is_temp_dir(d)}
        url = f"s3://{bucket}/datasets/ds"  # prepare(beam_runner=) to a URL: Beam writes, then one upload
        th.prepare(url, {"train": pairs}, features=feats, num_shards=3, beam_runner="DirectRunner",
                   beam_options=MP, storage_options=so)
        part = th.data_source(url, split="train[10:20]", storage_options=so)
        whole = th.data_source(str(tmp_path / "s3"), split="train")
        assert [int(e["x"]) for e in part] == [int(whole[i]["x"]) for i in range(10, 20)]
    th.prepare(str(tmp_path / "one"), {"train": pairs}, features=feats, num_shards=3, keyed=True,
               progress=False, name="ds")
    assert dir_files(str(tmp_path / "s3")) == dir_files(str(tmp_path / "one"))
    assert ".spill" not in os.listdir(tmp_path / "s3")


def test_one_process_keyed_prepare_orders_by_key(tmp_path) -> None:
    feats = {"x": F.Scalar("int64")}
    pairs = [(k, {"x": k}) for k in (5, -3, 12, 0, 7)]
    th.prepare(str(tmp_path / "a"), {"train": pairs}, features=feats, keyed=True, shuffle=False, progress=False)
    assert [int(e["x"]) for e in th.data_source(str(tmp_path / "a"), split="train")] == [-3, 0, 5, 7, 12]
    th.prepare(str(tmp_path / "b"), {"train": pairs[::-1]}, features=feats, keyed=True, progress=False, name="x")
    th.prepare(str(tmp_path / "c"), {"train": pairs}, features=feats, keyed=True, progress=False, name="x")
    assert dir_files(str(tmp_path / "b")) == dir_files(str(tmp_path / "c"))  # arrival order does not matter
    with pytest.raises(th.errors.ConfigError, match="same key 5"):
        th.prepare(str(tmp_path / "d"), {"train": pairs + [(5, {"x": 1})]}, features=feats, keyed=True,
                   progress=False)
    with pytest.raises(th.errors.ConfigError, match="int, str or bytes"):
        th.prepare(str(tmp_path / "e"), {"train": [(1.5, {"x": 1})]}, features=feats, keyed=True,
                   progress=False)
    assert sorted(os.listdir(tmp_path)) == ["a", "b", "c"]
