"""ArrayRecord over s3://, gs:// and http:// from the range server on 127.0.0.1.

The range server (tests/sources/remote/range_server.py) reads only the bytes of each
range request from disk and speaks the S3 API (s3fs), the GCS JSON API (gcsfs) and
plain HTTP (fsspec's HTTPFileSystem), so the same files are read through all three
clients, and its counters show what the reader fetched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import thresher as th
from tests.helpers import REPO
from tests.sources.remote.range_server import RangeServer
from thresher.errors import SourceError, SourceNotFoundError
from thresher.sources.remote import RemoteReadOptions


@pytest.fixture(scope="module")
def server(tmp_path_factory: Any) -> Iterator[RangeServer]:
    with RangeServer(str(tmp_path_factory.mktemp("buckets")), key="testing") as srv:
        yield srv


def _parts(srv: RangeServer, bucket: str) -> list[bytes]:
    """Three ArrayRecord objects in ``bucket`` (group sizes 1, 4, 7; none and zstd)."""
    folder = os.path.join(srv.root, srv.make_bucket(bucket), "train")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(5)
    records: list[bytes] = []
    for i in range(3):
        part = [rng.bytes(int(rng.integers(0, 3000))) for _ in range(30)]
        th.sources.write_array_record(os.path.join(folder, f"part-{i}.array_record"), part,
                                      group_size=1 + 3 * i, options="zstd:1" if i else "")
        records += part
    return records


def _check_all(src: Any, records: list[bytes]) -> None:
    assert len(src) == len(records)
    assert src.__getitems__(list(range(len(records)))) == records
    rng = np.random.default_rng(1)
    for _ in range(5):
        keys = rng.integers(0, len(records), 16).tolist()
        assert src.__getitems__(keys) == [records[k] for k in keys]


def test_s3_reads_fetch_only_the_chunks_asked_for(server: RangeServer) -> None:
    records = _parts(server, "s3-reads")
    so = server.s3_options()
    src = th.sources.ArrayRecordSource("s3://s3-reads/train/part-*.array_record", storage_options=so)
    _check_all(src, records)
    assert src._ranges is not None
    server.stats(reset=True)
    before = (src._ranges.requests, src._ranges.bytes_read)
    assert src.__getitems__([0, 2, 4]) == [records[k] for k in (0, 2, 4)]
    stats = server.stats(reset=True)
    # part-0 has one record per chunk: three chunks, one request each (gaps are not read
    # when they would pass half the bytes wanted); the server sent exactly those bytes.
    assert stats["requests"] == src._ranges.requests - before[0] <= 3
    assert stats["body_bytes"] == src._ranges.bytes_read - before[1] < 1.5 * sum(
        len(records[k]) + 80 for k in (0, 2, 4)) + 3 * 64
    with pytest.raises(SourceError, match="refused"):
        th.sources.ArrayRecordSource("s3://s3-reads/train/part-0.array_record",
                                     storage_options=server.s3_options(key="someone-else"))


def test_http_urls_through_fsspec_http(server: RangeServer) -> None:
    records = _parts(server, "http-reads")
    urls = [f"{server.endpoint}/http-reads/train/part-{i}.array_record" for i in range(3)]
    src = th.sources.ArrayRecordSource(urls, read_options=RemoteReadOptions(max_concurrency=4))
    _check_all(src, records)
    with pytest.raises(SourceNotFoundError, match="nope"):
        th.sources.ArrayRecordSource(f"{server.endpoint}/http-reads/train/nope.array_record")


GCS_CHILD = """
import json, sys
sys.path.insert(0, {repo!r})
import time
import thresher as th
start = time.monotonic()
so = json.loads(sys.argv[1])
src = th.sources.ArrayRecordSource("gs://gcs-reads/train/part-*.array_record", storage_options=so)
keys = [int(k) for k in sys.argv[2].split(",")]
ds = th.data_source("gs://gcs-reads/toy", split="train[:4]+test", storage_options=so)
print(json.dumps({{"paths": src.paths, "records": [r.hex() for r in src.__getitems__(keys)],
                   "toy": [int(e["x"]) for e in ds.__getitems__(list(range(len(ds))))],
                   "seconds": time.monotonic() - start}}))
"""


def test_gs_urls_through_gcsfs(server: RangeServer) -> None:
    records = _parts(server, "gcs-reads")
    toy = os.path.join(server.root, "gcs-reads", "toy")
    th.prepare(toy,
               {"train": [{"x": i} for i in range(10)], "test": [{"x": -i} for i in range(3)]},
               features={"x": th.features.Scalar("int64")}, progress=False)
    keys = [5, 0, 89, 31, 31, 60]
    # As documented: no GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT (gcsfs >= 2025 would ask an emulator for a
    # gRPC control plane it does not serve and wait out a 60 s time-out on every call without thresher's fix).
    env = {k: v for k, v in os.environ.items() if k != "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"}
    out = subprocess.run([sys.executable, "-c", GCS_CHILD.format(repo=REPO),
                          json.dumps(server.gcs_options()), ",".join(map(str, keys))],
                         capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["seconds"] < 30, got["seconds"]  # not one gcsfs gRPC time-out
    assert got["paths"] == [f"gs://gcs-reads/train/part-{i}.array_record" for i in range(3)]
    assert [bytes.fromhex(r) for r in got["records"]] == [records[k] for k in keys]
    local = th.data_source(toy, split="train[:4]+test")
    assert got["toy"] == [int(e["x"]) for e in local.__getitems__(list(range(7)))]
