"""The short path for chunks of one record (group_size 1) decodes what the general path decodes,
and leaves every chunk it is not sure of to the general path, damaged ones included."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.sources import write_array_record
from thresher.sources.remote.format import (
    BLOCK_SIZE,
    FormatError,
    parse_footer,
    parse_postscript,
    read_chunk,
    simple_chunk_records,
    small_chunk_records,
)

OPTIONS = ["", "uncompressed", "brotli", "zstd:1"]


def _file(tmp: str, records: list[bytes], options: str) -> tuple[bytes, list[int], list[int]]:
    """The bytes of a group_size-1 file of ``records``, its chunks' offsets and ends."""
    path = os.path.join(tmp, f"f{len(os.listdir(tmp))}.array_record")
    write_array_record(path, records, group_size=1, options=options)
    with open(path, "rb") as f:
        data = f.read()
    post = len(data) - BLOCK_SIZE
    index = parse_footer(data[parse_postscript(data[post:], post):post], parse_postscript(data[post:], post),
                         len(data))
    return data, index.chunk_offsets.tolist(), index.chunk_ends().tolist()


def _general(data: bytes, begin: int, end: int, verify: bool) -> Any:
    try:
        header, body = read_chunk(data, 0, begin, end, verify)
        bounds, values = simple_chunk_records(header, body)
    except FormatError:
        return FormatError
    return [int(b) for b in bounds], values, header.num_records


_records = st.lists(st.one_of(st.binary(max_size=300), st.binary(min_size=900, max_size=3000)), min_size=1,
                    max_size=120)


@settings(max_examples=25, deadline=None)
@given(_records, st.sampled_from(OPTIONS))
def test_the_short_path_decodes_what_the_general_path_decodes(tmp_path_factory: Any, records: list[bytes],
                                                              options: str) -> None:
    data, begins, ends = _file(str(tmp_path_factory.mktemp("small")), records, options)
    for key, (begin, end) in enumerate(zip(begins, ends, strict=True)):
        inside = begin % BLOCK_SIZE and begin % BLOCK_SIZE + end - begin <= BLOCK_SIZE
        for verify in (True, False):
            got = small_chunk_records(data, 0, begin, end, verify)
            general = _general(data, begin, end, verify)
            assert general[1] == records[key]
            if got is not None:
                assert got == general
            elif inside and records[key] and options != "brotli":
                raise AssertionError(f"chunk {key} ({len(records[key])} bytes, {options!r}) left to the general path")


def test_a_chunk_at_a_block_boundary_or_past_the_bytes_read_takes_the_general_path(tmp_path: Any) -> None:
    records = [os.urandom(1000) for _ in range(200)]  # incompressible: 200 KB, past 3 block boundaries
    data, begins, ends = _file(str(tmp_path), records, "")
    crossing = [i for i, (b, e) in enumerate(zip(begins, ends, strict=True))
                if b % BLOCK_SIZE == 0 or b % BLOCK_SIZE + e - b > BLOCK_SIZE]
    assert crossing
    for i in crossing:
        assert small_chunk_records(data, 0, begins[i], ends[i]) is None
        assert _general(data, begins[i], ends[i], True)[1] == records[i]
    inside = next(i for i in range(len(records)) if i not in crossing)
    assert small_chunk_records(data, 0, begins[inside], ends[inside]) is not None
    truncated = data[:ends[inside] - 1]
    assert small_chunk_records(truncated, 0, begins[inside], ends[inside]) is None
    shifted = data[begins[inside] - 10:]  # a buffer holding the file from another base
    assert small_chunk_records(shifted, begins[inside] - 10, begins[inside], ends[inside])[1] == records[inside]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["", "uncompressed"]), st.integers(0, 10**6), st.integers(1, 255), st.booleans())
def test_a_damaged_chunk_is_never_read_by_the_short_path(tmp_path_factory: Any, options: str, where: int,
                                                         xor: int, verify: bool) -> None:
    records = [os.urandom(5 + (i * 37) % 400) for i in range(40)]
    data, begins, ends = _file(str(tmp_path_factory.mktemp("dmg")), records, options)
    key = where % len(records)
    begin, end = begins[key], ends[key]
    damaged = bytearray(data)
    damaged[begin + (where // len(records)) % (end - begin)] ^= xor
    got = small_chunk_records(bytes(damaged), 0, begin, end, verify)
    general = _general(bytes(damaged), begin, end, verify)
    if general is FormatError:
        assert got is None
    elif got is not None:
        assert got == general and got[1] == records[key]


@pytest.mark.parametrize("options", OPTIONS)
def test_group_size_one_files_read_the_same_through_the_range_reader(tmp_path: Any, options: str) -> None:
    from thresher.sources.remote.fs import RemoteObject
    from thresher.sources.remote.reader import RangeReader

    records = [os.urandom(n) for n in (0, 1, 127, 128, 1000, 5000, 70000, 3) * 12]
    path = os.path.join(str(tmp_path), "r.array_record")
    write_array_record(path, records, group_size=1, options=options)
    reader = RangeReader([RemoteObject(path, os.path.getsize(path))])
    keys = list(range(len(records)))[::-1]
    assert reader.read([(0, k) for k in keys]) == [records[k] for k in keys]


def _chunk(sizes: bytes, values: bytes, decoded_size: int, at: int = 1000,
           compression: int = 0) -> tuple[bytes, int, int]:
    """An uncompressed simple chunk of one record with the given sizes buffer and values, and
    valid hashes (what a faulty writer could produce), at position ``at`` of a buffer."""
    import struct

    from thresher.sources.remote.highway import highway_hash64

    data = bytes([compression, len(sizes)]) + sizes + values
    fields = struct.pack("<QQQ", len(data), highway_hash64(data), 0x72 | (1 << 8)) + struct.pack("<Q", decoded_size)
    header = struct.pack("<Q", highway_hash64(fields)) + fields
    buf = bytes(at) + header + data
    return buf, at, len(buf)


@pytest.mark.parametrize(("sizes", "values", "decoded_size"), [
    (b"\x03\x00", b"abc", 3),     # two sizes for one record
    (b"\x03", b"abcd", 3),        # more bytes than the sizes say
    (b"\x04", b"abc", 4),         # fewer
    (b"\x03", b"abc", 4),         # the header's decoded size differs
    (b"\x83", b"abc", 3),         # a size that runs past its buffer
])
def test_a_chunk_whose_sizes_disagree_is_left_to_the_general_path(sizes: bytes, values: bytes,
                                                                  decoded_size: int) -> None:
    buf, begin, end = _chunk(sizes, values, decoded_size)
    assert _general(buf, begin, end, True) is FormatError
    assert small_chunk_records(buf, 0, begin, end) is None
    good, begin, end = _chunk(b"\x03", b"abc", 3)
    assert small_chunk_records(good, 0, begin, end) == ([0, 3], b"abc", 1) == _general(good, begin, end, True)


def test_a_zstd_frame_that_does_not_decode_is_left_to_the_general_path() -> None:
    # valid hashes (a faulty writer), zstd chunks whose frames are not zstd: the general path's
    # FormatError, never zstandard's own error out of the short path
    import zstandard

    good_sizes = b"\x01" + zstandard.ZstdCompressor().compress(b"\x03")
    good_values = b"\x03" + zstandard.ZstdCompressor().compress(b"abc")
    for sizes, values in [(b"\x01garbage", good_values), (good_sizes, b"\x03garbage"),
                          (good_sizes, b"\x05" + good_values[1:])]:
        buf, begin, end = _chunk(sizes, values, 3, compression=0x7A)
        assert _general(buf, begin, end, True) is FormatError
        assert small_chunk_records(buf, 0, begin, end) is None
    buf, begin, end = _chunk(good_sizes, good_values, 3, compression=0x7A)
    assert small_chunk_records(buf, 0, begin, end) == ([0, 3], b"abc", 1) == _general(buf, begin, end, True)
