"""HighwayHash-64, the checksum in Riegeli's block and chunk headers: in C, or in plain Python.

Written from the algorithm's description (Alakuijala, Cox, Wassenberg: "Fast keyed
hash/pseudo-random function using SIMD multiply and permute", and the portable C
version's structure): a state of four 64-bit lanes each of ``v0``, ``v1``, ``mul0``,
``mul1``; every 32-byte packet is added and mixed with 32x32-bit multiplies and a
byte "zipper merge"; a last partial packet is padded in a defined way; four
permute-and-update rounds finish it. Riegeli keys it with the bytes of
``"Riegeli/records\\n"`` twice.

:func:`highway_hash64` hashes with the same algorithm in C (``_highway.c``, built by pip
or on first use: see ``native``), about 1 GB/s, and about 12 GB/s where the CPU has AVX2 (whole
packets of inputs of 256 bytes or more; ``implementation()`` says which); Python integers (``python_hash64``) cost
about 10 µs per 32 bytes (3 MB/s), and are used only where no C module can be built, with
a warning that says why. The tests check both against the hashes in files that
array_record's own writer produced.

Example:
    >>> hex(highway_hash64(b""))  # Riegeli's key, empty input: in every chunk with no data
    '0x72c3b1e9c0139fe1'
    >>> highway_hash64(b"abc") == highway_hash64(b"abc") != highway_hash64(b"abd")
    True
"""

from __future__ import annotations

import threading
import warnings
from types import ModuleType

from thresher.sources.remote import native

__all__ = ["RIEGELI_KEY", "highway_hash64", "implementation", "native_module", "python_hash64"]

_M = (1 << 64) - 1
_M32 = (1 << 32) - 1
RIEGELI_KEY = (0x2F696C6567656952, 0x0A7364726F636572, 0x2F696C6567656952, 0x0A7364726F636572)
_INIT0 = (0xDBE6D5D5FE4CCE2F, 0xA4093822299F31D0, 0x13198A2E03707344, 0x243F6A8885A308D3)
_INIT1 = (0x3BD39E10CB0EF593, 0xC0ACF169B5F18A8C, 0xBE5466CF34E90C6C, 0x452821E638D01377)


def _zipper(v1: int, v0: int) -> tuple[int, int]:
    """The two words a 128-bit lane pair ``(v1, v0)`` adds after its bytes are interleaved."""
    add0 = ((((v0 & 0xFF000000) | (v1 & 0xFF00000000)) >> 24)
            | (((v0 & 0xFF0000000000) | (v1 & 0xFF000000000000)) >> 16)
            | (v0 & 0xFF0000) | ((v0 & 0xFF00) << 32)
            | ((v1 & 0xFF00000000000000) >> 8) | ((v0 << 56) & _M))
    add1 = ((((v1 & 0xFF000000) | (v0 & 0xFF00000000)) >> 24)
            | (v1 & 0xFF0000) | ((v1 & 0xFF0000000000) >> 16)
            | ((v1 & 0xFF00) << 24) | ((v0 & 0xFF000000000000) >> 8)
            | ((v1 & 0xFF) << 48) | (v0 & 0xFF00000000000000))
    return add1, add0


class _State:
    __slots__ = ("mul0", "mul1", "v0", "v1")

    def __init__(self, key: tuple[int, int, int, int]) -> None:
        self.mul0 = list(_INIT0)
        self.mul1 = list(_INIT1)
        self.v0 = [m ^ k for m, k in zip(_INIT0, key, strict=True)]
        self.v1 = [m ^ (((k >> 32) | (k << 32)) & _M) for m, k in zip(_INIT1, key, strict=True)]

    def update(self, lanes: list[int] | tuple[int, ...]) -> None:
        v0, v1, mul0, mul1 = self.v0, self.v1, self.mul0, self.mul1
        for i in range(4):
            v1[i] = (v1[i] + mul0[i] + lanes[i]) & _M
            mul0[i] ^= (v1[i] & _M32) * (v0[i] >> 32)
            v0[i] = (v0[i] + mul1[i]) & _M
            mul1[i] ^= (v0[i] & _M32) * (v1[i] >> 32)
        for a, b, src, dst in ((1, 0, v1, v0), (3, 2, v1, v0), (1, 0, v0, v1), (3, 2, v0, v1)):
            add1, add0 = _zipper(src[a], src[b])
            dst[a] = (dst[a] + add1) & _M
            dst[b] = (dst[b] + add0) & _M

    def remainder(self, tail: bytes) -> None:
        """The last ``len(tail)`` (1..31) bytes, padded into one packet."""
        n = len(tail)
        for i in range(4):
            self.v0[i] = (self.v0[i] + ((n << 32) + n)) & _M
        self.v1 = [(((h0 << n) | (h0 >> (32 - n))) & _M32) | ((((h1 << n) | (h1 >> (32 - n))) & _M32) << 32)
                   for h0, h1 in ((x & _M32, x >> 32) for x in self.v1)]
        packet = bytearray(32)
        whole = n & ~3
        packet[:whole] = tail[:whole]
        mod4 = n & 3
        if n & 16:
            packet[28:32] = tail[whole + mod4 - 4:whole + mod4]
        elif mod4:
            rest = tail[whole:]
            packet[16], packet[17], packet[18] = rest[0], rest[mod4 >> 1], rest[mod4 - 1]
        self.update(_lanes(bytes(packet), 0))

    def finish(self) -> int:
        for _ in range(4):
            v = self.v0
            self.update([((v[j] >> 32) | (v[j] << 32)) & _M for j in (2, 3, 0, 1)])
        return (self.v0[0] + self.v1[0] + self.mul0[0] + self.mul1[0]) & _M


def _lanes(data: bytes, pos: int) -> tuple[int, ...]:
    return tuple(int.from_bytes(data[pos + 8 * i:pos + 8 * i + 8], "little") for i in range(4))


_NATIVE: list[ModuleType | None] = []  # [module or None] once looked for, in this process
_WHERE = [""]
_WARNED: list[bool] = []  # [True] once the missing module was warned about, in this process
_LOCK = threading.Lock()


def _native(warn: bool = True) -> ModuleType | None:
    if not _NATIVE:
        with _LOCK:
            if not _NATIVE:
                module, _WHERE[0] = native.load()
                _NATIVE.append(module)
    if _NATIVE[0] is None and warn and not _WARNED:
        with _LOCK:
            if not _WARNED:
                _WARNED.append(True)
                warnings.warn(
                    f"thresher checks Riegeli chunk hashes in pure Python (about 3 MB/s, slow) because the "
                    f"C HighwayHash is missing: {_WHERE[0]}. Install a C compiler and Python's headers and "
                    "run again (it is built once), or reinstall thresher where one is", RuntimeWarning,
                    stacklevel=4)
    return _NATIVE[0]


def native_module(warn: bool = True) -> ModuleType | None:
    """The C module (``_highway``), or None where none could be loaded or built (with
    ``warn``, a RuntimeWarning says so once: Riegeli hashes are then checked in Python)."""
    return _native(warn)


def implementation() -> str:
    """Which HighwayHash :func:`highway_hash64` uses here: ``"c (...)"`` or ``"python (why)"``."""
    module = _native()
    if module is None:
        return f"python ({_WHERE[0]})"
    return f"c{', avx2' if module.simd() else ''} ({_WHERE[0]})"


def highway_hash64(data: bytes | memoryview, key: tuple[int, int, int, int] = RIEGELI_KEY) -> int:
    """The 64-bit HighwayHash of ``data`` under ``key`` (Riegeli's key by default)."""
    module = _native()
    if module is not None:
        return int(module.hash64(data, *key))
    return python_hash64(data, key)


def python_hash64(data: bytes | memoryview, key: tuple[int, int, int, int] = RIEGELI_KEY) -> int:
    """:func:`highway_hash64` in plain Python (the fallback; about 3 MB/s)."""
    data = bytes(data)
    state = _State(key)
    whole = len(data) - len(data) % 32
    for pos in range(0, whole, 32):
        state.update(_lanes(data, pos))
    if whole != len(data):
        state.remainder(data[whole:])
    return state.finish()
