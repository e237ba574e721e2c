"""The Riegeli/records layout of an ArrayRecord file, decoded from bytes in memory.

Written from Riegeli's file format description and ArrayRecord's ``layout.proto``:

- The file is a sequence of chunks. At every multiple of 64 KiB a 24-byte *block
  header* interrupts whatever chunk is there (even inside its 40-byte chunk header);
  a chunk that starts on a block boundary starts with that block header.
- A chunk is a 40-byte header (hashes, ``data_size``, type, ``num_records``,
  ``decoded_data_size``) followed by ``data_size`` bytes of data and padding.
- A *simple* chunk (type ``'r'``) holds a compression byte, the compressed record sizes
  (varints) and the compressed concatenated records. Each compressed buffer is
  prefixed by its decompressed size as a varint.
- An ArrayRecord file ends with a 64 KiB block holding the *postscript* chunk: one
  record (repeated) with the footer's offset and a magic number. The *footer* chunk
  holds a metadata record, then one record per data chunk with its offset and record
  count. Data chunk ``i`` holds keys ``[i * g, (i + 1) * g)`` (``g`` = group size) and
  ends where chunk ``i + 1`` (or the footer) begins.

Hashes: every block header and chunk header carries a 64-bit HighwayHash of its other
fields, and every chunk header the HighwayHash of the chunk's data. :func:`read_chunk`
verifies the data hash of every chunk it returns (``highway``: in C, about 1 GB/s) and the
header hashes (``verify=False`` skips those). Every structural field is checked against
every other one too (block headers point at the chunk that contains them, sizes add up,
record counts match the footer, compressed buffers decode to their stated sizes), so a
truncated, shifted, foreign or damaged object is refused rather than misread.

Example:
    >>> add_with_overhead(0, 40), add_with_overhead(64, 40)
    (64, 104)
"""

from __future__ import annotations

import dataclasses
import itertools
import struct
from typing import Any

import numpy as np

from thresher.sources.remote.compression import NONE, ZSTD, decompress, zstd_decompress, zstd_decompressor
from thresher.sources.remote.highway import highway_hash64, native_module
from thresher.sources.remote.varint import FormatError, decode_varints, encode_varint, read_varint

__all__ = [
    "ARRAY_RECORD_MAGIC",
    "BLOCK_SIZE",
    "ChunkHeader",
    "FileIndex",
    "FormatError",
    "add_with_overhead",
    "check_data_hash",
    "decode_varints",
    "parse_footer",
    "parse_postscript",
    "read_chunk",
    "simple_chunk_records",
    "small_chunk_records",
    "small_chunks_records",
]

BLOCK_SIZE = 1 << 16
BLOCK_HEADER_SIZE = 24
USABLE_BLOCK_SIZE = BLOCK_SIZE - BLOCK_HEADER_SIZE
CHUNK_HEADER_SIZE = 40
ARRAY_RECORD_MAGIC = 0x71930E704FDAE05E
SIMPLE_CHUNK = 0x72  # 'r'
TRANSPOSED_CHUNK = 0x74  # 't'
_HEADER = struct.Struct("<QQQQQ")
_BLOCK = struct.Struct("<QQQ")


def add_with_overhead(pos: int, size: int) -> int:
    """The position after ``size`` logical bytes written from ``pos`` (block headers added)."""
    blocks = (size + (pos + USABLE_BLOCK_SIZE - 1) % BLOCK_SIZE) // USABLE_BLOCK_SIZE
    return pos + size + blocks * BLOCK_HEADER_SIZE


def _round_up_to_chunk_boundary(pos: int) -> int:
    remaining = (-pos) % BLOCK_SIZE
    return pos + max(remaining - (USABLE_BLOCK_SIZE - 1), 0)


@dataclasses.dataclass(frozen=True)
class ChunkHeader:
    """The fields of a chunk header (its own hash verified; ``data_hash``: of the data)."""

    data_size: int
    chunk_type: int
    num_records: int
    decoded_data_size: int
    data_hash: int = 0

    def end(self, begin: int) -> int:
        """Where the chunk beginning at ``begin`` ends (after its padding)."""
        return max(add_with_overhead(begin, CHUNK_HEADER_SIZE + self.data_size),
                   _round_up_to_chunk_boundary(begin + self.num_records))


def _logical(buf: memoryview, base: int, pos: int, size: int) -> bytes:
    """``size`` bytes of chunk content from physical position ``pos``, block headers
    skipped; ``buf`` holds the file's bytes from position ``base``."""
    parts = []
    while size > 0:
        if pos % BLOCK_SIZE == 0:
            pos += BLOCK_HEADER_SIZE
        n = min(size, BLOCK_SIZE - pos % BLOCK_SIZE)
        lo = pos - base
        if lo < 0 or lo + n > len(buf):
            raise FormatError(f"the chunk continues past the bytes read (position {pos + n}): "
                              "the object is truncated or the offset is wrong")
        parts.append(buf[lo:lo + n])
        pos += n
        size -= n
    return b"".join(parts)


def _check_block_headers(buf: memoryview, base: int, begin: int, end: int, verify: bool) -> None:
    block = begin + (-begin) % BLOCK_SIZE
    while block < end:
        lo = block - base
        if lo + BLOCK_HEADER_SIZE > len(buf):
            raise FormatError(f"block header at {block} lies past the bytes read")
        stored, previous, following = _BLOCK.unpack_from(buf, lo)
        if verify and stored != highway_hash64(buf[lo + 8:lo + BLOCK_HEADER_SIZE]):
            raise FormatError(f"the block header at {block} does not match its hash: the file is "
                              "corrupt or not a Riegeli file")
        if previous != block - begin or following != end - block:
            raise FormatError(f"block header at {block} does not belong to the chunk at {begin} "
                              f"(it says the chunk starts {previous} bytes and ends {following} "
                              "bytes away): the file is corrupt or not a Riegeli file")
        block += BLOCK_SIZE


def read_chunk(buf: bytes | memoryview, base: int, begin: int,
               limit: int | None = None, verify: bool = True) -> tuple[ChunkHeader, memoryview]:
    """The header and data (a read-only view) of the chunk at physical position ``begin``.

    ``buf`` holds the file's bytes from position ``base``; ``limit``, if given, is where the
    chunk must end at the latest (the next chunk's offset); ``verify`` checks the hashes of
    the chunk header and of the block headers inside the chunk. The hash of the data is
    always checked: a FormatError says "chunk data hash mismatch" when it differs.
    """
    view = memoryview(buf)
    raw = _logical(view, base, begin, CHUNK_HEADER_SIZE)
    stored, data_size, data_hash, type_and_count, decoded_size = _HEADER.unpack(raw)
    if verify and stored != highway_hash64(raw[8:]):
        raise FormatError(f"the chunk header at {begin} does not match its hash: the file is "
                          "corrupt, not ArrayRecord, or the offset is wrong")
    header = ChunkHeader(data_size, type_and_count & 0xFF, type_and_count >> 8, decoded_size, data_hash)
    end = header.end(begin)
    if limit is not None and end > limit:
        raise FormatError(f"the chunk at {begin} claims {data_size} data bytes, which run past "
                          f"its end at {limit}: the file is truncated, corrupt or not ArrayRecord")
    _check_block_headers(view, base, begin, end, verify)
    data = memoryview(_logical(view, base, begin, CHUNK_HEADER_SIZE + data_size))[CHUNK_HEADER_SIZE:]
    check_data_hash(data, data_hash, begin)  # a view: a 64 MiB chunk is not copied once more
    return header, data


def check_data_hash(data: bytes | memoryview, expected: int, begin: int) -> None:
    """FormatError ("chunk data hash mismatch") unless ``data``, the data of the chunk at
    ``begin``, has the HighwayHash ``expected``."""
    if highway_hash64(data) != expected:
        raise FormatError(f"chunk data hash mismatch: the {len(data)} data bytes of the chunk at {begin} do "
                          "not match the hash in its header (the file is corrupt, or the bytes were damaged "
                          "on their way)")


def _sizes(buf: bytes, count: int) -> list[int]:
    if count > 64:
        return decode_varints(buf).tolist()
    out, pos = [], 0
    while pos < len(buf):
        value, pos = read_varint(buf, pos)
        out.append(value)
    return out


def simple_chunk_records(header: ChunkHeader, data: bytes | memoryview) -> tuple[list[int], bytes]:
    """The record boundaries (``num_records + 1`` offsets) and the concatenated records."""
    data = memoryview(data)  # slices below are views, not copies of the chunk's data
    if header.chunk_type == TRANSPOSED_CHUNK:
        raise FormatError("the chunk is transposed (written with 'transpose:true'), which the "
                          "byte-range reader does not decode; rewrite the file without transpose")
    if header.chunk_type != SIMPLE_CHUNK:
        raise FormatError(f"chunk type {header.chunk_type:#x} is not a simple chunk of records")
    if not data:
        raise FormatError("a simple chunk has no data")
    compression = data[0]
    sizes_len, pos = read_varint(data, 1)
    if pos + sizes_len > len(data):
        raise FormatError("the record sizes of a chunk run past its data")
    sizes = _sizes(decompress(compression, data[pos:pos + sizes_len]), header.num_records)
    values = decompress(compression, data[pos + sizes_len:])
    bounds = [0, *itertools.accumulate(sizes)]
    if len(sizes) != header.num_records or bounds[-1] != header.decoded_data_size \
            or len(values) != header.decoded_data_size:
        raise FormatError(f"a chunk says it holds {header.num_records} records of "
                          f"{header.decoded_data_size} bytes but decodes to {len(sizes)} records "
                          f"of {len(values)} bytes")
    return bounds, values


def chunk_records(buf: bytes | memoryview, base: int, begin: int, limit: int,
                  verify: bool = True) -> tuple[list[int], bytes] | None:
    """:func:`read_chunk` and :func:`simple_chunk_records` at once, in C, for a simple chunk whose
    values are uncompressed or one zstd frame of stored blocks (incompressible records: JPEG,
    audio, random bytes): ``(bounds, values)``, the values copied once from ``buf`` (not
    joined into one buffer, then decompressed into another). None where the general path must
    decide: a compressed block, another compression, any failed check, no C module.

    It checks what the general path checks: the chunk header's hash (with ``verify``), each
    block header inside the chunk (its hash with ``verify``, and where it says the chunk starts
    and ends), the chunk's end against ``limit``, the data hash, and the sizes against the header.
    The record count (``len(bounds) - 1``) is left to the caller, as :func:`simple_chunk_records`
    leaves it.

    Example:
        >>> chunk_records(b"", 0, 0, 64) is None   # no chunk there
        True
    """
    module = native_module()
    if module is None or not hasattr(module, "chunk_records"):  # a module built from an older source
        return None
    made = module.chunk_records(buf, base, begin, limit, verify)
    if made is None:
        return None
    count, sizes_buf, framed, values = made
    try:
        sizes = _sizes(decompress(ZSTD, sizes_buf) if framed else sizes_buf, count)
    except Exception:  # a frame or varint that does not decode, or no zstandard: the general path names it
        return None
    bounds = [0, *itertools.accumulate(sizes)]
    if len(sizes) != count or bounds[-1] != len(values):
        return None
    return bounds, values


def small_chunk_records(buf: bytes | memoryview, base: int, begin: int, limit: int,
                        verify: bool = True) -> tuple[list[int], bytes, int] | None:
    """:func:`read_chunk` and :func:`simple_chunk_records` at once for a chunk of one record
    within one 64 KiB block (a file of group_size 1): ``(bounds, values, num_records)``, or
    None whenever the general path must decide (another layout, another compression, and any
    check that fails: the general path then raises the error that names it).

    It checks what the general path checks (the hashes, the chunk's end against ``limit``,
    its type, the sizes against the header), with fewer calls: at group_size 1 a chunk per
    record is read.

    Example:
        >>> small_chunk_records(b"", 0, 0, 64) is None   # a chunk at a block boundary: the general path
        True
    """
    offset = begin % BLOCK_SIZE
    lo = begin - base
    if not offset or lo < 0 or offset + (limit - begin) > BLOCK_SIZE or limit - base > len(buf):
        return None  # a block header may lie inside, or the bytes are not all there
    stored, data_size, data_hash, type_and_count, decoded_size = _HEADER.unpack_from(buf, lo)
    view = memoryview(buf)
    start = lo + CHUNK_HEADER_SIZE
    if (type_and_count & 0xFF != SIMPLE_CHUNK or type_and_count >> 8 != 1 or data_size < 3
            or max(add_with_overhead(begin, CHUNK_HEADER_SIZE + data_size),
                   _round_up_to_chunk_boundary(begin + 1)) > limit):  # ChunkHeader.end, as read_chunk checks
        return None
    if verify and stored != highway_hash64(view[lo + 8:start]):
        return None
    data = view[start:start + data_size]
    if highway_hash64(data) != data_hash:
        return None
    compression, sizes_len = data[0], data[1]
    if sizes_len >= 0x80 or 2 + sizes_len > data_size:
        return None
    try:
        if compression == ZSTD:
            sizes_size = data[2]
            values_size, pos = read_varint(data, 2 + sizes_len)
            if sizes_size >= 0x80 or not sizes_size or not values_size:
                return None
            sizes = zstd_decompress(data[3:2 + sizes_len], sizes_size)
            values = zstd_decompress(data[pos:], values_size)
        elif compression == NONE:
            sizes = bytes(data[2:2 + sizes_len])
            values = bytes(data[2 + sizes_len:])
        else:
            return None
        size, used = read_varint(sizes, 0)
    except Exception:  # a frame that does not decode (zstandard's ZstdError is not a ValueError), a
        return None  # missing library: the general path raises the error that names either
    if used != len(sizes) or size != decoded_size or len(values) != decoded_size:
        return None
    return [0, size], values, 1


def small_chunks_records(buf: bytes, base: int, begins: np.ndarray, limits: np.ndarray,
                         verify: bool = True) -> list[tuple[list[int], bytes] | None] | None:
    """:func:`small_chunk_records` for many chunks of one record at once (the chunks of a block
    of a group_size-1 file, fetched in one range request): per chunk ``(bounds, values)``, or
    None where the general path must decide. None for all when the C module is missing.

    The hashes and the structure of every chunk are checked in C in one call, without the
    GIL; only the zstd buffers are decompressed one by one. A chunk gets a value only if it
    passes every check :func:`small_chunk_records` makes, and the value is the same.

    Example:
        >>> import numpy as np
        >>> small_chunks_records(b"", 0, np.zeros(0, np.int64), np.zeros(0, np.int64)) in ([], None)
        True
    """
    module = native_module()
    if module is None or not hasattr(module, "small_chunks"):  # a module built from an older source
        return None
    items = module.small_chunks(buf, base, np.ascontiguousarray(begins, np.int64).tobytes(),
                                np.ascontiguousarray(limits, np.int64).tobytes(), verify)
    view = memoryview(buf)
    unzstd = None
    canonical: dict[int, bytes] = {}  # a size -> its varint
    out: list[tuple[list[int], bytes] | None] = []
    for item in items:
        if item is None or item.__class__ is bytes:  # left to the general path, or made and checked in C
            out.append(item if item is None else ([0, len(item)], item))
            continue
        s0, s1, v0, v1, sizes_size, values_size = item
        try:
            if unzstd is None:
                unzstd = zstd_decompressor()
            sizes = unzstd.decompress(view[s0:s1], max_output_size=sizes_size)
            values = unzstd.decompress(view[v0:v1], max_output_size=values_size)
        except Exception:  # a frame that does not decode, or no zstandard: the general path names it
            out.append(None)
            continue
        # values_size is the header's decoded size (checked in C); a varint written with more
        # bytes than needed is left to the general path, which reads it
        expected = canonical.get(values_size)
        if expected is None:
            expected = canonical[values_size] = encode_varint(values_size)
        if len(values) != values_size or len(sizes) != sizes_size or sizes != expected:
            out.append(None)
            continue
        out.append(([0, values_size], values))
    return out


def _fields(message: bytes) -> dict[int, Any]:
    """The fields of a small protobuf message: varints as int, length-delimited as bytes."""
    out: dict[int, Any] = {}
    pos = 0
    while pos < len(message):
        tag, pos = read_varint(message, pos)
        kind = tag & 7
        if kind == 0:
            out[tag >> 3], pos = read_varint(message, pos)
        elif kind == 2:
            size, pos = read_varint(message, pos)
            out[tag >> 3] = message[pos:pos + size]
            pos += size
        elif kind in (1, 5):
            pos += 8 if kind == 1 else 4
        else:
            raise FormatError(f"unexpected protobuf wire type {kind}")
    if pos != len(message):
        raise FormatError("a protobuf message runs past its record")
    return out


def parse_postscript(buf: bytes, base: int) -> int:
    """The footer offset stored in the postscript chunk at ``base`` (the last 64 KiB)."""
    header, data = read_chunk(buf, base, base)
    bounds, values = simple_chunk_records(header, data)
    if header.num_records < 1:
        raise FormatError("the postscript chunk holds no record")
    fields = _fields(values[:int(bounds[1])])
    if fields.get(2) != ARRAY_RECORD_MAGIC or 1 not in fields:
        raise FormatError("the last 64 KiB hold no ArrayRecord postscript (wrong magic number)")
    return int(fields[1])


@dataclasses.dataclass(frozen=True)
class FileIndex:
    """Where each chunk of an ArrayRecord file lies: what the footer says.

    ``chunk_offsets[i]`` is where chunk ``i`` begins; it ends at ``chunk_offsets[i + 1]``
    (the last one at ``footer_offset``). Chunk ``i`` holds keys ``[i * group_size, ...)``.
    """

    size: int
    footer_offset: int
    num_records: int
    group_size: int
    chunk_offsets: np.ndarray

    def chunk_ends(self) -> np.ndarray:
        """Where each chunk ends (made once: every request of a read looks it up)."""
        ends = self.__dict__.get("_ends")
        if ends is None:
            ends = np.append(self.chunk_offsets[1:], self.footer_offset).astype(np.int64)
            ends.flags.writeable = False  # shared by every reader of this index
            self.__dict__["_ends"] = ends
        return ends


def parse_footer(buf: bytes, footer_offset: int, size: int) -> FileIndex:
    """The FileIndex from the footer chunk (``buf`` = bytes ``[footer_offset, size - 64 KiB)``)."""
    header, data = read_chunk(buf, footer_offset, footer_offset, size - BLOCK_SIZE)
    bounds, values = simple_chunk_records(header, data)
    if header.num_records < 1:
        raise FormatError("the footer holds no metadata record")
    meta = _fields(values[:int(bounds[1])]).get(1)
    if not isinstance(meta, bytes):
        raise FormatError("the footer metadata is not ArrayRecord metadata")
    fields = _fields(meta)
    if fields.get(1) != 1:
        raise FormatError(f"unsupported ArrayRecord version {fields.get(1)!r} (this reads 1)")
    num_chunks, num_records = int(fields.get(2, 0)), int(fields.get(3, 0))
    if header.num_records != num_chunks + 1:
        raise FormatError(f"the footer lists {header.num_records - 1} chunks, its metadata "
                          f"says {num_chunks}")
    if num_chunks == 0:
        if num_records:
            raise FormatError(f"the footer lists no chunk for {num_records} records")
        return FileIndex(size, footer_offset, 0, 1, np.zeros(0, dtype=np.int64))
    body = values[int(bounds[1]):]
    numbers = decode_varints(body)
    tags, vals = numbers[0::2], numbers[1::2]
    if numbers.size % 2 or np.any(tags & 7):
        raise FormatError("footer entries have fields of an unexpected type")
    # Which entry each (tag, value) pair belongs to, from the byte offset of its tag.
    ends = np.flatnonzero(np.frombuffer(body, dtype=np.uint8) < 0x80)
    tag_starts = np.concatenate([[0], ends[:-1] + 1])[0::2]
    entry = np.searchsorted(np.asarray(bounds[2:], np.int64) - bounds[1], tag_starts, side="right")
    offsets = _one_per_entry(tags, vals, entry, 1, num_chunks, "chunk_offset")
    counts = _one_per_entry(tags, vals, entry, 3, num_chunks, "num_records")
    group = int(counts[0])
    expected = np.minimum(group, num_records - group * np.arange(num_chunks))
    if group < 1 or not np.array_equal(counts, expected) or np.any(np.diff(offsets) <= 0) \
            or int(offsets[-1]) >= footer_offset:
        raise FormatError(f"the footer's {num_chunks} chunks do not hold {num_records} records "
                          f"in groups of {group} at increasing offsets")
    return FileIndex(size, footer_offset, num_records, group, offsets)


def _one_per_entry(tags: np.ndarray, vals: np.ndarray, entry: np.ndarray, field: int,
                   count: int, name: str) -> np.ndarray:
    hit = tags == (field << 3)
    if not np.array_equal(entry[hit], np.arange(count)):
        raise FormatError(f"footer entries do not each have one {name}")
    return vals[hit].astype(np.int64)
