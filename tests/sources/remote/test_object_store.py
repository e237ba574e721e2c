"""ArrayRecordSource and data_source on a real S3-compatible server (moto) and memory://."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from typing import Any

import fsspec
import numpy as np
import pytest
import s3fs

import thresher as th
from tests.helpers import REPO
from tests.sources.remote.s3_server import S3Server
from thresher.errors import CorruptSourceError, SourceError, SourceNotFoundError
from thresher.sources.remote import RemoteReadOptions


def _write_parts(folder: str, n_files: int = 3, per_file: int = 40) -> list[bytes]:
    rng = np.random.default_rng(1)
    records: list[bytes] = []
    for i in range(n_files):
        part = [rng.bytes(int(rng.integers(0, 5000))) for _ in range(per_file)]
        th.sources.write_array_record(os.path.join(folder, f"part-{i}.array_record"), part,
                                      group_size=1 + 3 * i, options="zstd:1" if i else "")
        records += part
    return records


def _upload(s3: S3Server, folder: str, prefix: str) -> str:
    bucket = s3.new_bucket()
    fs = s3fs.S3FileSystem(**s3.storage_options())
    for name in sorted(os.listdir(folder)):
        fs.put(os.path.join(folder, name), f"{bucket}/{prefix}/{name}")
    return f"s3://{bucket}/{prefix}"


def test_s3_glob_reads_every_record(s3: S3Server, tmp_path: Any) -> None:
    records = _write_parts(str(tmp_path))
    url = _upload(s3, str(tmp_path), "train")
    src = th.sources.ArrayRecordSource(f"{url}/part-*.array_record",
                                       storage_options=s3.storage_options())
    assert src.paths == [f"{url}/part-{i}.array_record" for i in range(3)]
    assert len(src) == len(records)
    assert [src[k] for k in range(len(src))] == records
    rng = np.random.default_rng(0)
    for _ in range(10):
        keys = rng.integers(0, len(records), 32).tolist()
        assert src.__getitems__(keys) == [records[k] for k in keys]
    one = th.sources.ArrayRecordSource([f"{url}/part-2.array_record", f"{url}/part-0.array_record"],
                                       storage_options=s3.storage_options())
    assert one[0] == records[80] and one[40] == records[0]


def test_memory_filesystem(tmp_path: Any) -> None:
    records = _write_parts(str(tmp_path), n_files=2)
    mem = fsspec.filesystem("memory")
    for name in os.listdir(tmp_path):
        mem.pipe(f"/thresher-test/{name}", open(os.path.join(tmp_path, name), "rb").read())
    src = th.sources.ArrayRecordSource("memory://thresher-test/part-*.array_record")
    assert src.__getitems__(list(range(len(records)))) == records
    mem.rm("/thresher-test", recursive=True)


def _prepare(path: str) -> None:
    th.prepare(path, {"train": [{"x": i, "y": float(i) / 2} for i in range(50)],
                      "test": [{"x": -i, "y": 0.0} for i in range(10)]},
               features={"x": th.features.Scalar("int64"), "y": th.features.Scalar("float32")},
               num_shards={"train": 3, "test": 1}, progress=False)


def test_data_source_on_a_prepared_directory_in_a_bucket(s3: S3Server, tmp_path: Any) -> None:
    local = os.path.join(tmp_path, "toy")
    _prepare(local)
    url = _upload(s3, local, "datasets/toy/1.0.0")
    so = s3.storage_options()
    remote = th.data_source(url, split="train[:90%]+test", storage_options=so)
    native = th.data_source(local, split="train[:90%]+test")
    assert len(remote) == len(native) == 55
    keys = list(range(55))
    assert [int(e["x"]) for e in remote.__getitems__(keys)] == \
        [int(e["x"]) for e in native.__getitems__(keys)]
    assert th.builder(url, storage_options=so).info.splits["train"].num_shards == 3
    # A directory whose dataset_info.json is missing is refused.
    fs = s3fs.S3FileSystem(**so)
    fs.rm(url[len("s3://"):] + "/dataset_info.json")
    with pytest.raises(th.errors.IncompleteDatasetError, match="dataset_info.json"):
        th.data_source(url, split="train", storage_options=so)
    with pytest.raises(SourceNotFoundError, match="does not exist"):
        th.data_source(url + "-nothing", storage_options=so)


def _spec(url: str, so: dict[str, Any]) -> dict[str, Any]:
    return {"url": url, "so": so, "batch": 8, "seed": 3}


def _loader(spec: dict[str, Any], workers: int) -> Any:
    src = th.sources.ArrayRecordSource(spec["url"], storage_options=spec["so"])
    sampler = th.IndexSampler(len(src), shuffle=True, seed=spec["seed"], num_epochs=1)
    ops = [lambda b: np.frombuffer(b, np.uint8)[:4].astype(np.int64).sum(),
           th.Batch(spec["batch"], drop_remainder=True)]
    return th.DataLoader(src, sampler, ops, worker_count=workers)


RESUME_CHILD = """
import json, sys
sys.path.insert(0, {repo!r})
from tests.sources.remote.test_object_store import _loader
spec, state = json.loads(sys.argv[1]), json.loads(sys.argv[2])
it = iter(_loader(spec, 2))
it.set_state(state)
print(json.dumps([b.tolist() for b in it]))
"""


def test_workers_and_resume_in_a_fresh_process(s3: S3Server, tmp_path: Any) -> None:
    _write_parts(str(tmp_path))
    url = _upload(s3, str(tmp_path), "w")
    spec = _spec(f"{url}/part-*.array_record", s3.storage_options())
    expected = [b.tolist() for b in _loader(spec, 0)]
    assert len(expected) == 15
    it = iter(_loader(spec, 2))
    first = [next(it).tolist() for _ in range(6)]
    state = it.get_state()
    it.close()
    assert first == expected[:6]
    out = subprocess.run([sys.executable, "-c", RESUME_CHILD.format(repo=REPO),
                          json.dumps(spec), json.dumps(state)],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == expected[6:]


def test_missing_truncated_and_foreign_objects(s3: S3Server, tmp_path: Any) -> None:
    _write_parts(str(tmp_path), n_files=1)
    url = _upload(s3, str(tmp_path), "bad")
    so = s3.storage_options()
    fs = s3fs.S3FileSystem(**so)
    with pytest.raises(SourceNotFoundError, match="nope.array_record"):
        th.sources.ArrayRecordSource(f"{url}/nope.array_record", storage_options=so)
    with pytest.raises(SourceNotFoundError, match="matches no object"):
        th.sources.ArrayRecordSource(f"{url}/zzz-*.array_record", storage_options=so)
    good = fs.cat_file(f"{url[5:]}/part-0.array_record")
    fs.pipe(f"{url[5:]}/text.array_record", b"not an array record file\n" * 5000)
    with pytest.raises(CorruptSourceError, match="text.array_record.*not a readable"):
        th.sources.ArrayRecordSource(f"{url}/text.array_record", storage_options=so)
    fs.pipe(f"{url[5:]}/short.array_record", good[: len(good) // 2])
    with pytest.raises(CorruptSourceError, match="short.array_record"):
        th.sources.ArrayRecordSource(f"{url}/short.array_record", storage_options=so)
    # Replaced by a shorter object after the source listed it: reads fail, naming the keys.
    src = th.sources.ArrayRecordSource(f"{url}/part-0.array_record", storage_options=so)
    fs.pipe(f"{url[5:]}/part-0.array_record", good[:70_000])
    with pytest.raises(SourceError, match=r"part-0.array_record"):
        src.__getitems__(list(range(40)))


def test_credentials_refused(tmp_path: Any) -> None:
    with S3Server(enforce_auth=True) as server:
        so = server.storage_options(key="wrong", secret="wrong")
        with pytest.raises(SourceError, match=r"refused.*credentials"):
            th.sources.ArrayRecordSource("s3://some-bucket/x.array_record", storage_options=so)


def _digest(record: bytes) -> np.ndarray:
    return np.frombuffer(hashlib.sha256(record).digest(), np.uint8)


def test_server_going_away_mid_epoch_is_a_clear_error(tmp_path: Any) -> None:
    _write_parts(str(tmp_path))
    with S3Server() as server:
        url = _upload(server, str(tmp_path), "gone")
        so = dict(server.storage_options(), config_kwargs={"retries": {"max_attempts": 1}})
        # No chunk cache: it would soon hold this small dataset, and reads would not need the server.
        src = th.sources.ArrayRecordSource(f"{url}/part-*.array_record", storage_options=so,
                                           read_options=RemoteReadOptions(timeout=3.0, cache_bytes=0))
        expected = th.sources.ArrayRecordSource(os.path.join(tmp_path, "part-*.array_record"))
        sampler = th.IndexSampler(len(src), shuffle=True, seed=0, num_epochs=None)
        it = iter(th.DataLoader(src, sampler, [_digest, th.Batch(4)], worker_count=2))
        batches = [next(it) for _ in range(3)]
        server.pause()  # frozen: connections hang, nothing is answered
        start = time.monotonic()
        with pytest.raises(SourceError, match=r"part-\d.array_record") as e:
            for _ in range(10_000):
                batches.append(next(it))
        assert time.monotonic() - start < 60  # a 3 s timeout; margin for a loaded machine
        assert "within 3 s" in str(e.value) and "record" in str(e.value)
        it.close()
        # Everything delivered before the error is whole and right.
        keys = [int(m.record_key) for m in (sampler[p] for p in range(4 * len(batches)))]
        assert np.array_equal(np.concatenate(batches),
                              np.stack([_digest(r) for r in expected.__getitems__(keys)]))
        server.stop()  # gone: connections are refused
        with pytest.raises(SourceError, match=r"part-\d.array_record.*record"):
            src.__getitems__(list(range(60, 90)))


def test_prepare_writes_to_a_bucket_and_commits_with_the_info_last(s3: S3Server) -> None:
    so = s3.storage_options()
    url = f"s3://{s3.new_bucket()}/datasets/toy/1.0.0"
    info = th.prepare(url, {"train": [{"x": i} for i in range(20)]},
                      features={"x": th.features.Scalar("int64")}, num_shards=2,
                      progress=False, storage_options=so)
    assert info.name == "1.0.0" and info.splits["train"].num_shards == 2
    ds = th.data_source(url, split="train", storage_options=so)
    assert sorted(int(e["x"]) for e in ds.__getitems__(list(range(20)))) == list(range(20))
    with pytest.raises(th.errors.ConfigError, match="already exists"):
        th.prepare(url, {"train": [{"x": 1}]}, features={"x": th.features.Scalar("int64")},
                   progress=False, storage_options=so)
    th.prepare(url, {"train": [{"x": 7}]}, features={"x": th.features.Scalar("int64")},
               progress=False, storage_options=so, overwrite=True)
    fs = s3fs.S3FileSystem(**so)
    fs.invalidate_cache()
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.find(url[5:]))
    assert names == ["1.0.0-train.array_record-00000-of-00001", "dataset_info.json"]
    assert int(th.data_source(url, split="train", storage_options=so)[0]["x"]) == 7
