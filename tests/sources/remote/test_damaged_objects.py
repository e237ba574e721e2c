"""Damaged ArrayRecord objects read by byte ranges: refused, never wrong records.

Every chunk the range reader returns records of has had its data hash verified, over
``http://`` and ``s3://`` and with both clients (thresher's lean one and fsspec), like
array_record's own reader on a local file. Objects are damaged where they are stored
(flipped bits, zeroed blocks: on the range server's disk and in moto) or on their way
(the range server sends one byte flipped, once: the chunk is fetched again and read right).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.sources.remote.range_server import RangeServer
from tests.sources.remote.s3_server import KEY, SECRET, S3Server
from tests.sources.remote.test_range_reader import read_native, write_native
from thresher.errors import CorruptSourceError
from thresher.sources.remote import RemoteReadOptions
from thresher.sources.remote.format import BLOCK_SIZE, parse_postscript

BUCKET = "damaged"
CLIENTS = ["lean", "fsspec"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RangeServer]:
    with RangeServer(str(tmp_path_factory.mktemp("buckets"))) as srv:
        srv.make_bucket(BUCKET)
        yield srv


@pytest.fixture(scope="module")
def moto_bucket(s3: S3Server) -> str:
    return s3.new_bucket()


Opener = Callable[[], th.sources.ArrayRecordSource]


def _stored(server: RangeServer, s3: S3Server, bucket: str, data: bytes) -> dict[str, Opener]:
    """``data`` as one new object on the range server (http) and in moto (s3), and a way
    to open it for each store and client (each call reads the footer afresh)."""
    name = f"{uuid.uuid4().hex}.array_record"
    with open(os.path.join(server.root, BUCKET, name), "wb") as f:
        f.write(data)
    boto3.client("s3", endpoint_url=s3.endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                 region_name="us-east-1").put_object(Bucket=bucket, Key=name, Body=data)
    out: dict[str, Opener] = {}
    for client in CLIENTS:
        options = RemoteReadOptions(client=client, cache_bytes=0)
        out[f"http {client}"] = lambda o=options: th.sources.ArrayRecordSource(
            f"{server.endpoint}/{BUCKET}/{name}", read_options=o)
        out[f"s3 {client}"] = lambda o=options: th.sources.ArrayRecordSource(
            f"s3://{bucket}/{name}", storage_options=s3.storage_options(), read_options=o)
    return out


def _file(records: list[bytes], options: str, tmp: str) -> bytes:
    path = os.path.join(tmp, f"{uuid.uuid4().hex}.array_record")
    write_native(path, records, options)
    with open(path, "rb") as f:
        data = f.read()
    os.remove(path)
    return data


def _native_refuses(data: bytes, tmp: str) -> bool:
    """Whether array_record's reader refuses ``data`` as a local file (else it must read
    every record right; the test asserts that)."""
    path = os.path.join(tmp, f"{uuid.uuid4().hex}.array_record")
    with open(path, "wb") as f:
        f.write(data)
    try:
        read_native(path)
    except Exception:  # array_record raises plain RuntimeErrors and ValueErrors
        return True
    finally:
        os.remove(path)
    return False


def _outcome(open_source: Opener, records: list[bytes]) -> str:
    """"refused" or "read" (then every record was right); anything else fails the test."""
    try:
        src = open_source()
        got = src.__getitems__(list(range(len(records))))
    except CorruptSourceError:
        return "refused"
    assert len(got) == len(records)
    wrong = [k for k in range(len(records)) if got[k] != records[k]]
    assert not wrong, f"wrong records {wrong[:8]} returned with no error"
    return "read"


def test_zeroed_bytes_in_a_record_are_refused_by_every_client(
        server: RangeServer, s3: S3Server, moto_bucket: str, tmp_path: Any) -> None:
    # The example: 400 records, 16 bytes of one record's data zeroed. Uncompressed,
    # so every structural field still agrees: only the chunk data hash tells.
    rng = np.random.default_rng(25)
    records = [rng.bytes(300) for _ in range(400)]
    data = bytearray(_file(records, "group_size:1,uncompressed", str(tmp_path)))
    at = bytes(data).find(records[92][100:200])
    assert at > 0
    data[at:at + 16] = bytes(16)
    assert _native_refuses(bytes(data), str(tmp_path))
    for how, open_source in _stored(server, s3, moto_bucket, bytes(data)).items():
        src = open_source()
        assert src.__getitems__([0, 91, 93, 399]) == [records[k] for k in (0, 91, 93, 399)], how
        with pytest.raises(CorruptSourceError) as caught:
            src.__getitems__([5, 92])
        text = str(caught.value)
        assert "chunk data hash mismatch" in text and "records 92..92" in text, (how, text)
        assert "fetched twice" in text and " at offset " in text, (how, text)
        assert src.paths[0] in text, (how, text)
        ranges = src._ranges
        assert ranges is not None and ranges.refetches == 1, how


def test_a_flipped_bit_in_a_compressed_chunk_is_refused(
        server: RangeServer, s3: S3Server, moto_bucket: str, tmp_path: Any) -> None:
    rng = np.random.default_rng(7)
    records = [bytes(rng.integers(0, 4, 2000, dtype=np.uint8)) for _ in range(64)]
    clean = _file(records, "group_size:8,zstd:1", str(tmp_path))
    footer = parse_postscript(clean[-BLOCK_SIZE:], len(clean) - BLOCK_SIZE)
    refused = 0
    for offset in np.linspace(64 + 40, footer - 1, 12).astype(int).tolist():
        data = bytearray(clean)
        data[offset] ^= 0x10
        native = _native_refuses(bytes(data), str(tmp_path))
        outcomes = {how: _outcome(o, records) for how, o in _stored(server, s3, moto_bucket, bytes(data)).items()}
        assert set(outcomes.values()) == {"refused" if native else "read"}, (offset, native, outcomes)
        refused += native
    assert refused >= 10  # the bits are in chunks (headers or data), not padding


def _records(n: int, seed: int, size: int, alphabet: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [bytes(rng.integers(0, alphabet, int(rng.integers(0, size + 1)), dtype=np.uint8)) for _ in range(n)]


DAMAGE = st.lists(st.tuples(st.sampled_from(["flip", "zero"]), st.integers(0, 2**30), st.integers(0, 63)),
                  min_size=1, max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 60), seed=st.integers(0, 2**32 - 1), size=st.sampled_from([1, 40, 700, 5000]),
       alphabet=st.sampled_from([4, 256]), group=st.integers(1, 8),
       compression=st.sampled_from(["uncompressed", "zstd:1", "snappy"]), damage=DAMAGE)
def test_random_damage_is_refused_or_read_right(server: RangeServer, s3: S3Server, moto_bucket: str,
                                                tmp_path: Any, n: int, seed: int, size: int, alphabet: int,
                                                group: int, compression: str,
                                                damage: list[tuple[str, int, int]]) -> None:
    records = _records(n, seed, size, alphabet)
    data = bytearray(_file(records, f"group_size:{group},{compression}", str(tmp_path)))
    for kind, where, extra in damage:
        offset = where % len(data)
        if kind == "flip":
            data[offset] ^= 1 << (extra % 8)
        else:
            data[offset:offset + extra + 1] = bytes(len(data[offset:offset + extra + 1]))
    native = _native_refuses(bytes(data), str(tmp_path))
    outcomes = {how: _outcome(o, records) for how, o in _stored(server, s3, moto_bucket, bytes(data)).items()}
    # The range reader reads what array_record reads (every chunk, the footer and the
    # postscript), so it refuses what array_record refuses; damage elsewhere (the signature,
    # padding) changes no record for either.
    assert len(set(outcomes.values())) == 1, outcomes
    if not native:
        assert set(outcomes.values()) == {"read"}, outcomes


@pytest.mark.parametrize("store", ["http", "s3"])
@pytest.mark.parametrize("client", CLIENTS)
def test_a_byte_damaged_on_its_way_is_fetched_again(server: RangeServer, tmp_path: Any, store: str,
                                                    client: str) -> None:
    rng = np.random.default_rng(3)
    records = [rng.bytes(2000) for _ in range(50)]
    data = _file(records, "group_size:1,uncompressed", str(tmp_path))
    name = f"{uuid.uuid4().hex}.array_record"
    with open(os.path.join(server.root, BUCKET, name), "wb") as f:
        f.write(data)
    footer = parse_postscript(data[-BLOCK_SIZE:], len(data) - BLOCK_SIZE)
    server.flip_once(BUCKET, name, footer + 60)  # inside the footer chunk's data
    server.flip_once(BUCKET, name, data.find(records[7][500:600]) + 10)
    options = RemoteReadOptions(client=client, cache_bytes=0)
    if store == "http":
        src = th.sources.ArrayRecordSource(f"{server.endpoint}/{BUCKET}/{name}", read_options=options)
    else:
        src = th.sources.ArrayRecordSource(f"s3://{BUCKET}/{name}", storage_options=server.s3_options(),
                                           read_options=options)
    ranges = src._ranges
    assert ranges is not None and len(src) == 50
    server.stats(reset=True)
    assert src.__getitems__([6, 7, 8]) == records[6:9]
    assert ranges.refetches == 1  # chunk 7; the footer was read again before refetches counts chunks
    assert server.stats()["requests"] == 2  # chunks 6..8 coalesced, then chunk 7 again
    assert src.__getitems__(list(range(50))) == records
    assert ranges.refetches == 1
