"""thresher.beam writing straight to object storage: a moto S3 server on 127.0.0.1, the
DirectRunner with 2 worker processes. Shard writers upload their shards; the commit
uploads dataset_info.json last; the objects are the bytes of a local one-process prepare.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import fsspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
import thresher.beam
from tests.helpers import dir_files
from tests.sources.remote.s3_server import S3Server
from tests.sources.test_beam import _FEATURES, MP, _examples, _write
from thresher import features as F


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with S3Server() as server:
        yield server


def _objects(url: str, so: dict[str, Any]) -> dict[str, bytes]:
    """Every object under ``url``, by name (the layout of ``dir_files``)."""
    fs = fsspec.filesystem("s3", **so)
    fs.invalidate_cache()
    inner = url.removeprefix("s3://")
    return {p[len(inner) + 1:]: fs.cat_file(p) for p in sorted(fs.find(inner))}


def _bucket_names(bucket: str, so: dict[str, Any]) -> list[str]:
    fs = fsspec.filesystem("s3", **so)
    fs.invalidate_cache()
    return [p[len(bucket) + 1:] for p in fs.find(bucket)]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.sampled_from(sorted(_FEATURES)), min_size=1, max_size=2, unique=True),
       n_train=st.integers(0, 30), shards=st.sampled_from([None, 1, 3]), shuffle=st.booleans(),
       seed=st.integers(0, 2**16), exchange=st.sampled_from(["files", "runner"]), data=st.data())
def test_shards_uploaded_by_the_workers_are_the_bytes_of_a_local_prepare(
        s3, tmp_path_factory, names, n_train, shards, shuffle, seed, exchange, data) -> None:
    so = s3.storage_options()
    bucket = s3.new_bucket()
    feats = {k: _FEATURES[k][0] for k in names}
    train, test = _examples(names, n_train, seed, True), _examples(names, 5, seed + 1, False)
    common = dict(features=feats, num_shards=shards, shuffle=shuffle, name="ds")
    local = str(tmp_path_factory.mktemp("one") / "ds")
    th.prepare(local, {"train": train, "test": test}, keyed=True, progress=False, **common)
    arrival = data.draw(st.permutations(train))
    mine = f"s3://{bucket}/mine/1.0.0"
    _write(mine, {"train": arrival, "test": test}, exchange=exchange, run_bytes=64, storage_options=so, **common)
    assert _objects(mine, so) == dir_files(local)
    via_prepare = f"s3://{bucket}/prepared/1.0.0"
    info = th.prepare(via_prepare, {"train": arrival[::-1], "test": test}, beam_runner="DirectRunner",
                      beam_options=MP, storage_options=so, **common)
    assert info.data_dir == via_prepare
    assert _objects(via_prepare, so) == dir_files(local)
    # nothing else is left in the bucket: no spill runs, no spool files, no hidden prefix
    assert sorted(_bucket_names(bucket, so)) == sorted(f"{d}/1.0.0/{n}" for d in ("mine", "prepared")
                                                       for n in dir_files(local))


def test_the_result_reads_back_with_split_strings(s3) -> None:
    so = s3.storage_options()
    url = f"s3://{s3.new_bucket()}/datasets/squares/1.0.0/"
    pairs = [(f"k{i:03d}", {"x": i * i}) for i in range(40)]
    th.prepare(url, {"train": pairs}, features={"x": F.Scalar("int64")}, num_shards=4, beam_runner="DirectRunner",
               beam_options=MP, storage_options=so)
    half = th.data_source(url, split="train[:50%]", storage_options=so)
    whole = th.data_source(url, split="train", storage_options=so)
    assert len(half) == 20 and [int(e["x"]) for e in half] == [int(whole[i]["x"]) for i in range(20)]
    assert sorted(int(e["x"]) for e in whole) == [i * i for i in range(40)]
    assert th.builder(url, storage_options=so).info.splits["train"].shard_lengths == (10, 10, 10, 10)


def test_a_failed_commit_leaves_shards_that_readers_refuse_and_a_rerun_refuses_or_replaces(s3, tmp_path) -> None:
    """The shards are uploaded, then the commit step fails (it cannot remove its spill folder,
    on a filesystem fsspec does not know): no dataset_info.json; data_source refuses the URL
    naming it; a rerun to the same URL is refused unless overwrite=True, which deletes the
    leftovers and writes the dataset."""
    so = s3.storage_options()
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/ds"
    feats = {"x": F.Scalar("int64"), "t": F.Text()}
    pairs = [(i, {"x": i, "t": "y" * (i % 5)}) for i in range(50)]
    with pytest.raises(Exception, match="nosuchproto"):
        _write(url, {"train": pairs}, features=feats, num_shards=3, exchange="runner", storage_options=so,
               spill_dir="nosuchproto://spill")
    left = _objects(url, so)
    assert left and "dataset_info.json" not in left and all(".array_record-" in n for n in left)
    with pytest.raises(th.errors.IncompleteDatasetError, match=f"'{url}' has {len(left)} ArrayRecord"):
        th.data_source(url, split="train", storage_options=so)
    with pytest.raises(th.errors.ConfigError, match=f"'{url}' already exists .* no dataset_info.json"):
        _write(url, {"train": pairs}, features=feats, num_shards=2, storage_options=so)
    _write(url, {"train": pairs}, features=feats, num_shards=2, storage_options=so, overwrite=True, name="ds")
    local = str(tmp_path / "ds")
    th.prepare(local, {"train": pairs}, features=feats, num_shards=2, keyed=True, progress=False)
    assert _objects(url, so) == dir_files(local)  # the 3 shards of the failed run are gone
    with pytest.raises(th.errors.ConfigError, match=f"'{url}' already exists"):
        th.prepare(url, {"train": pairs}, features=feats, beam_runner="DirectRunner", beam_options=MP,
                   storage_options=so)


def test_a_worker_failure_in_prepare_removes_what_it_uploaded(s3) -> None:
    """A duplicate key found by a shard writer: prepare(beam_runner=) to a URL fails with the
    worker's error and leaves nothing in the bucket (its shards, spill runs, spool files)."""
    so = s3.storage_options()
    bucket = s3.new_bucket()
    dup = [(i, {"x": i}) for i in range(40)] + [(7, {"x": 1000})]
    with pytest.raises(th.errors.ConfigError, match="key 7"):
        th.prepare(f"s3://{bucket}/ds", {"train": dup}, features={"x": F.Scalar("int64")}, num_shards=4,
                   beam_runner="DirectRunner", beam_options=MP, storage_options=so)
    assert _bucket_names(bucket, so) == []
    with pytest.raises(th.errors.SourceNotFoundError):
        th.data_source(f"s3://{bucket}/ds", split="train", storage_options=so)
