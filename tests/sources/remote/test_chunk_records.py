"""Chunks of many records read in C in one pass (``format.chunk_records``): stored (incompressible)
or uncompressed values copied once from the file's bytes, with the checks of the general path
(header and block-header hashes, where each block header says the chunk starts and ends, the
chunk's end, the data hash, the sizes). Whatever it returns, the general path returns too; damaged
bytes are never returned; anything else is left to the general path."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sources.remote.test_range_reader import write_native
from thresher.errors import CorruptSourceError
from thresher.sources.remote import RemoteReadOptions
from thresher.sources.remote.format import (
    BLOCK_SIZE,
    FormatError,
    chunk_records,
    parse_footer,
    parse_postscript,
    read_chunk,
    simple_chunk_records,
)
from thresher.sources.remote.fs import RemoteObject
from thresher.sources.remote.highway import native_module
from thresher.sources.remote.reader import RangeReader

pytestmark = pytest.mark.skipif(native_module() is None, reason="unreachable: the C module builds wherever tests run")

# incompressible (stored zstd blocks), compressible (compressed blocks), one repeated byte (RLE), empty
_record = st.one_of(st.binary(max_size=300), st.binary(min_size=900, max_size=3000),
                    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=1), st.integers(1, 4000)),
                    st.builds(lambda t, n: t * n, st.text(min_size=1, max_size=20).map(str.encode),
                              st.integers(1, 200)))
OPTIONS = ["uncompressed", "zstd:1", "zstd:19", "brotli", "snappy"]


def _file(tmp: str, records: list[bytes], options: str) -> tuple[bytes, list[int], list[int], int]:
    """The bytes of an ArrayRecord file of ``records`` (``options``: array_record's writer options),
    its chunks' offsets and ends, and its group size."""
    path = os.path.join(tmp, f"f{len(os.listdir(tmp))}.array_record")
    write_native(path, records, options)
    with open(path, "rb") as f:
        data = f.read()
    post = len(data) - BLOCK_SIZE
    footer = parse_postscript(data[post:], post)
    index = parse_footer(data[footer:post], footer, len(data))
    return data, index.chunk_offsets.tolist(), index.chunk_ends().tolist(), index.group_size


def _general(data: bytes, begin: int, end: int, verify: bool, base: int = 0) -> Any:
    try:
        header, body = read_chunk(data, base, begin, end, verify)
        bounds, values = simple_chunk_records(header, body)
    except FormatError:
        return FormatError
    return [int(b) for b in bounds], values


def _expected(records: list[bytes], group: int, c: int) -> bytes:
    return b"".join(records[c * group:(c + 1) * group])


@settings(max_examples=40, deadline=None)
@given(st.lists(_record, min_size=2, max_size=150), st.integers(2, 80), st.sampled_from(OPTIONS), st.booleans())
def test_what_c_reads_is_what_the_general_path_reads(tmp_path_factory: Any, records: list[bytes], group: int,
                                                     options: str, verify: bool) -> None:
    data, begins, ends, g = _file(str(tmp_path_factory.mktemp("cr")), records, f"group_size:{group},{options}")
    for c, (begin, end) in enumerate(zip(begins, ends, strict=True)):  # g: min(group, records)
        fast = chunk_records(data, 0, begin, end, verify)
        general = _general(data, begin, end, verify)
        assert general is not FormatError and general[1] == _expected(records, g, c)
        if fast is not None:
            assert fast == general
        if options == "uncompressed":
            assert fast is not None  # every uncompressed chunk is read in C
        if options in ("brotli", "snappy"):
            assert fast is None  # left to the general path
    # from another base: the buffer holds the file from its last chunk on
    cut = begins[-1]
    assert chunk_records(data[cut:], cut, cut, ends[-1], verify) == chunk_records(data, 0, cut, ends[-1], verify)


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 12), st.sampled_from(["zstd:3", "uncompressed"]), st.booleans())
def test_incompressible_chunks_over_many_blocks_are_read_in_c(tmp_path_factory: Any, group: int, options: str,
                                                               verify: bool) -> None:
    records = [os.urandom(30_000 + 977 * i) for i in range(3 * group)]  # chunks of 60 KB to 1 MB: many blocks
    data, begins, ends, _ = _file(str(tmp_path_factory.mktemp("big")), records, f"group_size:{group},{options}")
    for c, (begin, end) in enumerate(zip(begins, ends, strict=True)):
        fast = chunk_records(data, 0, begin, end, verify)
        assert fast is not None and fast[1] == _expected(records, group, c)
        assert fast[0] == [0, *itertools_accumulate([len(r) for r in records[c * group:(c + 1) * group]])]
        assert chunk_records(data, 0, begin, end - 1, verify) is None  # it must end by the limit
        assert chunk_records(data[:end - 1], 0, begin, end, verify) is None  # the bytes must all be there


def itertools_accumulate(sizes: list[int]) -> list[int]:
    out, total = [], 0
    for s in sizes:
        total += s
        out.append(total)
    return out


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["zstd:3", "uncompressed"]), st.integers(0, 10**9), st.integers(1, 255), st.booleans(),
       st.integers(2, 9))
def test_damaged_bytes_are_never_returned(tmp_path_factory: Any, options: str, where: int, xor: int, verify: bool,
                                          group: int) -> None:
    records = [os.urandom(20_000 + 131 * i) for i in range(2 * group)]
    data, begins, ends, _ = _file(str(tmp_path_factory.mktemp("dmg")), records, f"group_size:{group},{options}")
    damaged = bytearray(data)
    at = begins[0] + where % (ends[-1] - begins[0])
    damaged[at] ^= xor
    for c, (begin, end) in enumerate(zip(begins, ends, strict=True)):
        fast = chunk_records(bytes(damaged), 0, begin, end, verify)
        if fast is not None:  # only where the damage is in bytes no check covers (a hash field unverified)
            assert fast[1] == _expected(records, group, c)
            assert fast == _general(bytes(damaged), begin, end, verify)
        if verify and begin <= at < end:
            assert fast is None  # with verify every byte of a chunk is covered by a hash or a check


def test_the_reader_reads_large_chunks_in_c_and_names_a_corrupt_one(tmp_path: Any) -> None:
    records = [os.urandom(5_000 + i) for i in range(600)]
    path = str(tmp_path / "g.array_record")
    write_native(path, records, "group_size:100,zstd:3")
    reader = RangeReader([RemoteObject(path, os.path.getsize(path))], None, RemoteReadOptions())
    keys = [599, 0, 250, 251, 100, 7]
    assert reader.read([(0, k) for k in keys]) == [records[k] for k in keys]
    # a byte of the third chunk's values changed on disk: no record of that chunk is returned
    _, begins, ends, _ = _file(str(tmp_path), records, "group_size:100,zstd:3")
    with open(path, "rb") as f:
        damaged = bytearray(f.read())
    damaged[(begins[2] + ends[2]) // 2] ^= 0x40
    bad = str(tmp_path / "bad.array_record")
    with open(bad, "wb") as f:
        f.write(damaged)
    reader = RangeReader([RemoteObject(bad, os.path.getsize(bad))], None, RemoteReadOptions())
    assert reader.read([(0, 5)]) == [records[5]]
    with pytest.raises(CorruptSourceError, match=r"records 200\.\.299"):
        reader.read([(0, 250)])


@pytest.mark.parametrize("options", ["zstd:3", "uncompressed"])
def test_each_field_of_a_block_header_inside_a_chunk_is_checked(tmp_path: Any, options: str) -> None:
    records = [os.urandom(40_000) for _ in range(8)]
    data, begins, ends, _ = _file(str(tmp_path), records, f"group_size:4,{options}")
    begin, end = begins[0], ends[0]
    boundaries = range(begin + (-begin) % BLOCK_SIZE, end, BLOCK_SIZE)
    assert len(boundaries) >= 2
    for block in boundaries:
        for field, covered_without_verify in ((0, False), (8, True), (16, True)):  # hash, previous, following
            damaged = bytearray(data)
            damaged[block + field + 3] ^= 0x10
            for verify in (True, False):
                fast = chunk_records(bytes(damaged), 0, begin, end, verify)
                general = _general(bytes(damaged), begin, end, verify)
                if verify or covered_without_verify:
                    assert fast is None and general is FormatError, (block, field, verify)
                else:  # an unverified hash: both read the (intact) records
                    assert fast == general and fast is not None and fast[1] == _expected(records, 4, 0)
