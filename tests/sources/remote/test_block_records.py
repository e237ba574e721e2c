"""Blocks of one-record chunks (group_size 1) read as one cache entry each: checked in C in one call
per request (the same checks, the same records as one chunk at a time, damaged bytes never
returned), fetched once per block, and the same records through the loader for every worker mode."""

from __future__ import annotations

import os
import struct
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.sources.remote.range_server import RangeServer
from tests.sources.remote.test_small_chunks import _chunk, _file, _general
from thresher.errors import CorruptSourceError
from thresher.sources import write_array_record
from thresher.sources.remote import RemoteReadOptions
from thresher.sources.remote.chunk_cache import Block
from thresher.sources.remote.format import small_chunk_records, small_chunks_records
from thresher.sources.remote.fs import RemoteObject
from thresher.sources.remote.highway import native_module
from thresher.sources.remote.reader import RangeReader

pytestmark = pytest.mark.skipif(native_module() is None, reason="unreachable: the C module builds wherever tests run")

OPTIONS = ["", "uncompressed", "brotli", "zstd:1", "zstd:19"]

# incompressible (stored zstd blocks), compressible (compressed blocks), one repeated byte (RLE), empty
_record = st.one_of(st.binary(max_size=300), st.binary(min_size=900, max_size=3000),
                    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=1), st.integers(1, 4000)),
                    st.builds(lambda t, n: t * n, st.text(min_size=1, max_size=20).map(str.encode),
                              st.integers(1, 200)))


def _many(data: bytes, begins: list[int], ends: list[int], verify: bool, base: int = 0) -> list[Any]:
    got = small_chunks_records(data, base, np.asarray(begins, np.int64), np.asarray(ends, np.int64), verify)
    assert got is not None
    return got


@settings(max_examples=30, deadline=None)
@given(st.lists(_record, min_size=1, max_size=120), st.sampled_from(OPTIONS))
def test_a_block_decodes_as_its_chunks_one_by_one(tmp_path_factory: Any, records: list[bytes], options: str) -> None:
    data, begins, ends = _file(str(tmp_path_factory.mktemp("many")), records, options)
    for verify in (True, False):
        many = _many(data, begins, ends, verify)
        for key, (begin, end) in enumerate(zip(begins, ends, strict=True)):
            one = small_chunk_records(data, 0, begin, end, verify)
            assert (many[key] is None) == (one is None), key  # the same checks pass and fail
            assert _general(data, begin, end, verify)[1] == records[key]
            if one is not None:
                assert many[key] == (one[0], one[1]) and one[1] == records[key]
        if options != "brotli":  # left to the general path; a chunk of a record inside a 64 KiB block is not
            assert all(m is not None for m, b, e, r in zip(many, begins, ends, records, strict=True)
                       if b % 65536 and b % 65536 + e - b <= 65536 and r)
    # from another base: the buffer holds the file from its tenth chunk on
    cut = begins[min(10, len(begins) - 1)]
    shifted = _many(data[cut:], begins[10:], ends[10:], True, base=cut)
    assert shifted == _many(data, begins[10:], ends[10:], True)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["", "uncompressed", "zstd:19"]), st.integers(0, 10**7), st.integers(1, 255),
       st.booleans(), st.booleans())
def test_damaged_bytes_in_a_block_are_never_returned(tmp_path_factory: Any, options: str, where: int, xor: int,
                                                     verify: bool, compressible: bool) -> None:
    records = [(b"abc" * (i % 50 + 1)) if compressible else os.urandom(5 + (i * 37) % 900) for i in range(60)]
    data, begins, ends = _file(str(tmp_path_factory.mktemp("dmg")), records, options)
    damaged = bytearray(data)
    damaged[begins[0] + where % (ends[-1] - begins[0])] ^= xor
    many = _many(bytes(damaged), begins, ends, verify)
    for key, (begin, end) in enumerate(zip(begins, ends, strict=True)):
        general = _general(bytes(damaged), begin, end, verify)
        if many[key] is not None:
            assert general is not FormatErrorMarker and many[key][1] == general[1] == records[key]


FormatErrorMarker = _general(b"", 0, 0, True)  # what _general returns for a chunk that does not read


def test_chunks_a_faulty_writer_made_are_left_to_the_general_path() -> None:
    import zstandard

    cases = [_chunk(b"\x03\x00", b"abc", 3), _chunk(b"\x03", b"abcd", 3), _chunk(b"\x04", b"abc", 4),
             _chunk(b"\x03", b"abc", 4), _chunk(b"\x83", b"abc", 3)]
    good_sizes = b"\x01" + zstandard.ZstdCompressor().compress(b"\x03")
    good_values = b"\x03" + zstandard.ZstdCompressor().compress(b"abc")
    cases += [_chunk(s, v, 3, compression=0x7A) for s, v in [(b"\x01garbage", good_values),
                                                            (good_sizes, b"\x03garbage"),
                                                            (good_sizes, b"\x05" + good_values[1:])]]
    for buf, begin, end in cases:
        assert _general(buf, begin, end, True) is FormatErrorMarker
        assert _many(buf, [begin], [end], True) == [None]
    for sizes, values, compression in [(b"\x03", b"abc", 0), (good_sizes, good_values, 0x7A)]:
        buf, begin, end = _chunk(sizes, values, 3, compression=compression)
        assert _many(buf, [begin], [end], True) == [([0, 3], b"abc")]


def _frame(blocks: list[tuple[int, bytes]], content_size: int | None, checksum: bool = False) -> bytes:
    """A zstd frame of stored (type 0) and RLE (type 1) blocks, written by hand."""
    if content_size is None:
        head = bytes([0x04 if checksum else 0x00, 0x00])  # no content size: a window descriptor follows
    else:
        head = bytes([0x20 | (0x04 if checksum else 0), content_size]) if content_size < 256 else \
            bytes([0x60 | (0x04 if checksum else 0)]) + struct.pack("<H", content_size - 256)
    out = b"\x28\xb5\x2f\xfd" + head
    for i, (kind, payload) in enumerate(blocks):
        size = len(payload) if kind == 0 else payload[1]
        out += struct.pack("<I", size << 3 | kind << 1 | (i == len(blocks) - 1))[:3]
        out += payload if kind == 0 else payload[:1]
    return out + (b"\0\0\0\0" if checksum else b"")


@pytest.mark.parametrize("frame_of", [
    lambda v: _frame([(0, v)], len(v)),                                    # one stored block
    lambda v: _frame([(0, v[:100]), (0, v[100:])], len(v)),                # two
    lambda v: _frame([(0, v[:150]), (1, bytes([v[150], 50])), (0, v[200:])], len(v)),  # stored, RLE, stored
    lambda v: _frame([(0, v)], None),                                      # no content size
])
def test_stored_zstd_frames_are_copied_in_c_as_zstandard_would_decode_them(frame_of: Any) -> None:
    import zstandard

    values = bytes(range(150)) + b"\x07" * 50 + os.urandom(100)
    frame = frame_of(values)
    assert zstandard.ZstdDecompressor().decompressobj().decompress(frame) == values
    sizes = b"\x02" + _frame([(0, b"\xac\x02")], 2)  # varint(300)
    buf, begin, end = _chunk(sizes, b"\xac\x02" + frame, 300, compression=0x7A)
    assert _many(buf, [begin], [end], True) == [([0, 300], values)] == [_general(buf, begin, end, True)[:2]]
    for wrong in (_frame([(0, values[:-1])], len(values) - 1),  # one byte short of its prefix
                  _frame([(0, values[:-1])], None)):  # the same, without a content size
        buf, begin, end = _chunk(sizes, b"\xac\x02" + wrong, 300, compression=0x7A)
        assert _many(buf, [begin], [end], True) == [None]
        assert _general(buf, begin, end, True) is FormatErrorMarker
    # a byte after the frame: not copied in C; zstandard (both paths) reads the frame and stops
    buf, begin, end = _chunk(sizes, b"\xac\x02" + _frame([(0, values)], None) + b"\0", 300, compression=0x7A)
    assert _many(buf, [begin], [end], True) == [_general(buf, begin, end, True)[:2]]


# --- through the range reader --------------------------------------------------------------------


def _reader(tmp: str, records: list[bytes], cache_bytes: int = 64 << 20) -> tuple[RangeReader, str]:
    path = os.path.join(tmp, "g1.array_record")
    write_array_record(path, records, group_size=1)
    options = RemoteReadOptions(cache_bytes=cache_bytes, fill_cache=False)
    return RangeReader([RemoteObject(path, os.path.getsize(path))], options=options), path


def test_a_hinted_block_is_one_entry_fetched_once(tmp_path: Any) -> None:
    records = [os.urandom(int(n)) for n in np.random.default_rng(0).integers(0, 2000, 600)]
    reader, _ = _reader(str(tmp_path), records)
    reader.lengths()
    reader.upcoming_blocks([(0, 0, 299), (0, 300, 599)])
    before = reader.requests
    keys = np.random.default_rng(1).permutation(300).tolist()
    assert reader.read([(0, k) for k in keys[:64]]) == [records[k] for k in keys[:64]]
    assert reader.requests == before + 1  # the whole first block in one request
    assert reader.read([(0, k) for k in keys[64:]]) == [records[k] for k in keys[64:]]
    assert reader.requests == before + 1  # the rest of it from the cache
    cache = reader._process()["cache"]
    assert list(cache._entries) == [(0, 0, 299)] and isinstance(cache._entries[(0, 0, 299)][0], Block)
    # a batch over both blocks and a key of no hinted block: each read its way, in the batch's order
    reader.upcoming_blocks([(0, 300, 449)])  # a later hint that overlaps: the block that starts last wins
    mixed = [(0, 5), (0, 320), (0, 599), (0, 460), (0, 299)]
    assert reader.read(mixed) == [records[k] for _, k in mixed]
    assert {k for k in cache._entries if len(k) == 3} == {(0, 0, 299), (0, 300, 449)}
    assert (0, 599) in cache._entries and (0, 460) in cache._entries  # read chunk by chunk


def test_threads_reading_one_block_share_its_fetch(tmp_path: Any) -> None:
    records = [os.urandom(500) for _ in range(2000)]
    reader, _ = _reader(str(tmp_path), records)
    reader.lengths()
    reader.upcoming_blocks([(0, 0, 1999)])
    before = reader.requests
    got: dict[int, list[bytes]] = {}
    start = threading.Barrier(4)

    def read(i: int) -> None:
        keys = list(range(i, 2000, 4))
        start.wait()
        got[i] = reader.read([(0, k) for k in keys])

    threads = [threading.Thread(target=read, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(got[i] == records[i::4] for i in range(4))
    assert reader.requests == before + 1
    assert reader._process()["cache"].misses == 1


def _in_bucket(root: str, records: list[bytes]) -> str:
    """``records`` as a group_size-1 file ``blk/g1.array_record`` under ``root`` (the bucket's folder)."""
    os.makedirs(os.path.join(root, "blk"))
    path = os.path.join(root, "blk", "g1.array_record")
    write_array_record(path, records, group_size=1)
    return path


def _bucket_source(server: RangeServer, **options: Any) -> th.sources.ArrayRecordSource:
    src = th.sources.ArrayRecordSource("s3://blk/g1.array_record", storage_options=server.s3_options(),
                                       read_options=RemoteReadOptions(fill_cache=False, **options))
    len(src)
    return src


@pytest.mark.parametrize("cache_bytes", [100_000, 300_000])
def test_a_block_over_half_the_cache_is_read_chunk_by_chunk(tmp_path: Any, cache_bytes: int) -> None:
    records = [os.urandom(1000) for _ in range(400)]
    reader, _ = _reader(str(tmp_path), records, cache_bytes=cache_bytes)  # a block of 200 is 200 KB
    reader.lengths()
    reader.upcoming_blocks([(0, 0, 199), (0, 200, 399)])
    keys = np.random.default_rng(2).permutation(400).tolist()
    for i in range(0, 400, 50):
        assert reader.read([(0, k) for k in keys[i:i + 50]]) == [records[k] for k in keys[i:i + 50]]
    cache = reader._process()["cache"]
    assert all(len(k) == 2 for k in cache._entries) and 0 < cache.size <= cache_bytes


def test_bytes_damaged_on_their_way_are_fetched_again_and_a_corrupt_chunk_is_named(tmp_path: Any) -> None:
    records = [os.urandom(800) for _ in range(300)]
    root = str(tmp_path)
    path = _in_bucket(root, records)
    with open(path, "rb") as f:
        data = f.read()
    with RangeServer(root) as server:
        src = _bucket_source(server)
        assert src._ranges is not None
        server.flip_once("blk", "g1.array_record", data.find(records[123][100:200]) + 10)
        src.upcoming_blocks(np.array([0]), np.array([300]))
        assert src.__getitems__(list(range(300))) == records
        assert src._ranges.refetches == 1  # the damaged chunk, alone
    # stored damage: fetched twice, named, nothing of the batch returned
    damaged = bytearray(data)
    damaged[data.find(records[77][100:200]) + 10] ^= 1
    with open(path, "wb") as f:
        f.write(damaged)
    reader = RangeReader([RemoteObject(path, os.path.getsize(path))])
    reader.upcoming_blocks([(0, 0, 299)])
    with pytest.raises(CorruptSourceError, match=r"records 77\.\.77 of .*g1\.array_record.*chunk 77"):
        reader.read([(0, 5), (0, 200)])
    assert reader._process()["cache"]._fetching == {}  # the claim was let go: a later read tries again
    with pytest.raises(CorruptSourceError):
        reader.read([(0, 5)])


@pytest.mark.parametrize(("workers", "mode"), [(0, None), (2, "thread"), (2, "process")])
def test_a_block_shuffle_over_a_bucket_reads_each_block_once(tmp_path: Any, workers: int, mode: str | None) -> None:
    rng = np.random.default_rng(3)
    records = [rng.bytes(int(n)) for n in rng.integers(100, 1500, 3000)]
    root = str(tmp_path)
    path = _in_bucket(root, records)
    shuffle = th.BlockShuffle(block_size=500, window_blocks=2)
    with RangeServer(root) as server:
        src = _bucket_source(server, cache_bytes=4 << 20)
        server.stats(reset=True)
        sampler = th.IndexSampler(len(records), shuffle=shuffle, seed=5, num_epochs=1)
        loader = th.DataLoader(src, sampler, [th.Batch(50)], worker_count=workers, worker_mode=mode)
        got = [bytes(r) for b in loader for r in b]
        stats = server.stats()
    assert got == [records[k].rstrip(b"\0") for k in sampler.keys(np.arange(len(records))).tolist()]
    size = os.path.getsize(path)
    copies = 2 if mode == "process" else 1  # each worker process has its own cache
    assert stats["body_bytes"] <= copies * size + copies * (1 << 17)  # each block at most once (+ footers)
    assert stats["requests"] <= copies * (len(records) // 500 + 2), stats


def test_without_the_c_module_a_block_reads_chunk_by_chunk(tmp_path: Any, monkeypatch: Any) -> None:
    import thresher.sources.remote.format as fmt

    monkeypatch.setattr(fmt, "native_module", lambda: None)  # as where no compiler built it
    records = [os.urandom(int(n)) for n in np.random.default_rng(4).integers(0, 3000, 300)]
    reader, _ = _reader(str(tmp_path), records)
    reader.lengths()
    reader.upcoming_blocks([(0, 0, 299)])
    assert small_chunks_records(b"", 0, np.zeros(0, np.int64), np.zeros(0, np.int64)) is None
    keys = np.random.default_rng(5).permutation(300).tolist()
    assert reader.read([(0, k) for k in keys]) == [records[k] for k in keys]
    assert isinstance(reader._process()["cache"]._entries[(0, 0, 299)][0], Block)


def _until(condition: Any, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.01)


def test_the_next_window_is_fetched_in_the_background(tmp_path: Any) -> None:
    records = [os.urandom(500) for _ in range(1200)]
    reader, _ = _reader(str(tmp_path), records, cache_bytes=1 << 20)
    reader.lengths()
    cache = reader._process()["cache"]
    reader.prefetch_blocks([(0, 0, 299)])  # nothing read yet: its size in the cache is not known
    reader.upcoming_blocks([(0, 0, 299)])
    before = reader.requests
    assert reader.read([(0, 7)]) == [records[7]]
    # the first block read says what a block costs in the cache: the declined prefetch starts
    reader.prefetch_blocks([(0, 300, 599)])
    _until(lambda: (0, 300, 599) in cache._entries)
    assert reader.requests == before + 2
    assert reader.read([(0, k) for k in range(300, 600)]) == records[300:600]
    assert reader.requests == before + 2  # held already
    # a window over half the cache is not fetched ahead (it would push out the window being read)
    reader.prefetch_blocks([(0, 600, 1199)])
    assert reader.requests == before + 2 and (0, 600, 1199) not in cache._entries


def test_a_failed_prefetch_leaves_the_block_to_the_read(tmp_path: Any) -> None:
    records = [os.urandom(500) for _ in range(600)]
    reader, path = _reader(str(tmp_path), records)
    reader.lengths()
    reader.upcoming_blocks([(0, 0, 299)])
    assert reader.read([(0, 1)]) == [records[1]]
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[data.find(records[400][100:200]) + 10] ^= 1  # stored damage in the next block
    with open(path, "wb") as f:
        f.write(data)
    reader.prefetch_blocks([(0, 300, 599)])
    cache = reader._process()["cache"]
    _until(lambda: not cache._fetching and (0, 300, 599) not in cache._entries)
    with pytest.raises(CorruptSourceError, match=r"records 400\.\.400"):
        reader.read([(0, 350)])


def test_shards_of_a_block_shuffle_fetch_disjoint_blocks(tmp_path: Any) -> None:
    rng = np.random.default_rng(6)
    records = [rng.bytes(int(n)) for n in rng.integers(100, 1500, 4000)]
    root = str(tmp_path)
    path = _in_bucket(root, records)
    shuffle = th.BlockShuffle(block_size=250, window_blocks=2)
    seen, fetched = [], 0
    with RangeServer(root) as server:
        for shard in range(2):
            src = _bucket_source(server, cache_bytes=4 << 20)
            server.stats(reset=True)
            sampler = th.IndexSampler(len(records), shuffle=shuffle, seed=2, num_epochs=1,
                                      shard_options=th.ShardOptions(shard, 2))
            seen += [bytes(r) for b in th.DataLoader(src, sampler, [th.Batch(50)]) for r in b]
            fetched += server.stats()["body_bytes"]
            assert src._ranges is not None and src._ranges.chunks_fetched <= len(records) // 2
    assert sorted(seen) == sorted(r.rstrip(b"\0") for r in records)
    assert fetched <= os.path.getsize(path)
