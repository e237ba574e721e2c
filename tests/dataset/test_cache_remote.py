"""cache(url): on-disk caches in a bucket (the range server's s3://, and fsspec's memory://).

A cache is committed by its sidecar, uploaded last: a failed build leaves nothing a
reader would take for a cache; a part rewritten or deleted after the commit is refused;
processes of a pod meet through objects; the cached stream equals the uncached one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import fsspec
import numpy as np
import pytest
import s3fs
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.sources.remote.range_server import RangeServer
from thresher.dataset.cache_files import build_disk_cache

D = th.Dataset


@pytest.fixture(scope="module")
def server(tmp_path_factory: Any) -> Iterator[RangeServer]:
    with RangeServer(str(tmp_path_factory.mktemp("buckets"))) as srv:
        yield srv


@pytest.fixture
def memory_prefix() -> Iterator[str]:
    prefix = f"/thresher-cache-{uuid.uuid4().hex[:10]}"
    yield f"memory:/{prefix}"
    fs = fsspec.filesystem("memory")
    if fs.exists(prefix):
        fs.rm(prefix, recursive=True)


def _counting(calls: list[int]) -> Any:
    def element(x: int) -> dict[str, Any]:
        calls.append(x)
        return {"x": np.arange(x % 7, dtype=np.int16), "name": f"e{x}"}
    return element


def _names(ds: Any) -> list[str]:
    return [e["name"] for e in ds]


def test_a_cache_in_a_bucket_is_built_once_and_read_back(server: RangeServer) -> None:
    bucket = server.make_bucket(f"c-{uuid.uuid4().hex[:8]}")
    so = server.s3_options()
    url = f"s3://{bucket}/caches/train.array_record"
    calls: list[int] = []
    ds = D.range(40).map(_counting(calls)).cache(url, storage_options=so).shuffle(seed=3)
    first = _names(ds)
    assert sorted(first) == sorted(f"e{i}" for i in range(40)) and len(calls) == 40
    again = D.range(40).map(_counting(calls)).cache(url, storage_options=so).shuffle(seed=3)
    assert _names(again) == first and len(calls) == 40  # read from the bucket, not computed
    with_workers = D.range(40).map(_counting(calls)).cache(url, storage_options=so).prefetch(worker_count=2)
    assert _names(with_workers) == [f"e{i}" for i in range(40)] and len(calls) == 40
    fs = s3fs.S3FileSystem(**so)
    assert sorted(fs.ls(f"{bucket}/caches")) == [f"{bucket}/caches/train.array_record",
                                                 f"{bucket}/caches/train.array_record.json"]


def test_a_failed_build_leaves_nothing_and_the_sidecar_commits(memory_prefix: str) -> None:
    url = f"{memory_prefix}/c.array_record"
    fs = fsspec.filesystem("memory")

    def boom(x: int) -> int:
        if x == 17:
            raise ValueError("element 17 fails")
        return x

    with pytest.raises(Exception, match="element 17"):
        list(D.range(30).map(boom).cache(url))
    assert not fs.exists(memory_prefix[len("memory:/"):])  # no part, no sidecar
    # A part without its sidecar (a build that died before committing) is not a cache.
    fs.pipe_file(f"{memory_prefix[len('memory:/'):]}/c.array_record", b"half a part")
    calls: list[int] = []
    assert _names(D.range(5).map(_counting(calls)).cache(url)) == [f"e{i}" for i in range(5)]
    assert len(calls) == 5


@pytest.mark.parametrize("damage", ["rewrite", "delete"])
def test_a_part_changed_after_the_commit_is_refused(memory_prefix: str, damage: str) -> None:
    url = f"{memory_prefix}/c.array_record"
    list(D.range(12).map(_counting([])).cache(url))
    fs, inner = fsspec.core.url_to_fs(url)
    if damage == "rewrite":
        data = fs.cat_file(inner)
        fs.rm_file(inner)
        fs.pipe_file(inner, data)  # same bytes, new object: its version changed
    else:
        fs.rm_file(inner)
    with pytest.raises(th.errors.CacheError, match=r"c\.array_record"):
        list(D.range(12).map(_counting([])).cache(url))


def test_processes_of_a_pod_meet_through_objects(server: RangeServer) -> None:
    bucket = server.make_bucket(f"p-{uuid.uuid4().hex[:8]}")
    so = server.s3_options()
    url = f"s3://{bucket}/pod.array_record"
    with pytest.raises(th.errors.CacheError, match=r"pod.array_record-00001-of-00002.done.json"):
        build_disk_cache(url, "fp", iter([1, 2]), process=(0, 2), timeout_s=0.3, storage_options=so)

    def member(i: int) -> Any:
        return build_disk_cache(url, "fp", iter(range(10 * i, 10 * i + 3)), process=(i, 2),
                                timeout_s=30, storage_options=so)

    with ThreadPoolExecutor(2) as pool:  # process 1 first: process 0 waits for its part
        views = list(pool.map(member, (1, 0)))
    for v in views:
        assert list(v.__getitems__(range(6))) == [0, 1, 2, 10, 11, 12]
    names = sorted(os.path.basename(p) for p in s3fs.S3FileSystem(**so).ls(bucket))
    assert names == ["pod.array_record-00000-of-00002", "pod.array_record-00001-of-00002",
                     "pod.array_record.json"]  # the .done.json meeting points are removed


@settings(max_examples=15, deadline=None)
@given(n=st.integers(0, 60), seed=st.integers(0, 2**32 - 1), keep=st.integers(1, 4))
def test_a_cache_in_a_bucket_gives_the_stream_of_a_local_cache(n: int, seed: int, keep: int) -> None:
    url = f"memory://thresher-prop-{uuid.uuid4().hex[:10]}/c.array_record"
    local = os.path.join(tempfile.mkdtemp(prefix="thresher-cache-"), "c.array_record")
    try:
        def run(where: str) -> list[list[int]]:
            base = D.range(n).filter(lambda x: x % keep == 0).map(lambda x: {"v": np.full(2, x)})
            return [e["v"].tolist() for e in base.cache(where).shuffle(seed=seed).repeat(2)]

        want = run(local)
        assert sorted(want) == sorted(2 * [[x, x] for x in range(n) if x % keep == 0])
        assert run(url) == want
        assert run(url) == want  # read back from the bucket
    finally:
        shutil.rmtree(os.path.dirname(local), ignore_errors=True)
        fs, inner = fsspec.core.url_to_fs(url.rsplit("/", 1)[0])
        if fs.exists(inner):
            fs.rm(inner, recursive=True)
