"""Protobuf-style varints, one at a time or a whole buffer at once, and FormatError.

Example:
    >>> decode_varints(bytes([1, 0x96, 0x01, 0])).tolist(), read_varint(bytes([0x96, 0x01]), 0)
    ([1, 150, 0], (150, 2))
"""

from __future__ import annotations

import numpy as np

__all__ = ["FormatError", "decode_varints", "encode_varint", "read_varint"]


class FormatError(ValueError):
    """Bytes that are not a well-formed ArrayRecord/Riegeli structure (internal; the
    reader re-raises it as CorruptSourceError naming the URL)."""


def decode_varints(buf: bytes) -> np.ndarray:
    """All the varints packed in ``buf``, as uint64 (vectorised)."""
    b = np.frombuffer(buf, dtype=np.uint8)
    if b.size == 0:
        return np.zeros(0, dtype=np.uint64)
    if b[-1] & 0x80:
        raise FormatError("a varint runs past the end of its buffer")
    ends = np.flatnonzero(b < 0x80)
    starts = np.concatenate([[0], ends[:-1] + 1])
    lengths = ends - starts + 1
    if int(lengths.max()) > 10:
        raise FormatError("a varint is longer than 10 bytes")
    owner = np.repeat(np.arange(ends.size), lengths)
    shifts = ((np.arange(b.size) - starts[owner]) * 7).astype(np.uint64)
    return np.bitwise_or.reduceat((b & 0x7F).astype(np.uint64) << shifts, starts)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The varint at ``buf[pos:]`` and the position after it."""
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise FormatError("a varint runs past the end of its buffer")
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def encode_varint(value: int) -> bytes:
    """``value`` (>= 0) as a varint of the fewest bytes, as Riegeli writes one.

    Example:
        >>> encode_varint(300), read_varint(encode_varint(300), 0)
        (b'\\xac\\x02', (300, 2))
    """
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
