"""Decompressing Riegeli buffers: none, zstd, brotli and snappy (through ``cramjam``).

A compressed buffer starts with its decompressed size as a varint; the rest is one zstd
frame, one brotli stream or one raw snappy block. zstd (ArrayRecord's default) is
decompressed by ``zstandard`` with one decompression context per thread, reused: cramjam
makes a new context per call, about 16 us, which at group_size 1 is most of a record's read.
``cramjam`` decodes brotli and snappy. Both are in the ``remote`` extra and release the GIL
while they work, so chunks are decompressed in parallel by the reader's threads.

Example:
    >>> decompress(0, b"plain bytes")
    b'plain bytes'
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

from thresher._optional import require
from thresher.sources.remote.varint import FormatError, read_varint

__all__ = ["COMPRESSIONS", "decompress", "zstd_decompress", "zstd_decompressor"]

NONE, BROTLI, ZSTD, SNAPPY = 0, 0x62, 0x7A, 0x73
COMPRESSIONS = {NONE: "none", BROTLI: "brotli", ZSTD: "zstd", SNAPPY: "snappy"}


_MODULES: dict[str, ModuleType] = {}
_ZSTD = threading.local()  # each thread's zstandard.ZstdDecompressor (not thread-safe, cheap to reuse)


def _module(name: str) -> ModuleType:
    module = _MODULES.get(name)
    if module is None:
        module = _MODULES[name] = require(name, "reading compressed ArrayRecord chunks over byte ranges")
    return module


def zstd_decompressor() -> Any:
    """This thread's ``zstandard.ZstdDecompressor`` (MissingExtraError without the library)."""
    d = getattr(_ZSTD, "d", None)
    if d is None:
        d = _ZSTD.d = _module("zstandard").ZstdDecompressor()
    return d


def _zstd(payload: bytes | memoryview, size: int) -> bytes:
    d = zstd_decompressor()
    if size == 0:  # a frame without its content size: max_output_size=0 would mean "unknown"
        empty: bytes = d.decompressobj().decompress(payload)
        return empty
    out: bytes = d.decompress(payload, max_output_size=size)
    return out


def zstd_decompress(payload: bytes | memoryview, size: int) -> bytes:
    """One zstd frame that decompresses to ``size`` (> 0) bytes: exactly that many, or an error
    (zstandard's, a ValueError, or FormatError when the length differs)."""
    out = _zstd(payload, size)
    if len(out) != size:
        raise FormatError(f"zstd data decompresses to {len(out)} bytes, its prefix says {size}")
    return out


def decompress(compression: int, buf: bytes | memoryview) -> bytes:
    """The decompressed bytes of one Riegeli buffer (``compression`` is the type byte)."""
    if compression == NONE:
        return bytes(buf)
    if compression not in COMPRESSIONS:
        raise FormatError(f"unknown compression type {compression:#x}")
    if len(buf) == 0:
        return b""
    size, pos = read_varint(buf, 0)
    payload = memoryview(buf)[pos:]  # not copied: the libraries read any buffer
    # the library first, outside the try: a missing one is a MissingExtraError naming the extra
    lib: Any = _module("zstandard" if compression == ZSTD else "cramjam")
    try:
        if compression == ZSTD:
            out: Any = _zstd(payload, size)
        elif compression == BROTLI:
            out = lib.brotli.decompress(payload, output_len=size)
        else:
            out = lib.snappy.decompress_raw(payload, output_len=size)
    except Exception as e:  # cramjam and zstandard raise their own errors
        raise FormatError(f"{COMPRESSIONS[compression]} data does not decompress: {e}") from None
    data = out if isinstance(out, bytes) else bytes(out)
    if len(data) != size:
        raise FormatError(f"{COMPRESSIONS[compression]} data decompresses to {len(data)} bytes, "
                          f"its prefix says {size}")
    return data
