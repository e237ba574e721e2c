"""Every path a user gives expands ``~`` and ``$VAR`` as a shell would (URLs are left alone).

``th.data_source("~/tensorflow_datasets/mnist")``, the README's first line for a TFDS user,
once looked for ``<cwd>/~/tensorflow_datasets/mnist``.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

import thresher as th
from thresher._validate import user_path
from thresher.cli import main
from thresher.sources import ArrayRecordSource, write_array_record
from thresher.sources.formats.tfds.convert import convert
from tests.sources.tfds.expected import DATA


@pytest.fixture
def home(tmp_path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh $HOME, $DATA pointing into it, and a working directory elsewhere."""
    h = os.path.join(str(tmp_path), "home")
    os.makedirs(h)
    monkeypatch.setenv("HOME", h)
    monkeypatch.setenv("THRESHER_TEST_DATA", os.path.join(h, "data"))
    cwd = os.path.join(str(tmp_path), "cwd")
    os.makedirs(cwd)
    monkeypatch.chdir(cwd)
    return h


def test_user_path_expands_like_a_shell(home: str) -> None:
    assert user_path("~/x") == os.path.join(home, "x")
    assert user_path("$THRESHER_TEST_DATA/x") == os.path.join(home, "data", "x")
    assert user_path("${THRESHER_TEST_DATA}/y") == os.path.join(home, "data", "y")
    assert user_path("$THRESHER_NO_SUCH_VARIABLE/x") == "$THRESHER_NO_SUCH_VARIABLE/x"
    for url in ("s3://b/~/x", "gs://b/$HOME/x", "https://h/~u/x", "file://~/x"):
        assert user_path(url) == url


def test_prepared_datasets_read_and_write_through_tilde_and_variables(home: str) -> None:
    info = th.prepare("~/ds", {"train": {"x": np.arange(5)}}, progress=False)
    assert info.data_dir == os.path.join(home, "ds")
    assert len(th.data_source("~/ds", split="train")) == 5
    assert th.builder("$HOME/ds").info.splits["train"].num_examples == 5
    assert len(th.data_source("$THRESHER_TEST_DATA/../ds")["train"]) == 5
    assert not os.path.exists(os.path.join(os.getcwd(), "~"))
    assert main(["info", "~/ds"]) == 0


def test_tfds_directories_and_convert_expand(home: str) -> None:
    tfds_dir = os.path.join(home, "tensorflow_datasets", "images_tfrecord")
    shutil.copytree(os.path.join(DATA, "images_tfrecord"), tfds_dir)
    out = convert("~/tensorflow_datasets/images_tfrecord", "~/converted", progress=False)
    assert out == os.path.join(home, "converted")
    assert len(th.data_source("~/converted", split="train")) == 48
    assert main(["convert", "~/tensorflow_datasets/images_tfrecord", "--quiet"]) == 0
    assert len(th.data_source("~/tensorflow_datasets/images_tfrecord", split="test")) == 10


def test_array_record_files_caches_and_ledgers_expand(home: str) -> None:
    os.makedirs(os.path.join(home, "data"))
    assert write_array_record("$THRESHER_TEST_DATA/a.array_record", [b"a", b"b"]) == 2
    assert ArrayRecordSource("~/data/a.array_record")[1] == b"b"
    assert len(ArrayRecordSource(["~/data/*.array_record"])) == 2
    ds = th.Dataset.range(6).cache("~/cache.array_record")
    assert list(ds) == list(range(6))
    assert os.path.exists(os.path.join(home, "cache.array_record.json"))
    loader = th.DataLoader(th.sources.RangeDataSource(0, 8, 1), sampler=th.IndexSampler(
        8, num_epochs=1, shuffle=False, seed=0), operations=[th.Batch(4)], ledger="~/ledger")
    assert len(list(loader)) == 2
    assert os.listdir(os.path.join(home, "ledger"))
    assert main(["audit", "~/ledger", "--json"]) == 0


def test_prepare_inputs_on_the_command_line_expand(home: str) -> None:
    os.makedirs(os.path.join(home, "data"))
    np.save(os.path.join(home, "data", "x.npy"), np.arange(4))
    with open(os.path.join(home, "data", "t.jsonl"), "w") as f:
        f.write("\n".join(json.dumps({"v": i}) for i in range(3)))
    assert main(["prepare", "~/p1", "--split", "train", "KEY=~/data/x.npy", "--quiet"]) == 0
    assert th.builder("~/p1").info.splits["train"].num_examples == 4
    assert main(["prepare", "~/p2", "--split", "train", "$THRESHER_TEST_DATA/t.jsonl", "--quiet"]) == 0
    assert len(th.data_source("~/p2", split="train")) == 3
