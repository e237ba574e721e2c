"""Every bad dataset directory and bad argument gives a specific error that says what to do."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

import thresher as th
from thresher import features as F
from thresher.errors import (
    ConfigError,
    CorruptSourceError,
    DatasetInfoError,
    FeatureError,
    IncompleteDatasetError,
    SourceNotFoundError,
    SplitError,
)
from thresher.sources.formats.array_record.writer import write_array_record


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "ds"
    th.prepare(path, {"train": [{"x": i} for i in range(20)], "test": [{"x": i} for i in range(5)]},
               features={"x": F.Scalar("int64")}, num_shards={"train": 2, "test": 1},
               progress=False)
    return path


def edit_info(path, change):
    info_path = path / "dataset_info.json"
    d = json.loads(info_path.read_text())
    change(d)
    info_path.write_text(json.dumps(d))


def test_missing_directory(tmp_path):
    with pytest.raises(SourceNotFoundError, match="does not exist"):
        th.data_source(tmp_path / "nope")


def test_a_file_is_not_a_dataset(dataset):
    with pytest.raises(SourceNotFoundError, match="is a file"):
        th.data_source(dataset / "dataset_info.json")


def test_missing_info_file(dataset, tmp_path):
    os.remove(dataset / "dataset_info.json")
    with pytest.raises(IncompleteDatasetError, match="no dataset_info.json"):
        th.data_source(dataset)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SourceNotFoundError, match="not a prepared dataset"):
        th.builder(empty)


@pytest.mark.parametrize("text, why", [
    ("{not json", "not valid JSON"),
    ("", "not valid JSON"),
    ('{"format": "thresher.prepared", "format_ver', "not valid JSON"),
    ("[]", "must be a JSON object"),
    ('{"format": "tfds"}', "not a thresher prepared dataset"),
])
def test_corrupt_info_file(dataset, text, why):
    (dataset / "dataset_info.json").write_text(text)
    with pytest.raises(DatasetInfoError, match=why):
        th.data_source(dataset)


@pytest.mark.parametrize("change, why", [
    (lambda d: d.pop("splits"), "missing field 'splits'"),
    (lambda d: d.pop("features"), "missing field 'features'"),
    (lambda d: d.update(format_version=99), "newer than this thresher supports"),
    (lambda d: d.update(record_encoding={"name": "thresher.record", "version": 7}), "record_encoding"),
    (lambda d: d.update(features={"type": "Mystery"}), "unknown feature type 'Mystery'"),
    (lambda d: d["splits"][0].update(num_examples=3), "num_examples is 3 but its shard_lengths add up to 20"),
    (lambda d: d["splits"][0].update(shard_lengths=[]), "non-empty list"),
    (lambda d: d["splits"][0].update(shard_lengths=[10, "10"]), "ints >= 0"),
    (lambda d: d["splits"][1].update(name="train"), "duplicate split names"),
    (lambda d: d["splits"][1].update(name="all"), "'all' cannot be the name of a split"),
    (lambda d: d["splits"][1].update(name="te st"), "invalid split name"),
    (lambda d: d.update(name="../evil"), "invalid dataset name"),
    (lambda d: d.update(name=3), "wrong type"),
])
def test_inconsistent_info(dataset, change, why):
    edit_info(dataset, change)
    with pytest.raises(DatasetInfoError, match=why):
        th.data_source(dataset)


def test_missing_shard_file(dataset):
    os.remove(dataset / "ds-train.array_record-00001-of-00002")
    with pytest.raises(SourceNotFoundError, match="incomplete.*ds-train.array_record-00001-of-00002"):
        th.data_source(dataset)
    # A selection that does not touch the missing shard still reads.
    assert len(th.data_source(dataset, split="train[0shard]+test")) == 15


def test_shard_lengths_disagree_with_the_info(dataset):
    write_array_record(dataset / "ds-train.array_record-00000-of-00002", [b"x"] * 3)
    with pytest.raises(DatasetInfoError, match="has 3 records but dataset_info.json says 10"):
        th.data_source(dataset, split="train")
    assert isinstance(DatasetInfoError("x"), CorruptSourceError)


def test_shard_that_is_not_an_array_record_file(dataset):
    (dataset / "ds-test.array_record-00000-of-00001").write_bytes(b"garbage" * 10)
    with pytest.raises(CorruptSourceError, match="not a readable ArrayRecord file"):
        th.data_source(dataset, split="test")


def test_records_that_do_not_match_the_features(dataset):
    edit_info(dataset, lambda d: d.update(features={"type": "Tensor", "shape": [3], "dtype": "int64"}))
    with pytest.raises(DatasetInfoError, match="'features' does not match 'features_digest'"):
        th.data_source(dataset, split="test")  # refused at open (test_prepared_digest.py)
    edit_info(dataset, lambda d: d.pop("features_digest"))  # as written before the digest existed
    src = th.data_source(dataset, split="test")
    with pytest.raises(CorruptSourceError, match=r"record 2 of PreparedSource\(.*split='test'"):
        src[2]
    with pytest.raises(CorruptSourceError, match="cannot be decoded"):
        src.__getitems__([0, 1])


@pytest.mark.parametrize("spec, why", [
    ("trian", "unknown split 'trian'; the dataset has 'train', 'test'"),
    ("train[:101%]", r"outside \[-100%, 100%\]"),
    ("train[2shard]", "shard 2 does not exist: split 'train' has 2 shards"),
    ("train[:10%", "unbalanced brackets"),
    ("train[1%:2]", "mixes units"),
    ("train[:21]", "index 21 is out of range"),
    ("all[:5%]", "cannot be sliced"),
])
def test_bad_split_strings_through_data_source(dataset, spec, why):
    with pytest.raises(SplitError, match=why) as e:
        th.data_source(dataset, split=spec)
    assert repr(spec) in str(e.value)
    with pytest.raises(SplitError):
        th.builder(dataset).info.splits[spec]


def test_bad_prepare_arguments(tmp_path):
    feats = {"x": F.Scalar("int64")}
    ok = {"train": [{"x": 1}]}
    cases = [
        (dict(splits={"all": [{"x": 1}]}), SplitError, "'all' cannot be the name"),
        (dict(splits={"tr ain": [{"x": 1}]}), SplitError, "invalid split name"),
        (dict(splits={}), ConfigError, "non-empty dict"),
        (dict(splits=ok, num_shards=0), ConfigError, "num_shards"),
        (dict(splits=ok, num_shards={"test": 2}), ConfigError, "unknown split"),
        (dict(splits=ok, name="a/b"), ConfigError, "invalid dataset name"),
        (dict(splits=ok, features={"x": 3}), FeatureError, "not a feature"),
        (dict(splits={"train": [{"x": 1}, {"y": 2}]}), FeatureError,
         r"example 1 of split 'train': missing feature\(s\) \['x'\]; unexpected key\(s\) \['y'\]"),
        (dict(splits={"train": {"x": np.arange(3), "y": np.arange(4)}}, features={"x": F.Scalar("int64"), "y": F.Scalar("int64")}),
         FeatureError, "different lengths"),
        (dict(splits={"train": 5}), ConfigError, "expected an iterable"),
    ]
    for kwargs, error, why in cases:
        kwargs.setdefault("features", feats)
        with pytest.raises(error, match=why):
            th.prepare(tmp_path / "out", progress=False, **kwargs)
        assert os.listdir(tmp_path) == [], kwargs  # nothing left behind


def test_a_copied_temp_dir_is_refused_even_when_complete(dataset, tmp_path):
    # A writer killed after writing dataset_info.json but before the final rename
    # leaves a complete-looking directory under its temporary name.
    tmp = tmp_path / ".ds.thresher-tmp-abc123"
    shutil.copytree(dataset, tmp)
    with pytest.raises(IncompleteDatasetError, match="did not finish"):
        th.data_source(tmp)
