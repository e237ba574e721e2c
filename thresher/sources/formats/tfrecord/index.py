"""The offset index of a TFRecord file, built in one pass that checks every record.

A TFRecord record is ``uint64 length | uint32 masked_crc(length) | data |
uint32 masked_crc(data)`` (:mod:`~thresher.sources.formats.tfrecord.framing`). The index is the
offset of each record's header (an int64 array); a record's length follows from the
next offset (records are packed: ``length = next - offset - 16``), so the index costs
8 bytes per record. Building it reads the whole file once, sequentially, and checks
both CRCs of every record: a file that is truncated, corrupt, compressed or not a
TFRecord file is refused with an error naming it and the byte offset.

Example:
    >>> import io
    >>> from thresher.sources.formats.tfrecord.framing import frame_record
    >>> data = frame_record(b"ab") + frame_record(b"") + frame_record(b"xyz")
    >>> scan_offsets(io.BytesIO(data), len(data), "mem").tolist()
    [0, 18, 34]
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Mapping, Sequence
from typing import IO

import numpy as np

from thresher.errors import CorruptSourceError
from thresher.sources.formats.tfrecord.framing import crc32c_function, mask

__all__ = ["INDEX_KIND", "INDEX_VERSION", "check_record", "check_records", "read_checked", "scan_offsets"]

INDEX_KIND = "tfrecord"
INDEX_VERSION = 1
_HEAD = struct.Struct("<QI")
_TAIL = struct.Struct("<I")
_BLOCK = 8 << 20


def _not_tfrecord(name: str, offset: int, head: bytes) -> CorruptSourceError:
    if offset == 0 and head[:2] == b"\x1f\x8b":
        return CorruptSourceError(
            f"{name} is gzip-compressed (a TFRecord file written with compression='GZIP'), which "
            f"has no random access: decompress it first (`gunzip -c {name} > "
            f"{name.rsplit('/', 1)[-1]}.uncompressed`) and read that")
    return CorruptSourceError(f"{name}: the record header at byte {offset} has a bad length checksum: "
                              "the file is corrupt or is not a TFRecord file")


def scan_offsets(f: IO[bytes], size: int, name: str) -> np.ndarray:
    """The header offset of every record of ``f`` (``size`` bytes), checking lengths and CRCs."""
    offsets: list[int] = []
    crc = crc32c_function()
    buf = b""
    base = 0  # file offset of buf[0]
    pos = 0  # position in buf of the next record
    while base + pos < size:
        if len(buf) - pos < _HEAD.size:
            buf, base, pos = buf[pos:] + f.read(_BLOCK), base + pos, 0
        head = buf[pos:pos + _HEAD.size]
        offset = base + pos
        if len(head) < _HEAD.size:
            raise CorruptSourceError(f"{name} is truncated: it ends inside the header of record "
                                     f"{len(offsets)} at byte {offset} (the file was cut short)")
        length, head_crc = _HEAD.unpack(head)
        if mask(crc(head[:8])) != head_crc:
            raise _not_tfrecord(name, offset, head)
        end = pos + _HEAD.size + length + 4
        if offset + _HEAD.size + length + 4 > size:
            raise CorruptSourceError(f"{name} is truncated: record {len(offsets)} at byte {offset} "
                                     f"needs {length} bytes of data, the file ends at byte {size}")
        if len(buf) < end:
            more = f.read(max(_BLOCK, end - len(buf)))
            buf, base, end, pos = buf[pos:] + more, base + pos, end - pos, 0
            if len(buf) < end:
                raise CorruptSourceError(f"{name}: record {len(offsets)} at byte {offset} could not be "
                                         "read whole (the file shrank while it was indexed)")
        if mask(crc(buf[pos + _HEAD.size:end - 4])) != _TAIL.unpack_from(buf, end - 4)[0]:
            raise CorruptSourceError(f"{name}: record {len(offsets)} at byte {offset} has a bad data "
                                     "checksum: the file is corrupt")
        offsets.append(offset)
        pos = end
    return np.asarray(offsets, dtype=np.int64)


def check_record(blob: bytes, name: str, index: int, offset: int) -> bytes:
    """The data of a framed record read at ``offset``, after checking its length and both CRCs."""
    return check_records([blob], [name], [index], [offset])[0]


def check_records(blobs: list[bytes], names: list[str], indexes: list[int], offsets: list[int]) -> list[bytes]:
    """:func:`check_record` for many records (one loop, the CRC function looked up once)."""
    crc = crc32c_function()
    head, tail = _HEAD.unpack_from, _TAIL.unpack_from
    out = []
    for i, blob in enumerate(blobs):
        n = len(blob)
        length, head_crc = head(blob, 0) if n >= 16 else (-1, 0)
        c = crc(blob[:8])
        if length != n - 16 or (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF != head_crc:
            raise CorruptSourceError(
                f"{names[i]}: record {indexes[i]} at byte {offsets[i]} is not where its index says (the file "
                "changed after it was indexed, or is corrupt); make the source again to rebuild the index")
        data = blob[12:n - 4]
        c = crc(data)
        if (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF != tail(blob, n - 4)[0]:
            raise CorruptSourceError(f"{names[i]}: record {indexes[i]} at byte {offsets[i]} has a bad data "
                                     "checksum: the file is corrupt")
        out.append(data)
    return out


def read_checked(buffers: Mapping[int, mmap.mmap | bytes], files: list[int], starts: list[int], ends: list[int],
                 file_names: Sequence[str], indexes: list[int]) -> list[bytes]:
    """The data of the records ``[starts[i], ends[i])`` of ``buffers[files[i]]`` (whole files,
    e.g. maps; ``file_names[files[i]]`` names them in errors), each checked as
    :func:`check_records` checks them; only the data is copied.

    Example:
        >>> from thresher.sources.formats.tfrecord.framing import frame_record
        >>> data = frame_record(b"ab") + frame_record(b"xyz")
        >>> read_checked({0: data}, [0, 0], [18, 0], [37, 18], ["mem"], [1, 0])
        [b'xyz', b'ab']
    """
    crc = crc32c_function()
    head, tail = _HEAD.unpack_from, _TAIL.unpack_from
    out = []
    for i, (f, start, end) in enumerate(zip(files, starts, ends, strict=True)):
        buf = buffers[f]
        if end > len(buf) or end - start < 16:
            length, head_crc, c = -1, 0, 0
        else:
            length, head_crc = head(buf, start)
            c = crc(buf[start:start + 8])
        if length != end - start - 16 or (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF != head_crc:
            raise CorruptSourceError(
                f"{file_names[f]}: record {indexes[i]} at byte {start} is not where its index says (the file "
                "changed after it was indexed, or is corrupt); make the source again to rebuild the index")
        data = buf[start + 12:end - 4]
        c = crc(data)
        if (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF != tail(buf, end - 4)[0]:
            raise CorruptSourceError(f"{file_names[f]}: record {indexes[i]} at byte {start} has a bad data "
                                     "checksum: the file is corrupt")
        out.append(data)
    return out
