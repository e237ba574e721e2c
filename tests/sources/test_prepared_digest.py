"""A prepared dataset's feature spec is tied to its data by ``features_digest``.

A same-size edit of a feature (float64 <-> int64, uint8 -> int8, shape [2, 8] -> [16]) once
decoded the stored bytes as other values (5/7 became 4604608933298662839); it is refused at
open with a DatasetInfoError naming the field. Malformed dtypes name the feature.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import thresher as th
from thresher.errors import DatasetInfoError
from thresher.features import Scalar, Tensor
from tests.sources.tfds.expected import DATA


@pytest.fixture
def dataset(tmp_path) -> str:
    path = os.path.join(str(tmp_path), "ds")
    rows = [{"x": np.float64(i) / 7, "n": np.int64(i), "img": np.full((2, 8), i, np.uint8)}
            for i in range(6)]
    th.prepare(path, {"train": rows}, features={"x": Scalar("float64"), "n": Scalar("int64"),
                                               "img": Tensor((2, 8), "uint8")}, shuffle=False, progress=False)
    return path


def _edit(path: str, fn: Callable[[dict[str, Any]], None]) -> None:
    info = os.path.join(path, "dataset_info.json")
    with open(info) as f:
        obj = json.load(f)
    fn(obj)
    with open(info, "w") as f:
        json.dump(obj, f)


def _feature(obj: dict[str, Any], key: str) -> dict[str, Any]:
    return obj["features"]["features"][key]


EDITS = {
    "float64->int64": lambda o: _feature(o, "x").update(dtype="int64"),
    "int64->float64": lambda o: _feature(o, "n").update(dtype="float64"),
    "uint8->int8": lambda o: _feature(o, "img").update(dtype="int8"),
    "shape [2,8]->[16]": lambda o: _feature(o, "img").update(shape=[16]),
    "Scalar->Tensor(())": lambda o: _feature(o, "x").update(type="Tensor", shape=[]),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_a_same_size_feature_edit_is_refused_naming_the_field(dataset: str, name: str) -> None:
    assert th.data_source(dataset, split="train")[5]["x"] == 5 / 7
    _edit(dataset, EDITS[name])
    with pytest.raises(DatasetInfoError, match="field 'features' does not match 'features_digest'"):
        th.data_source(dataset, split="train")
    with pytest.raises(DatasetInfoError, match="dataset_info.json"):
        th.builder(dataset)


def test_the_digest_ignores_key_order_and_whitespace(dataset: str) -> None:
    info = os.path.join(dataset, "dataset_info.json")
    with open(info) as f:
        obj = json.load(f)
    with open(info, "w") as f:  # reordered keys, other indentation: the same spec
        obj["features"]["features"] = dict(reversed(list(obj["features"]["features"].items())))
        f.write(json.dumps({k: obj[k] for k in reversed(list(obj))}, indent=7))
    assert th.data_source(dataset, split="train")[5]["x"] == 5 / 7


def test_a_dataset_written_before_the_digest_is_read_unchecked(dataset: str) -> None:
    _edit(dataset, lambda o: o.pop("features_digest"))
    assert th.data_source(dataset, split="train")[5]["x"] == 5 / 7


@pytest.mark.parametrize("digest", [3, "md5:abc", None])
def test_a_malformed_digest_is_refused(dataset: str, digest: Any) -> None:
    _edit(dataset, lambda o: o.update(features_digest=digest))
    with pytest.raises(DatasetInfoError, match="features_digest"):
        th.data_source(dataset, split="train")


def test_an_unknown_dtype_names_the_feature(dataset: str) -> None:
    _edit(dataset, lambda o: _feature(o, "x").update(dtype="float17"))
    with pytest.raises(DatasetInfoError, match=r"features/x: .*'float17' is not a dtype"):
        th.data_source(dataset, split="train")


def test_an_unknown_dtype_in_tfds_features_json_names_the_feature(tmp_path) -> None:
    import shutil

    d = os.path.join(str(tmp_path), "tensors")
    src = os.path.join(DATA, "tensors")
    shutil.copytree(os.path.join(src, max(os.listdir(src))), d)
    path = os.path.join(d, "features.json")
    with open(path) as f:
        spec = json.load(f)
    spec["featuresDict"]["features"]["f16"]["tensor"]["dtype"] = "float17"
    with open(path, "w") as f:
        json.dump(spec, f)
    with pytest.raises(DatasetInfoError, match=r"feature 'f16' .*dtype 'float17'.*features.json"):
        th.data_source(d, split="train")
