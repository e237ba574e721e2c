"""show_examples and as_dataframe on TFDS-written and thresher-prepared datasets."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

import thresher as th
from thresher.errors import ConfigError, FeatureError
from tests.sources.tfds.expected import DATA

IMAGES = os.path.join(DATA, "images")


def _prepared(tmp_path: str) -> str:
    rng = np.random.default_rng(0)
    path = os.path.join(tmp_path, "colors")
    th.prepare(path, {"train": [{"pic": rng.integers(0, 255, (6, 9, 3)).astype(np.uint8),
                                 "meta": {"kind": i % 3}, "note": f"n{i}"} for i in range(5)]},
               features={"pic": th.features.Image((6, 9, 3)),
                         "meta": {"kind": th.features.ClassLabel(names=["r", "g", "b"])},
                         "note": th.features.Text()}, shuffle=False, progress=False)
    return path


def test_show_examples_writes_a_png_grid_of_tfds_images(tmp_path: str) -> None:
    png = os.path.join(str(tmp_path), "grid.png")
    fig = th.show_examples(th.data_source(IMAGES, split="train"), th.builder(IMAGES).info,
                           rows=2, cols=3, path=png)
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size == (600, 460)
        pixels = np.asarray(im.convert("L"))
    assert len(np.unique(pixels)) > 100  # the noise images are drawn, not blank panels
    titles = [ax.get_title() for ax in fig.axes]
    ds = th.data_source(IMAGES, split="train")
    names = th.builder(IMAGES).info.features["label"].names
    assert titles == [f"{names[ds[k]['label']]} ({ds[k]['label']})" for k in range(6)]
    assert not [f for f in os.listdir(str(tmp_path)) if f.startswith(".")]


def test_show_examples_on_a_prepared_dataset_with_nested_label(tmp_path: str) -> None:
    path = _prepared(str(tmp_path))
    png = os.path.join(str(tmp_path), "p.png")
    fig = th.show_examples(th.data_source(path, split="train"), th.builder(path).info,
                           rows=2, cols=3, path=png, label_key="meta/kind")
    assert [ax.get_title() for ax in fig.axes] == ["r (0)", "g (1)", "b (2)", "r (0)", "g (1)",
                                                   ""]
    assert os.path.getsize(png) > 1000


def test_show_examples_without_images_or_with_bad_key(tmp_path: str) -> None:
    tensors = os.path.join(DATA, "tensors")
    with pytest.raises(FeatureError, match="no Image feature"):
        th.show_examples(th.data_source(tensors, split="test"), th.builder(tensors).info,
                         path=os.path.join(str(tmp_path), "x.png"))
    with pytest.raises(ConfigError, match="no feature 'nope'"):
        th.show_examples(th.data_source(IMAGES, split="test"), th.builder(IMAGES).info,
                         image_key="nope", path=os.path.join(str(tmp_path), "x.png"))


def test_as_dataframe_of_a_tfds_dataset() -> None:
    ds = th.data_source(IMAGES, split="test")
    df = th.as_dataframe(ds, th.builder(IMAGES).info, n=4)
    assert list(df.columns) == ["image", "label", "label_name", "label2", "rgb", "rgba"]
    assert len(df) == 4
    for k in range(4):
        assert df["label"][k] == ds[k]["label"]
        assert df["label_name"][k] == ["zero", "one", "two", "three", "four"][ds[k]["label"]]
        assert np.array_equal(df["rgb"][k], ds[k]["rgb"])
    assert len(th.as_dataframe(ds, th.builder(IMAGES).info, n=1000)) == len(ds)


def test_as_dataframe_of_a_prepared_dataset_nests_keys(tmp_path: str) -> None:
    path = _prepared(str(tmp_path))
    ds = th.data_source(path, split="train")
    df = th.as_dataframe(ds, th.builder(path).info)
    assert list(df.columns) == ["meta/kind", "meta/kind_name", "note", "pic"]
    assert df["note"].tolist() == [ds[k]["note"] for k in range(5)]
    assert df["meta/kind_name"].tolist() == ["r", "g", "b", "r", "g"]
