"""TFDS-written directories in buckets: memory:// and a real S3-compatible server (moto).

The fixtures TFDS wrote are uploaded as they are; reads through the URL must equal what
``tfds.data_source`` returned for them (the same expected values as the local tests).
"""

from __future__ import annotations

import os
import pickle
import uuid
from collections.abc import Iterator
from typing import Any

import fsspec
import numpy as np
import pytest
import s3fs

import thresher as th
from tests.sources.remote.s3_server import S3Server
from tests.sources.tfds.expected import DATA, assert_same, load
from thresher.errors import ConfigError, SourceNotFoundError
from thresher.sources.formats.tfds.convert import convert


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    """A moto S3 server on 127.0.0.1 for this module, stopped after."""
    with S3Server() as server:
        yield server


def _files(name: str) -> Iterator[tuple[str, str]]:
    """(relative path, local path) of every file of a fixture dataset directory."""
    top = os.path.join(DATA, name)
    for root, _, files in os.walk(top):
        for f in sorted(files):
            local = os.path.join(root, f)
            yield os.path.relpath(local, top).replace(os.sep, "/"), local


@pytest.fixture
def memory() -> Iterator[Any]:
    """A fresh prefix on fsspec's in-memory filesystem, removed after."""
    fs = fsspec.filesystem("memory")
    prefix = f"/tfds-{uuid.uuid4().hex[:10]}"
    yield fs, prefix
    if fs.exists(prefix):
        fs.rm(prefix, recursive=True)


def _to_memory(memory: Any, name: str, skip: tuple[str, ...] = ()) -> str:
    fs, prefix = memory
    for rel, local in _files(name):
        if not rel.endswith(skip):
            with open(local, "rb") as f:
                fs.pipe(f"{prefix}/{name}/{rel}", f.read())
    return f"memory://{prefix}/{name}"


def _to_s3(s3: S3Server, name: str) -> str:
    bucket = s3.new_bucket()
    fs = s3fs.S3FileSystem(**s3.storage_options())
    for rel, local in _files(name):
        fs.put(local, f"{bucket}/tensorflow_datasets/{name}/{rel}")
    return f"s3://{bucket}/tensorflow_datasets/{name}"


def test_memory_dataset_dir_reads_the_newest_version_as_tfds(memory: Any) -> None:
    url = _to_memory(memory, "images")
    info = th.builder(url).info
    assert info.version == "2.0.1" and info.data_dir == f"{url}/2.0.1"
    assert info.features["label"].names[:2] == ["zero", "one"]  # from label.labels.txt
    expected = load("images")["splits"]
    for split, values in expected.items():
        ds = th.data_source(url, split=split)
        assert len(ds) == len(values)
        assert_same(ds.__getitems__(list(range(len(ds)))), values, f"memory {split}")
        assert_same(ds[len(ds) - 1], values[-1], f"memory {split}[-1]")
    # a version directory given directly, and an older one
    assert th.builder(f"{url}/1.0.0").info.data_dir == f"{url}/1.0.0"


def test_an_unfinished_newer_version_is_passed_over(memory: Any) -> None:
    url = _to_memory(memory, "images")
    fs, _ = memory
    fs.pipe(url[len("memory://"):] + "/3.0.0/images-train.array_record-00000-of-00001", b"x")
    assert th.builder(url).info.version == "2.0.1"


def test_s3_split_strings_select_what_tfds_selects(s3: S3Server) -> None:
    so = s3.storage_options()
    for name in ("sequences", "tensors"):
        url = _to_s3(s3, name)
        exp = load(name)
        specs = [(s, k) for s, k in exp["split_strings"].items() if not isinstance(k, dict)]
        for spec, keys in specs[:6]:
            ds = th.data_source(url, split=spec, storage_options=so)
            want = [exp["splits"][s][i] for s, i in keys]
            assert len(ds) == len(want), spec
            assert_same(ds.__getitems__(list(range(len(ds)))), want, f"s3 {name}:{spec}")
        ds = th.data_source(url, split="train", storage_options=so)
        assert all(p.startswith(url + "/") for p in ds.paths)
        clone = pickle.loads(pickle.dumps(ds))  # URLs and options, reopened where read
        keys = np.random.default_rng(0).permutation(len(ds))[:20].tolist()
        assert_same(clone.__getitems__(keys), [exp["splits"]["train"][k] for k in keys], name)


def test_s3_loader_with_workers_equals_the_local_one(s3: S3Server) -> None:
    url = _to_s3(s3, "images")
    remote = th.data_source(url, split="train", storage_options=s3.storage_options())
    local = th.data_source(os.path.join(DATA, "images"), split="train")

    def labels(source: Any, workers: int) -> list[tuple[int, int]]:
        sampler = th.IndexSampler(len(source), shuffle=True, seed=5, num_epochs=1)
        ops = [lambda e: (e["label"], e["rgb"].sum()), th.Batch(8)]
        loader = th.DataLoader(source, sampler, ops, worker_count=workers)
        return [(int(x), int(y)) for b in loader for x, y in zip(*b)]

    assert labels(remote, 2) == labels(local, 0)


def test_tfrecord_dataset_in_a_bucket_reads_in_place(memory: Any) -> None:
    url = _to_memory(memory, "images_tfrecord")
    assert th.builder(url).info.file_format == "tfrecord"
    for split, values in load("images")["splits"].items():
        ds = th.data_source(url, split=split)
        assert_same(ds.__getitems__(list(range(len(ds)))), values, f"memory tfrecord {split}")
    with pytest.raises(ConfigError, match="local directories"):
        convert(url)  # converting still needs a local copy


def test_missing_shard_in_a_bucket_is_named(memory: Any) -> None:
    url = _to_memory(memory, "sequences", skip=("sequences-train.array_record-00001-of-00003",))
    with pytest.raises(SourceNotFoundError, match="sequences-train.array_record-00001-of-00003"):
        th.data_source(url, split="train")
    assert len(th.data_source(url, split="test")) == len(load("sequences")["splits"]["test"])


def test_a_url_with_nothing_is_not_found(memory: Any) -> None:
    _, prefix = memory
    with pytest.raises(SourceNotFoundError, match="does not exist"):
        th.data_source(f"memory://{prefix}/nothing")
