"""Prepared datasets whose dataset_info.json, features JSON, split strings or shard bytes were
damaged or made up: reading them raises thresher errors (naming what is wrong), never another
exception type, a crash or a hang."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.fuzz.guards import JSON, json_paths, only_thresher_errors
from thresher import features as F

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("fuzz") / "ds")
    rng = np.random.default_rng(0)
    columns = {"image": rng.integers(0, 255, (40, 4, 4, 1), dtype=np.uint8), "label": np.arange(40) % 3,
               "text": [f"t{i}" for i in range(40)], "vec": rng.random((40, 2)).astype(np.float32)}
    th.prepare(path, {"train": columns, "test": {k: v[:10] for k, v in columns.items()}},
               features={"image": F.Image((4, 4, 1), encoding="png"), "label": F.ClassLabel(num_classes=3),
                         "text": F.Text(), "vec": F.Tensor((None,), "float32")},
               num_shards={"train": 2, "test": 1}, progress=False)
    return path


def _read_everything(path: str, split: Any = None) -> None:
    """What a user does with a dataset: open it, look at its info, read every record."""
    info = th.builder(path).info
    _ = (info.name, info.features, [s.num_examples for s in info.splits.values()])
    sources = th.data_source(path, split=split)
    if isinstance(sources, dict):
        sources = list(sources.values())
    elif not isinstance(sources, list):
        sources = [sources]
    for source in sources:
        n = len(source)
        for lo in range(0, n, 16):
            source.__getitems__(list(range(lo, min(n, lo + 16))))
        if n:
            source[n - 1]


def _copy(prepared: str, tmp_path: Any, name: str = "copy") -> str:
    out = os.path.join(str(tmp_path), name)
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(prepared, out)
    return out


def _info(path: str) -> dict[str, Any]:
    with open(os.path.join(path, "dataset_info.json")) as f:
        return json.load(f)


def _write_info(path: str, info: Any) -> None:
    with open(os.path.join(path, "dataset_info.json"), "w") as f:
        json.dump(info, f)



def test_the_intact_dataset_reads(prepared: str) -> None:
    assert only_thresher_errors(lambda: _read_everything(prepared)) is None


@SETTINGS
@given(data=st.data(), value=JSON, delete=st.booleans())
def test_edited_dataset_info_json(prepared: str, tmp_path_factory: pytest.TempPathFactory,
                                  data: st.DataObject, value: Any, delete: bool) -> None:
    path = _copy(prepared, tmp_path_factory.getbasetemp(), "edited")
    info = _info(path)
    where = data.draw(st.sampled_from(json_paths(info)))
    parent = info
    for key in where[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        del parent[where[-1]]
    else:
        parent[where[-1]] = value
    _write_info(path, info)
    only_thresher_errors(lambda: _read_everything(path))


@SETTINGS
@given(info=JSON)
def test_made_up_dataset_info_json(prepared: str, tmp_path_factory: pytest.TempPathFactory, info: Any) -> None:
    path = _copy(prepared, tmp_path_factory.getbasetemp(), "made-up")
    _write_info(path, info)
    assert only_thresher_errors(lambda: _read_everything(path)) is not None


@SETTINGS
@given(raw=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_dataset_info_json_that_is_not_json(prepared: str, tmp_path_factory: pytest.TempPathFactory,
                                            raw: bytes) -> None:
    path = _copy(prepared, tmp_path_factory.getbasetemp(), "bytes")
    with open(os.path.join(path, "dataset_info.json"), "wb") as f:
        f.write(raw)
    only_thresher_errors(lambda: _read_everything(path))


FEATURE_JSON = st.recursive(
    st.fixed_dictionaries({"type": st.sampled_from(["Tensor", "Scalar", "ClassLabel", "Image", "Text", "Nope"])},
                          optional={"shape": JSON, "dtype": st.sampled_from(["uint8", "float32", "int64", "x"]) | JSON,
                                    "num_classes": JSON, "names": JSON, "encoding": JSON}),
    lambda inner: st.fixed_dictionaries({"type": st.just("FeaturesDict"),
                                         "features": st.dictionaries(st.text(max_size=5), inner, max_size=3)}),
    max_leaves=5) | JSON


@SETTINGS
@given(features=FEATURE_JSON)
def test_feature_json_is_checked(features: Any) -> None:
    def load() -> None:
        feature = th.features.feature_from_json(features)
        th.features.RecordCodec(feature)

    only_thresher_errors(load)


@SETTINGS
@given(features=FEATURE_JSON)
def test_made_up_features_in_a_dataset(prepared: str, tmp_path_factory: pytest.TempPathFactory,
                                       features: Any) -> None:
    path = _copy(prepared, tmp_path_factory.getbasetemp(), "features")
    info = _info(path)
    info["features"] = features
    _write_info(path, info)
    only_thresher_errors(lambda: _read_everything(path))


SPLIT_ALPHABET = st.sampled_from(list("train test all [ ] : % + - 0 1 5 9 0 . shard ( ) pct1_dropremainder closest , _ x"))


@SETTINGS
@given(split=st.one_of(st.text(max_size=30), st.lists(SPLIT_ALPHABET, max_size=14).map("".join),
                       st.lists(SPLIT_ALPHABET, max_size=8).map("".join).map(lambda s: "train" + s)))
def test_split_strings(prepared: str, split: str) -> None:
    only_thresher_errors(lambda: _read_everything(prepared, split))


@SETTINGS
@given(split=st.one_of(JSON, st.lists(st.text(max_size=10), max_size=3)))
def test_split_arguments_of_any_type(prepared: str, split: Any) -> None:
    only_thresher_errors(lambda: _read_everything(prepared, split))


def _shards(path: str) -> list[str]:
    return sorted(os.path.join(path, n) for n in os.listdir(path) if ".array_record-" in n)


@SETTINGS
@given(data=st.data())
def test_damaged_shard_bytes(prepared: str, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    path = _copy(prepared, tmp_path_factory.getbasetemp(), "shards")
    shard = data.draw(st.sampled_from(_shards(path)))
    raw = bytearray(open(shard, "rb").read())
    how = data.draw(st.sampled_from(["truncate", "flip", "zero", "append"]))
    if how == "truncate":
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    elif how == "flip":
        for i in data.draw(st.lists(st.integers(0, len(raw) - 1), min_size=1, max_size=8)):
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
    elif how == "zero":
        lo = data.draw(st.integers(0, len(raw) - 1))
        raw[lo:lo + data.draw(st.integers(1, 64))] = bytes(min(64, len(raw) - lo))
    else:
        raw += data.draw(st.binary(min_size=1, max_size=64))
    with open(shard, "wb") as f:
        f.write(bytes(raw))
    only_thresher_errors(lambda: _read_everything(path))


def _read_in_child(path: str) -> subprocess.CompletedProcess[str]:
    code = ("import sys\nfrom tests.fuzz.test_fuzz_prepared import _read_everything\n"
            "from thresher.errors import ThresherError\n"
            "try:\n    _read_everything(sys.argv[1])\nexcept ThresherError as e:\n    print('refused:', e)\n")
    return subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=120,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.mark.parametrize("seed", range(6))
def test_damaged_shards_never_crash_the_process(prepared: str, tmp_path, seed: int) -> None:
    # A crash in a C++ reader (abort, segfault) would kill pytest; run the reader in a child.
    path = _copy(prepared, tmp_path)
    rng = np.random.default_rng(seed)
    for shard in _shards(path):
        raw = bytearray(open(shard, "rb").read())
        for i in rng.integers(0, len(raw), 16):
            raw[i] = int(rng.integers(0, 256))
        with open(shard, "wb") as f:
            f.write(bytes(raw[: len(raw) - int(rng.integers(0, 40))]))
    proc = _read_in_child(path)
    assert proc.returncode == 0, proc.stderr[-3000:]
