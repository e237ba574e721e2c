"""Reading TFRecord files without TensorFlow, checking each record's masked CRC32C.

A TFRecord file is a sequence of ``uint64 length | uint32 masked_crc32c(length) |
data | uint32 masked_crc32c(data)`` (little-endian), where
``masked(c) = ((c >> 15 | c << 17) + 0xa282ead8) mod 2**32`` and CRC32C is the
Castagnoli CRC. Both CRCs are checked, so a truncated or corrupted shard is an error
naming the file and the record, never wrong data. The CRC uses ``google_crc32c`` or
``crc32c`` when one is installed (C speed) and a table-driven pure-Python version
otherwise (a few MB/s; ``verify=False`` skips the data CRC).

Example:
    >>> import io
    >>> from thresher.sources.formats.tfrecord.framing import frame_record, read_records
    >>> data = frame_record(b"hello") + frame_record(b"")
    >>> list(read_records(io.BytesIO(data), "mem"))
    [b'hello', b'']
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import IO

from thresher.errors import CorruptSourceError

__all__ = ["crc32c", "crc32c_function", "frame_record", "mask", "masked_crc", "read_records"]

_POLY = 0x82F63B78
_TABLE: list[int] = []
_FAST: Callable[[bytes], int] | None = None
_LOOKED = False


def _table() -> list[int]:
    if not _TABLE:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ _POLY if c & 1 else c >> 1
            _TABLE.append(c)
    return _TABLE


def _fast() -> Callable[[bytes], int] | None:
    global _FAST, _LOOKED
    if not _LOOKED:
        _LOOKED = True
        try:
            import google_crc32c

            _FAST = google_crc32c.value
        except ImportError:
            try:
                import crc32c as crc_mod

                _FAST = crc_mod.crc32c
            except ImportError:
                _FAST = None
    return _FAST


def crc32c(data: bytes) -> int:
    """The CRC32C (Castagnoli) of ``data``.

    Example:
        >>> hex(crc32c(b"123456789"))
        '0xe3069283'
    """
    fast = _fast()
    if fast is not None:
        return int(fast(data))
    table = _table()
    c = 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def crc32c_function() -> Callable[[bytes], int]:
    """The fastest CRC32C available here, as a function of bytes (for loops over many records).

    Example:
        >>> hex(crc32c_function()(b"123456789"))
        '0xe3069283'
    """
    fast = _fast()
    return fast if fast is not None else crc32c


def mask(crc: int) -> int:
    """TFRecord's masking of a CRC32C value."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC32C of ``data``."""
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """``data`` framed as one TFRecord record (for tests and tools)."""
    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", masked_crc(head)) + data + struct.pack("<I", masked_crc(data))


def read_records(f: IO[bytes], name: str, verify: bool = True) -> Iterator[bytes]:
    """The records of a TFRecord stream; CorruptSourceError names ``name`` and the record."""
    index = 0
    while True:
        head = f.read(12)
        if not head:
            return
        if len(head) < 12:
            raise CorruptSourceError(f"{name}: record {index} is truncated (the file ends inside "
                                     "its length header)")
        length, head_crc = struct.unpack("<QI", head)
        if masked_crc(head[:8]) != head_crc:
            raise CorruptSourceError(f"{name}: record {index} has a bad length checksum: the "
                                     "file is corrupt or is not a TFRecord file")
        data = f.read(length)
        tail = f.read(4)
        if len(data) < length or len(tail) < 4:
            raise CorruptSourceError(f"{name}: record {index} is truncated ({len(data)} of "
                                     f"{length} bytes): the file was cut short")
        if verify and masked_crc(data) != struct.unpack("<I", tail)[0]:
            raise CorruptSourceError(f"{name}: record {index} has a bad data checksum: the file "
                                     "is corrupt")
        yield data
        index += 1
