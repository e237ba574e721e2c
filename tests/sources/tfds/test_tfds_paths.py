"""Paths that TFDS metadata names stay inside the dataset directory, for reading and `convert`.

An absolute or ``../`` ``filepathTemplate`` once made ``data_source`` serve shards from
another directory and ``thresher convert`` overwrite a file outside the dataset.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Callable

import pytest

import thresher as th
from thresher.cli import main
from thresher.errors import DatasetInfoError
from thresher.sources.formats.tfds.convert import convert
from tests.sources.tfds.expected import DATA

Copy = Callable[[str], str]
DEFAULT = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"


def _set_template(d: str, template: str, split: str = "train") -> None:
    path = os.path.join(d, "dataset_info.json")
    with open(path) as f:
        obj = json.load(f)
    for s in obj["splits"]:
        if s["name"] == split:
            s["filepathTemplate"] = template
    with open(path, "w") as f:
        json.dump(obj, f)


def _elsewhere(tmp_path: str, d: str) -> str:
    """A second, complete copy of the shards in another directory (what a template could point at)."""
    other = os.path.join(tmp_path, "elsewhere")
    shutil.copytree(d, other)
    return other


@pytest.mark.parametrize("kind", ["absolute", "dotdot"])
def test_read_refuses_a_template_outside_the_directory(copy_fixture: Copy, tmp_path: str,
                                                       kind: str) -> None:
    d = copy_fixture("images")
    other = _elsewhere(str(tmp_path), d)
    template = (os.path.join(other, DEFAULT) if kind == "absolute"
                else os.path.join("..", "..", "elsewhere", DEFAULT))
    assert os.path.isfile(os.path.join(d, template.format(
        DATASET="images", SPLIT="train", FILEFORMAT="array_record",
        SHARD_X_OF_Y="00000-of-00003")))  # the shards it names exist: only the check refuses them
    _set_template(d, template)
    for open_it in (lambda: th.data_source(d, split="test"), lambda: th.builder(d),
                    lambda: th.data_source(os.path.dirname(d), split="train")):
        with pytest.raises(DatasetInfoError, match=r"splits\[0\] \(split 'train'\) filepathTemplate") as e:
            open_it()
        assert "not inside the dataset directory" in str(e.value)


@pytest.mark.parametrize("kind", ["absolute", "dotdot"])
def test_convert_never_writes_outside_the_directory(tmp_path: str, kind: str) -> None:
    d = os.path.join(str(tmp_path), "ds", "images_tfrecord", "2.0.1")
    shutil.copytree(os.path.join(DATA, "images_tfrecord", "2.0.1"), d)
    home = os.path.join(str(tmp_path), "home")
    os.makedirs(home)
    victim = os.path.join(home, "images-test.array_record-00000-of-00003")
    with open(victim, "w") as f:
        f.write("a user's file\n")
    for name in os.listdir(d):  # the tfrecord shards the template reads, beside the victim
        if ".tfrecord-" in name:
            shutil.copy(os.path.join(d, name), home)
    template = (os.path.join(home, DEFAULT) if kind == "absolute"
                else os.path.join("..", "..", "..", "home", DEFAULT))
    _set_template(d, template, split="test")
    before = sorted(os.listdir(d))
    with pytest.raises(DatasetInfoError, match=r"splits\[1\] \(split 'test'\) filepathTemplate"):
        convert(d, progress=False)
    assert main(["convert", d, "--quiet"]) == 2
    assert main(["convert", d, "--out", os.path.join(str(tmp_path), "out"), "--quiet"]) == 2
    with open(victim) as f:
        assert f.read() == "a user's file\n"
    assert sorted(os.listdir(d)) == before
    assert not os.path.exists(os.path.join(str(tmp_path), "out"))


def test_a_template_with_a_subdirectory_inside_is_read(copy_fixture: Copy) -> None:
    d = copy_fixture("images")
    os.makedirs(os.path.join(d, "shards"))
    for name in os.listdir(d):
        if name.startswith("images-train."):
            os.rename(os.path.join(d, name), os.path.join(d, "shards", name))
    _set_template(d, "shards/" + DEFAULT)
    assert len(th.data_source(d, split="train")) == 48


def test_a_label_file_outside_the_directory_is_refused(copy_fixture: Copy, tmp_path: str) -> None:
    d = copy_fixture("images")
    with open(os.path.join(d, "features.json")) as f:
        spec = f.read()
    assert '"label"' in spec
    with open(os.path.join(d, "features.json"), "w") as f:
        f.write(spec.replace('"label"', '"../../secret"'))
    with open(os.path.join(str(tmp_path), "secret.labels.txt"), "w") as f:
        f.write("a\nb\n")
    with pytest.raises(DatasetInfoError, match=r"ClassLabel feature '\.\./\.\./secret'"):
        th.builder(d)
