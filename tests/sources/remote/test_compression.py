"""Riegeli buffers decompress to their bytes or raise FormatError: zstd with and without the frame's
content size (a context per thread, reused), empty buffers, wrong size prefixes, damaged frames."""

from __future__ import annotations

import threading

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from thresher.sources.remote.compression import ZSTD, decompress
from thresher.sources.remote.varint import FormatError


def _buffer(data: bytes, content_size: bool, prefix: int | None = None) -> bytes:
    size = len(data) if prefix is None else prefix
    varint = bytearray()
    while True:
        byte, size = size & 0x7F, size >> 7
        varint.append(byte | (0x80 if size else 0))
        if not size:
            break
    return bytes(varint) + zstandard.ZstdCompressor(write_content_size=content_size).compress(data)


@given(st.binary(max_size=3000), st.booleans())
def test_zstd_round_trips(data: bytes, content_size: bool) -> None:
    assert decompress(ZSTD, _buffer(data, content_size)) == data


def test_zstd_errors_are_format_errors() -> None:
    with pytest.raises(FormatError, match="prefix says 4"):
        decompress(ZSTD, _buffer(b"abc", True, prefix=4))
    with pytest.raises(FormatError, match="does not decompress"):
        decompress(ZSTD, b"\x03garbage")


def test_threads_decompress_at_once() -> None:
    buffers = [_buffer(bytes([i]) * (100 + i), bool(i % 2)) for i in range(64)]
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                for i, b in enumerate(buffers):
                    assert decompress(ZSTD, b) == bytes([i]) * (100 + i)
        except BaseException as e:  # noqa: BLE001 (reported by the main thread)
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
