"""Broken TFDS directories fail with specific errors that name the file and the record."""

from __future__ import annotations

import json
import os
from typing import Callable

import pytest

import thresher as th
from thresher.errors import (
    CorruptSourceError,
    DatasetInfoError,
    FeatureError,
    SourceNotFoundError,
)
from thresher.sources import write_array_record

Copy = Callable[[str], str]


def _edit_info(d: str, fn: Callable[[dict], None], name: str = "dataset_info.json") -> None:
    path = os.path.join(d, name)
    with open(path) as f:
        obj = json.load(f)
    fn(obj)
    with open(path, "w") as f:
        json.dump(obj, f)


def test_missing_shard_names_the_file(copy_fixture: Copy) -> None:
    d = copy_fixture("images")
    os.remove(os.path.join(d, "images-train.array_record-00001-of-00003"))
    with pytest.raises(SourceNotFoundError, match="images-train.array_record-00001-of-00003"):
        th.data_source(d, split="train")
    assert len(th.data_source(d, split="train[:1shard]+test")) == 16 + 10  # others still read


def test_truncated_array_record_shard_names_the_file(copy_fixture: Copy) -> None:
    d = copy_fixture("tensors")
    path = os.path.join(d, "tensors-test.array_record-00002-of-00003")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 3)
    with pytest.raises(CorruptSourceError, match="tensors-test.array_record-00002-of-00003"):
        th.data_source(d, split="test")


def test_shard_with_other_record_count_is_refused(copy_fixture: Copy) -> None:
    d = copy_fixture("tensors")
    write_array_record(os.path.join(d, "tensors-test.array_record-00000-of-00003"), [b""] * 3)
    with pytest.raises(DatasetInfoError, match="has 3 records but dataset_info.json says 4"):
        th.data_source(d, split="test")


@pytest.mark.parametrize("record, why", [
    (b"\x0a\xff\xff\xff\xff\x0f", "not a tf.train.Example"),  # length past the end
    (b"\x0f\x01", "not a tf.train.Example"),  # wire type 7
    (b"", "has no feature"),  # an empty Example
])
def test_record_that_is_not_an_example_names_shard_and_record(copy_fixture: Copy,
                                                               record: bytes, why: str) -> None:
    d = copy_fixture("images")
    src = th.data_source(d, split="test")
    good = [src.raw(k) for k in range(3)]
    write_array_record(os.path.join(d, "images-test.array_record-00000-of-00003"),
                       [good[0], record, good[2]])
    ds = th.data_source(d, split="test")
    ds[0], ds[2]  # the neighbours still decode
    shard = "images-test.array_record-00000-of-00003"
    with pytest.raises(CorruptSourceError, match=f"record 1 of shard .*{shard}.*key 1") as e:
        ds[1]
    assert why in str(e.value)
    with pytest.raises(CorruptSourceError, match=f"record 1 of shard .*{shard}"):
        ds.__getitems__([0, 1, 2])


@pytest.mark.parametrize("edit, match", [
    (lambda o: o.update(fileFormat="parquet"), "fileFormat 'parquet'"),
    (lambda o: o["splits"][0].update(filepathTemplate="{SPLIT}/{SHARD_RANGE}.{FILEFORMAT}"),
     "SHARD_RANGE"),
    (lambda o: [s.update(numShards="3", shardLengths=None) or s.pop("shardLengths")
                for s in o["splits"]], "no 'shardLengths'"),
    (lambda o: o["splits"][0].update(shardLengths=["1", "x"]), "not an integer"),
])
def test_dataset_info_from_a_newer_tfds_is_refused(copy_fixture: Copy, edit: Callable,
                                                   match: str) -> None:
    d = copy_fixture("images")
    _edit_info(d, edit)
    with pytest.raises(DatasetInfoError, match=match) as e:
        th.builder(d)
    assert "dataset_info.json" in str(e.value)


def test_unknown_feature_type_names_it_and_the_dataset(copy_fixture: Copy) -> None:
    d = copy_fixture("images")

    def edit(o: dict) -> None:
        o["featuresDict"]["features"]["label"] = {
            "pythonClassName": "tensorflow_datasets.core.features.fancy.Hologram",
            "hologram": {}}

    _edit_info(d, edit, "features.json")
    with pytest.raises(FeatureError, match="Hologram") as e:
        th.builder(d)
    assert "'label'" in str(e.value) and d in str(e.value)


def test_corrupt_json_is_refused(copy_fixture: Copy) -> None:
    d = copy_fixture("images")
    with open(os.path.join(d, "dataset_info.json"), "w") as f:
        f.write('{"name": "images", "splits": [')
    with pytest.raises((DatasetInfoError, SourceNotFoundError), match="dataset_info.json"):
        th.builder(d)


def test_tfrecord_dataset_reads_in_place(copy_fixture: Copy) -> None:
    d = copy_fixture("images_tfrecord")
    assert len(th.data_source(d, split="train")) == 48  # no conversion needed any more
    assert th.builder(d).info.file_format == "tfrecord"


def test_directory_without_versions_is_not_found(tmp_path: str) -> None:
    os.makedirs(os.path.join(str(tmp_path), "empty", "notaversion"))
    with pytest.raises(SourceNotFoundError):
        th.data_source(os.path.join(str(tmp_path), "empty"))
