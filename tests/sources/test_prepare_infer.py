"""``th.prepare(path, {"train": columns})`` infers the features, as ``thresher prepare`` does,
and says what it inferred."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

import thresher as th
from thresher.cli import main
from thresher.errors import ConfigError
from thresher.features import ClassLabel, Image, Scalar, Tensor, Text


def test_features_are_inferred_from_columns_and_logged(tmp_path, caplog, capsys) -> None:
    rng = np.random.default_rng(0)
    train = {"image": rng.integers(0, 255, (6, 4, 4), dtype=np.uint8), "label": np.arange(6) % 3,
             "x": rng.random((6, 2, 3)).astype(np.float32), "flag": np.arange(6) % 2 == 0,
             "name": [f"n{i}" for i in range(6)], "blob": [bytes([i]) * i for i in range(6)],
             "ragged": [np.arange(i, dtype=np.int16) for i in range(6)],
             "meta": {"id": np.arange(6, dtype=np.int32), "tag": np.array(list("abcdef"))}}
    test = {k: (v[:2] if not isinstance(v, dict) else {kk: vv[:2] for kk, vv in v.items()})
            for k, v in train.items()}
    path = os.path.join(str(tmp_path), "ds")
    with caplog.at_level(logging.INFO, logger="thresher"):
        info = th.prepare(path, {"train": train, "test": test}, shuffle=False, progress=True)
    f = info.features
    assert f["image"] == Image((4, 4, 1), encoding="none")
    assert f["label"] == ClassLabel(num_classes=3)
    assert f["x"] == Tensor((2, 3), "float32") and f["flag"] == Scalar("bool")
    assert f["name"] == Text() and f["blob"] == Tensor((None,), "uint8")
    assert f["ragged"] == Tensor((None,), "int16")
    assert f["meta"]["id"] == Scalar("int32") and f["meta"]["tag"] == Text()
    assert "features inferred" in caplog.text and "ClassLabel(num_classes=3)" in caplog.text
    assert "features inferred" in capsys.readouterr().err
    r = th.data_source(path, split="train")[4]
    assert r["blob"].tobytes() == b"\x04" * 4 and r["name"] == "n4" and r["meta"]["tag"] == "e"
    assert np.array_equal(r["image"][..., 0], train["image"][4]) and r["label"] == 1
    assert np.array_equal(r["ragged"], np.arange(4)) and train["image"].ndim == 3  # input unchanged


def test_the_same_arrays_give_the_same_features_as_the_cli(tmp_path) -> None:
    image = np.zeros((5, 8, 8, 3), np.uint8)
    label = np.array([0, 1, 4, 2, 1])
    score = np.linspace(0, 1, 5)
    npz = os.path.join(str(tmp_path), "train.npz")
    np.savez(npz, image=image, label=label, score=score)
    cli_out = os.path.join(str(tmp_path), "cli")
    assert main(["prepare", cli_out, "--split", "train", npz, "--quiet"]) == 0
    info = th.prepare(os.path.join(str(tmp_path), "py"),
                      {"train": {"image": image, "label": label, "score": score}}, progress=False)
    assert info.features.to_json() == th.builder(cli_out).info.features.to_json()
    assert th.builder(cli_out).info.dumps().replace('"cli"', '"py"') == info.dumps()


def test_examples_without_features_are_refused_with_advice(tmp_path) -> None:
    with pytest.raises(ConfigError, match="pass features="):
        th.prepare(os.path.join(str(tmp_path), "a"), {"train": [{"x": 1}]}, progress=False)
    with pytest.raises(ConfigError, match=r"column 'x'.*types \['dict'\]"):
        th.prepare(os.path.join(str(tmp_path), "b"), {"train": {"x": [{"a": 1}]}}, progress=False)
    with pytest.raises(ConfigError, match="split 'test' has"):
        th.prepare(os.path.join(str(tmp_path), "c"), {"train": {"x": [1]}, "test": {"y": [1]}},
                   progress=False)
