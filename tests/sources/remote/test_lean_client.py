"""The lean range client: signed reads on moto with auth enforced, http ranges, the same bytes
as fsspec, retries, timeouts, and loaders reading through it (workers, resume)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import boto3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.sources.remote.range_server import RangeServer
from tests.sources.remote.s3_server import KEY, SECRET, S3Server
from thresher.errors import ConfigError, SourceError, SourceNotFoundError
from thresher.sources.remote import RangeReader, RemoteReadOptions
from thresher.sources.remote.fs import RemoteObject, filesystem
from thresher.sources.remote.lean import LeanClient, client_for

BLOB = np.random.default_rng(3).bytes(300_000)


def _records(n: int = 60, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.bytes(int(rng.integers(0, 4000))) for _ in range(n)]


@pytest.fixture(scope="module")
def authed(tmp_path_factory: Any) -> Iterator[dict[str, Any]]:
    """moto checking every signature: an IAM user's key, a bucket with ArrayRecord objects."""
    folder = str(tmp_path_factory.mktemp("authed"))
    parts = []
    for i, g in enumerate((1, 5)):
        records = _records(seed=i)
        path = os.path.join(folder, f"part-{i}.array_record")
        th.sources.write_array_record(path, records, group_size=g, options="zstd:1" if i else "")
        parts.append(path)
    with S3Server() as server:
        kw = dict(endpoint_url=server.endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                  region_name="us-east-1")
        iam = boto3.client("iam", **kw)
        iam.create_user(UserName="reader")
        iam.put_user_policy(UserName="reader", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        bucket = server.new_bucket()
        s3 = boto3.client("s3", **kw)
        for p in parts:
            s3.upload_file(p, bucket, f"data set/{os.path.basename(p)}")  # a key with a space
        s3.put_object(Bucket=bucket, Key="blob", Body=BLOB)
        request = urllib.request.Request(server.endpoint + "/moto-api/reset-auth", data=b"0", method="POST",
                                         headers={"Content-Type": "text/plain"})
        urllib.request.urlopen(request, timeout=10).close()  # from now on every request is checked
        so = {"key": key["AccessKeyId"], "secret": key["SecretAccessKey"],
              "client_kwargs": {"endpoint_url": server.endpoint, "region_name": "us-east-1"}}
        yield {"server": server, "bucket": bucket, "so": so, "parts": parts,
               "url": f"s3://{bucket}/data set/part-*.array_record"}


def _lean(src: Any) -> Any:
    assert src._ranges is not None
    return src._ranges._process()["fs"].get("s3")


def test_signed_reads_equal_array_records_reader(authed: dict[str, Any]) -> None:
    src = th.sources.ArrayRecordSource(authed["url"], storage_options=authed["so"])
    native = th.sources.ArrayRecordSource(authed["parts"])  # array_record's own reader
    keys = list(range(len(native)))
    assert src.__getitems__(keys) == native.__getitems__(keys)
    rng = np.random.default_rng(0)
    for _ in range(5):
        batch = rng.integers(0, len(native), 20).tolist()
        assert src.__getitems__(batch) == native.__getitems__(batch)
    assert isinstance(_lean(src), LeanClient)
    via_fsspec = th.sources.ArrayRecordSource(authed["url"], storage_options=authed["so"],
                                              read_options=RemoteReadOptions(client="fsspec"))
    assert via_fsspec.__getitems__(keys) == native.__getitems__(keys)
    assert _lean(via_fsspec) is None


def test_wrong_credentials_are_refused_with_a_clear_error(authed: dict[str, Any]) -> None:
    url = f"s3://{authed['bucket']}/data set/part-0.array_record"
    size = os.path.getsize(authed["parts"][0])
    wrong = dict(authed["so"], secret="not-the-secret")
    reader = RangeReader([RemoteObject(url, size)], wrong, RemoteReadOptions(timeout=10))
    with pytest.raises(SourceError, match=r"refused.*SignatureDoesNotMatch.*check the credentials") as e:
        reader.lengths()
    assert url in str(e.value) and "bytes=" in str(e.value)
    unknown = dict(authed["so"], key="AKIANOBODY")
    with pytest.raises(SourceError, match="refused"):
        RangeReader([RemoteObject(url, size)], unknown).lengths()


def test_anonymous_requests_are_unsigned_and_refused_here(authed: dict[str, Any]) -> None:
    so = {"anon": True, "client_kwargs": authed["so"]["client_kwargs"]}
    client = client_for("s3://x/y", so, 10.0)
    assert client is not None and client.target.anon
    with pytest.raises(PermissionError, match="refused"):
        client.cat_file(f"s3://{authed['bucket']}/blob", 0, 10)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(BLOB) - 1), st.integers(1, 70_000)), min_size=1, max_size=4))
def test_same_bytes_as_fsspec_on_moto(authed: dict[str, Any], ranges: list[tuple[int, int]]) -> None:
    url = f"s3://{authed['bucket']}/blob"
    client = client_for(url, authed["so"], 10.0)
    assert client is not None
    fs, path = filesystem(url, authed["so"])
    for start, length in ranges:
        end = min(start + length, len(BLOB))  # s3fs asks for no more than the object holds
        assert client.cat_file(url, start, end) == fs.cat_file(path, start=start, end=end) == BLOB[start:end]
    assert client.cat_file(url, len(BLOB) - 5, len(BLOB) + 100) == BLOB[-5:]  # the caller sees it is short


@pytest.fixture(scope="module")
def ranges(tmp_path_factory: Any) -> Iterator[RangeServer]:
    root = str(tmp_path_factory.mktemp("buckets"))
    os.makedirs(os.path.join(root, "web"))
    with open(os.path.join(root, "web", "blob"), "wb") as f:
        f.write(BLOB)
    with RangeServer(root) as server:
        yield server


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(BLOB) - 1), st.integers(1, 70_000)), min_size=1, max_size=4))
def test_same_bytes_as_fsspec_over_http(ranges: RangeServer, spans: list[tuple[int, int]]) -> None:
    url = f"{ranges.endpoint}/web/blob"
    client = client_for(url, None, 10.0)
    assert client is not None
    fs, path = filesystem(url)
    for start, length in spans:
        end = min(start + length, len(BLOB))
        assert client.cat_file(url, start, end) == fs.cat_file(path, start=start, end=end) == BLOB[start:end]


def test_http_array_record_urls_are_read_by_the_lean_client(ranges: RangeServer) -> None:
    records = _records(40, seed=9)
    th.sources.write_array_record(os.path.join(ranges.root, "web", "h.array_record"), records, group_size=3)
    url = f"{ranges.endpoint}/web/h.array_record"
    src = th.sources.ArrayRecordSource(url, read_options=RemoteReadOptions(cache_bytes=0))
    ranges.stats(reset=True)
    assert src.__getitems__([39, 0, 17]) == [records[k] for k in (39, 0, 17)]
    assert src._ranges is not None and isinstance(src._ranges._process()["fs"]["http"], LeanClient)
    assert ranges.stats()["requests"] == 3  # three chunks apart: three requests
    with pytest.raises(SourceNotFoundError, match="nope"):
        RangeReader([RemoteObject(f"{ranges.endpoint}/web/nope.array_record", 100_000)]).lengths()


class _Flaky(BaseHTTPRequestHandler):
    """Serves BLOB with ranges; the first ``fail`` requests get 503 or a dropped connection."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    fail: ClassVar[list[str]] = []
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        with self.lock:
            mode = self.fail.pop(0) if self.fail else "ok"
        if mode == "drop":
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if mode == "503":
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        a, b = (int(x) for x in self.headers["Range"].split("=")[1].split("-"))
        body = BLOB[a:b + 1]
        self.send_response(206)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture()
def flaky() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/blob"
    server.shutdown()
    server.server_close()
    _Flaky.fail = []


def test_retries_503_and_dropped_connections(flaky: str) -> None:
    client = client_for(flaky, None, 10.0)
    assert client is not None
    _Flaky.fail = ["503", "drop", "503"]
    assert client.cat_file(flaky, 100, 5000) == BLOB[100:5000]
    _Flaky.fail = ["503"] * 10
    start = time.monotonic()
    with pytest.raises(OSError, match=r"bytes=0-9 .*failed after 4 attempts \(HTTP 503\).*client='fsspec'"):
        client.cat_file(flaky, 0, 10)
    assert time.monotonic() - start < 5


def test_a_silent_server_is_a_timeout_not_a_hang() -> None:
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/x.array_record"
        client = client_for(url, None, 1.0)
        assert client is not None
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"bytes=0-99 of .*within 1 s"):
            client.cat_file(url, 0, 100)
        assert time.monotonic() - start < 10
        reader = RangeReader([RemoteObject(url, 100_000)], None, RemoteReadOptions(timeout=1.0))
        with pytest.raises(SourceError, match=r"x.array_record"):
            reader.lengths()


def test_options_the_lean_client_does_not_know_go_to_fsspec(monkeypatch: Any) -> None:
    assert client_for("s3://b/x", {"requester_pays": True}, 1.0) is None
    assert client_for("gs://b/x", None, 1.0) is None
    assert client_for("http://h/x", {"client_kwargs": {}}, 1.0) is None
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
    client = client_for("s3://bkt/k", {"key": "a", "secret": "b"}, 1.0)
    assert client is not None and client.target.url_for("bkt", "k") == "http://127.0.0.1:1/bkt/k"
    with pytest.raises(ConfigError, match=r"s3://bkt/k: storage_options key= and secret="):
        client_for("s3://bkt/k", {"key": "a"}, 1.0)
    with pytest.raises(ConfigError, match=r"s3://bkt/k: the S3 endpoint .* got 'ftp://h'"):
        client_for("s3://bkt/k", {"anon": True, "endpoint_url": "ftp://h"}, 1.0)
    with pytest.raises(ConfigError, match="client must be"):
        RemoteReadOptions(client="requests")
    with pytest.raises(ConfigError, match=r"nowhere/ca\.pem"):
        client_for("s3://bkt/k", {"anon": True, "client_kwargs": {"verify": "/nowhere/ca.pem"}}, 1.0)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")  # proxies: fsspec's clients know them
    assert client_for("s3://bkt/k", {"anon": True}, 1.0) is None
    assert client_for("https://h/x", None, 1.0) is None


def _loader(url: str, so: dict[str, Any], client: str, workers: int) -> Any:
    src = th.sources.ArrayRecordSource(url, storage_options=so, read_options=RemoteReadOptions(client=client))
    sampler = th.IndexSampler(len(src), shuffle=True, seed=4, num_epochs=1)
    ops = [lambda b: np.frombuffer(b.ljust(8, b"\0"), np.uint8)[:8].astype(np.int64), th.Batch(6)]
    return th.DataLoader(src, sampler, ops, worker_count=workers)


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_batches_and_resume_match_fsspec(authed: dict[str, Any], workers: int) -> None:
    expected = [b.tolist() for b in _loader(authed["url"], authed["so"], "fsspec", 0)]
    it = iter(_loader(authed["url"], authed["so"], "lean", workers))
    first = [next(it).tolist() for _ in range(7)]
    state = it.get_state()
    it.close()
    resumed = iter(_loader(authed["url"], authed["so"], "lean", workers))
    resumed.set_state(state)
    assert first + [b.tolist() for b in resumed] == expected
