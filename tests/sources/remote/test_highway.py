"""HighwayHash-64 against the hashes array_record's writer (Riegeli) puts in its files.

Every chunk of files written by array_record under many options is walked: the chunk
header's hash, the hash of every block header, and the hash of the chunk's data (its
lengths exercise every way a last partial packet is padded) must all match; a header
changed by one bit is refused unless ``verify_headers=False``.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.sources.remote.test_range_reader import COMPRESSIONS, SIZES, write_native
from thresher.errors import CorruptSourceError
from thresher.sources.remote import RemoteReadOptions
from thresher.sources.remote.format import BLOCK_SIZE, read_chunk
from thresher.sources.remote.highway import highway_hash64


def _chunks(data: bytes) -> list[int]:
    """The offsets of every chunk, found by following the chunk headers from offset 0."""
    out, pos = [], 0
    while pos < len(data):
        header, _ = read_chunk(data, 0, pos)
        out.append(pos)
        pos = header.end(pos)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(sizes=st.lists(SIZES, max_size=12), group=st.integers(1, 8),
       compression=st.sampled_from(COMPRESSIONS), seed=st.integers(0, 2**32 - 1))
def test_every_hash_in_files_array_record_writes(tmp_path_factory: Any, sizes: list[int], group: int,
                                                 compression: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    path = str(tmp_path_factory.mktemp("hh") / "x.array_record")
    write_native(path, [rng.bytes(n) for n in sizes], f"group_size:{group},{compression}")
    with open(path, "rb") as f:
        data = f.read()
    offsets = _chunks(data)  # read_chunk verifies each chunk header and its block headers
    assert len(offsets) >= 3  # signature, footer, postscript (and the data chunks)
    for pos in offsets:
        header, body = read_chunk(data, 0, pos)
        assert highway_hash64(body) == header.data_hash
    for block in range(0, len(data), BLOCK_SIZE):
        (stored,) = struct.unpack_from("<Q", data, block)
        assert stored == highway_hash64(data[block + 8:block + 24])


def test_a_changed_header_bit_is_refused(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "x.array_record")
    records = [bytes([i]) * 100 for i in range(20)]
    write_native(path, records, "group_size:1,uncompressed")
    with open(path, "rb") as f:
        data = bytearray(f.read())
    second = _chunks(bytes(data))[2]  # after the signature chunk: records[0], then records[1]
    data[second + 16] ^= 1  # its data_hash: only the header hash disagrees with it
    with open(path, "wb") as f:
        f.write(bytes(data))
    src = th.sources.ArrayRecordSource(path, reader="ranges")
    assert src[0] == records[0]
    with pytest.raises(CorruptSourceError, match=r"records 1\.\.1 .*does not match its hash"):
        src[1]
    # Without header checks the header is believed, but its data hash then fails: chunk
    # data hashes are always verified.
    lax = th.sources.ArrayRecordSource(path, reader="ranges",
                                       read_options=RemoteReadOptions(verify_headers=False))
    assert lax[0] == records[0]
    with pytest.raises(CorruptSourceError, match=r"records 1\.\.1 .*chunk data hash mismatch"):
        lax[1]


def test_known_values() -> None:
    # Every Riegeli file starts with the same block header and signature chunk; their
    # hashes (and the hash of the signature's empty data) as array_record wrote them.
    assert highway_hash64(struct.pack("<QQ", 0, 64)) == 0x3F4A880DD170AF83
    signature = bytes.fromhex("0000000000000000e19f13c0e9b1c37273000000000000000000000000000000")
    assert highway_hash64(signature) == 0xA9E187923CC2BA91
    assert highway_hash64(b"") == 0x72C3B1E9C0139FE1
