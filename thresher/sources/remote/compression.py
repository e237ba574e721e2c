"""Decompressing Riegeli buffers: none, zstd, brotli and snappy (through ``cramjam``).

A compressed buffer starts with its decompressed size as a varint; the rest is one zstd
frame, one brotli stream or one raw snappy block. ``cramjam`` (the ``remote`` extra)
holds all three codecs in one wheel and releases the GIL while it works, so chunks are
decompressed in parallel by the reader's threads.

Example:
    >>> decompress(0, b"plain bytes")
    b'plain bytes'
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from thresher._optional import require
from thresher.sources.remote.varint import FormatError, read_varint

__all__ = ["COMPRESSIONS", "decompress"]

NONE, BROTLI, ZSTD, SNAPPY = 0, 0x62, 0x7A, 0x73
COMPRESSIONS = {NONE: "none", BROTLI: "brotli", ZSTD: "zstd", SNAPPY: "snappy"}


def _cramjam() -> ModuleType:
    return require("cramjam", "reading compressed ArrayRecord chunks over byte ranges")


def decompress(compression: int, buf: bytes) -> bytes:
    """The decompressed bytes of one Riegeli buffer (``compression`` is the type byte)."""
    if compression == NONE:
        return bytes(buf)
    if compression not in COMPRESSIONS:
        raise FormatError(f"unknown compression type {compression:#x}")
    if len(buf) == 0:
        return b""
    size, pos = read_varint(buf, 0)
    payload = bytes(buf[pos:])
    cj: Any = _cramjam()
    try:
        if compression == ZSTD:
            out = cj.zstd.decompress(payload, output_len=size)
        elif compression == BROTLI:
            out = cj.brotli.decompress(payload, output_len=size)
        else:
            out = cj.snappy.decompress_raw(payload, output_len=size)
    except Exception as e:  # cramjam raises its own DecompressionError
        raise FormatError(f"{COMPRESSIONS[compression]} data does not decompress: {e}") from None
    data = bytes(out)
    if len(data) != size:
        raise FormatError(f"{COMPRESSIONS[compression]} data decompresses to {len(data)} bytes, "
                          f"its prefix says {size}")
    return data
