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

import struct
from typing import IO

import numpy as np

from thresher.errors import CorruptSourceError
from thresher.sources.formats.tfrecord.framing import masked_crc

__all__ = ["INDEX_KIND", "INDEX_VERSION", "check_record", "scan_offsets"]

INDEX_KIND = "tfrecord"
INDEX_VERSION = 1
_HEAD = struct.Struct("<QI")
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
        if masked_crc(head[:8]) != head_crc:
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
        data = buf[pos + _HEAD.size:end - 4]
        if masked_crc(data) != struct.unpack_from("<I", buf, end - 4)[0]:
            raise CorruptSourceError(f"{name}: record {len(offsets)} at byte {offset} has a bad data "
                                     "checksum: the file is corrupt")
        offsets.append(offset)
        pos = end
    return np.asarray(offsets, dtype=np.int64)


def check_record(blob: bytes, name: str, index: int, offset: int) -> bytes:
    """The data of a framed record read at ``offset``, after checking its length and both CRCs."""
    length = len(blob) - 16
    head = blob[:_HEAD.size]
    got_length, head_crc = _HEAD.unpack(head) if len(head) == _HEAD.size else (-1, 0)
    if got_length != length or masked_crc(head[:8]) != head_crc:
        raise CorruptSourceError(
            f"{name}: record {index} at byte {offset} is not where its index says (the file changed "
            "after it was indexed, or is corrupt); make the source again to rebuild the index")
    data = blob[_HEAD.size:-4]
    if masked_crc(data) != struct.unpack_from("<I", blob, len(blob) - 4)[0]:
        raise CorruptSourceError(f"{name}: record {index} at byte {offset} has a bad data checksum: "
                                 "the file is corrupt")
    return data
