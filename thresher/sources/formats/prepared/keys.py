"""The on-disk order of keyed examples: a function of each example's key, not of arrival order.

``prepare(..., keyed=True)`` and ``thresher.beam.WriteDataset`` take examples as
``(key, example)`` pairs, the way TFDS's ``_generate_examples`` yields them. Keys are
int (64-bit), str or bytes, unique within a split. Each key gets a *sort key*:

- ``shuffle=True``: an 8-byte keyed BLAKE2b hash of the key (keyed by the split's
  shuffle key), then the key's own bytes, so the order is pseudo-random but fixed;
- ``shuffle=False``: the key's own bytes, so the order is that of the keys (ints by
  value, str and bytes by their bytes; ints before str before bytes).

Records are stored in increasing sort-key order, which any machine, process count or
Beam runner computes the same way: this is what makes a Beam-prepared directory
byte-identical to a one-process one.

Example:
    >>> from thresher.sources.formats.prepared.keys import key_bytes, sort_key
    >>> key_bytes(3) < key_bytes(10) < key_bytes("a") < key_bytes(b"a")
    True
    >>> len(sort_key(12345, key_bytes("img-1"), shuffle=True))
    14
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

from thresher.errors import ConfigError

__all__ = ["BUCKET_BITS", "bucket_of", "describe_key", "key_bytes", "sort_key"]

BUCKET_BITS = 10
_INT = struct.Struct(">Q")


def key_bytes(key: Any, where: str = "example") -> bytes:
    """The canonical bytes of a key (their order is the order of ``shuffle=False``)."""
    if isinstance(key, bool) or not isinstance(key, (int, str, bytes)):
        import numpy as np

        if isinstance(key, np.integer):
            key = int(key)
        else:
            raise ConfigError(f"{where}: a key must be an int, str or bytes, got "
                              f"{type(key).__name__} ({key!r:.60}); yield (key, example) pairs")
    if isinstance(key, int):
        if not -(1 << 63) <= key < (1 << 63):
            raise ConfigError(f"{where}: int key {key} does not fit in 64 bits; use a str key")
        return b"\x01" + _INT.pack(key + (1 << 63))
    if isinstance(key, str):
        return b"\x02" + key.encode("utf-8", "surrogatepass")
    return b"\x03" + key


def describe_key(kb: bytes) -> str:
    """The key that ``key_bytes`` encoded, for messages."""
    tag, body = kb[:1], kb[1:]
    if tag == b"\x01":
        return repr(_INT.unpack(body)[0] - (1 << 63))
    if tag == b"\x02":
        return repr(body.decode("utf-8", "surrogatepass"))
    return repr(body)


def sort_key(split_key: int, kb: bytes, *, shuffle: bool) -> bytes:
    """The bytes that records of a split are sorted by (see the module doc).

    ``split_key`` is the split's shuffle key (``writer.shuffle_key(split)``).
    """
    if not shuffle:
        return kb
    digest = hashlib.blake2b(kb, digest_size=8, key=_INT.pack(split_key & ((1 << 64) - 1))).digest()
    return digest + kb


def bucket_of(sk: bytes) -> int:
    """Which of ``2**BUCKET_BITS`` contiguous ranges of sort keys holds ``sk``."""
    head = (sk[:2] + b"\0\0")[:2]
    return int.from_bytes(head, "big") >> (16 - BUCKET_BITS)
