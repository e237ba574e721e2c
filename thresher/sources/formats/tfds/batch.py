"""Decoding a batch of ``tf.train.Example`` records at once, column by column.

Per record, :func:`scan` only finds where each feature's payload lies (one short walk over
the bytes, no arrays made). Per feature, the payloads of the whole batch are then joined
and converted in one NumPy step: one varint decode for the int64 lists, one ``frombuffer``
for the float lists, one cast, one reshape to ``(records, *shape)``; each record gets a
row of it. Scalars become Python numbers with one ``tolist()``. Bytes features (images,
text, encoded tensors) are sliced out and decoded one by one.

This is only the fast path. It covers the leaves that are not in a Sequence and records
laid out the way every protobuf serializer writes an Example (each map entry: key, then a
value holding one packed list). For anything else (a Sequence, an unpacked list, a
missing or mistyped feature, a wrong count) :meth:`BatchDecoder.decode` returns None and
the caller decodes record by record with :class:`~thresher.sources.formats.tfds.decode.TfdsCodec`,
the reference, which also raises the errors. Both give identical values (tested).

Example:
    >>> from thresher.sources.formats.tfds.decode import TfdsCodec
    >>> from thresher.sources.formats.tfds.features import ClassLabel, FeaturesDict, Tensor
    >>> codec = TfdsCodec(FeaturesDict({"label": ClassLabel(10),
    ...                                 "xy": Tensor((2,), "float32")}))
    >>> def record(label, xy):   # an Example as TFDS writes it
    ...     import struct
    ...     def entry(key, kind, payload):
    ...         lst = bytes([10, len(payload)]) + payload
    ...         val = bytes([kind << 3 | 2, len(lst)]) + lst
    ...         body = bytes([10, len(key)]) + key + bytes([18, len(val)]) + val
    ...         return bytes([10, len(body)]) + body
    ...     feats = entry(b"label", 3, bytes([label])) + entry(b"xy", 2, struct.pack("<2f", *xy))
    ...     return bytes([10, len(feats)]) + feats
    >>> batch = [record(3, (0.5, 1.0)), record(7, (2.0, -1.0))]
    >>> BatchDecoder(codec).decode(batch)
    [{'label': 3, 'xy': array([0.5, 1. ], dtype=float32)}, {'label': 7, 'xy': array([ 2., -1.], dtype=float32)}]
    >>> BatchDecoder(codec).decode([b"not an Example"]) is None   # the caller falls back
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from thresher.errors import CorruptSourceError, FeatureError
from thresher.sources.formats.tfds.decode import TfdsCodec, _Leaf
from thresher.sources.formats.tfds.wire import WireError, decode_varints

__all__ = ["BatchDecoder", "scan"]

_OBJ = np.dtype(object)
_F32 = np.dtype("<f4")
Spans = dict[bytes, tuple[int, int, int]]


class _Odd(Exception):
    """The batch is not in the form the fast path handles (the caller falls back)."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 63:
            raise _Odd


def scan(buf: bytes) -> Spans | None:
    """``{key: (kind, start, stop)}`` of a canonically laid-out Example: kind 1 (one bytes
    value), 2 (packed floats) or 3 (packed varints), and where the payload is. None for
    anything else (the record may still be valid: it then takes the general path).

    Example:
        >>> scan(bytes([10, 16, 10, 14, 10, 5]) + b"label" + bytes([18, 5, 26, 3, 10, 1, 3]))
        {b'label': (3, 17, 18)}
        >>> # the same int, not packed: valid, but for the general path
        >>> scan(bytes([10, 15, 10, 13, 10, 5]) + b"label" + bytes([18, 4, 26, 2, 8, 3])) is None
        True
    """
    try:
        return _scan(buf)
    except (IndexError, _Odd):
        return None


def _scan(buf: bytes) -> Spans | None:
    end = len(buf)
    if end == 0 or buf[0] != 10:
        return None
    n, pos = _varint(buf, 1)
    if pos + n != end:
        return None
    out: Spans = {}
    while pos < end:
        if buf[pos] != 10:
            return None
        m, pos = _varint(buf, pos + 1)
        stop = pos + m
        if stop > end:
            return None
        klen = buf[pos + 1]
        if buf[pos] != 10 or klen >= 0x80:
            return None
        kend = pos + 2 + klen
        if buf[kend] != 18:
            return None
        vlen, vpos = _varint(buf, kend + 1)
        if vpos + vlen != stop:
            return None
        tag = buf[vpos]
        llen, lpos = _varint(buf, vpos + 1)
        if lpos + llen != stop or tag not in (10, 18, 26):
            return None
        if llen == 0:
            if tag == 10:
                return None  # an empty bytes list: the general path says what is wrong
            out[buf[pos + 2:kend]] = (tag >> 3, stop, stop)
        else:
            if buf[lpos] != 10:
                return None
            plen, ppos = _varint(buf, lpos + 1)
            if ppos + plen != stop:
                return None  # several values in a bytes list, or an unpacked number list
            out[buf[pos + 2:kend]] = (tag >> 3, ppos, stop)
        pos = stop
    return out


class _Column:
    """How one leaf is decoded over a batch: numbers in one step, bytes one by one."""

    def __init__(self, leaf: _Leaf) -> None:
        self.leaf = leaf
        self.key = leaf.name.encode("utf-8")
        self.numeric = leaf.dtype != _OBJ
        shape = leaf.shape
        self.scalar = not shape
        self.fixed = None not in shape
        self.size = math.prod(d for d in shape if d is not None)
        self.dims = [-1 if d is None else d for d in shape]

    def values(self, records: Sequence[bytes], spans: list[Spans]) -> list[Any]:
        key = self.key
        try:
            found = [s[key] for s in spans]
        except KeyError:
            raise _Odd from None
        kinds = {f[0] for f in found}
        if len(kinds) != 1:
            raise _Odd
        kind = kinds.pop()
        if not self.numeric:
            if kind != 1:
                raise _Odd
            decode_one = self.leaf.decode_one
            return [decode_one(r[a:b], "record") for r, (_, a, b) in zip(records, found, strict=True)]
        if kind == 1:
            raise _Odd
        joined = b"".join([r[a:b] for r, (_, a, b) in zip(records, found, strict=True)])
        if kind == 2:
            if any((b - a) % 4 for _, a, b in found):
                raise _Odd
            counts = np.fromiter(((b - a) // 4 for _, a, b in found), np.int64, len(found))
            flat = np.frombuffer(joined, _F32)
        else:
            raw = np.frombuffer(joined, np.uint8)
            last = raw < 0x80
            lengths = np.fromiter((b - a for _, a, b in found), np.int64, len(found))
            cuts = np.cumsum(lengths)
            if not last[cuts[lengths > 0] - 1].all():
                raise _Odd  # a payload ends inside a varint: it would run into the next one
            ends = np.concatenate([[0], np.cumsum(last)])
            counts = ends[cuts] - ends[cuts - lengths]
            try:
                flat = decode_varints(joined)
            except WireError:
                raise _Odd from None
        values = flat.astype(self.leaf.dtype)
        n = len(records)
        if self.fixed:
            if not (counts == self.size).all():
                raise _Odd
            if self.scalar:
                return values.tolist()
            rows = values.reshape(n, *self.dims)
            return list(rows)
        try:
            parts = np.split(values, np.cumsum(counts)[:-1])
            return [p.reshape(self.dims) for p in parts]
        except ValueError:
            raise _Odd from None


class BatchDecoder:
    """Decodes a batch of records of a :class:`TfdsCodec`'s dataset column by column.

    ``supported`` is False when a leaf needs the general path (a Sequence, a tensor with
    several unknown dimensions); :meth:`decode` then always returns None.
    """

    def __init__(self, codec: TfdsCodec) -> None:
        leaves = codec.leaves
        self.supported = all(leaf.rank == 0 and not leaf.dynamic and (
            leaf.dtype != _OBJ or not leaf.shape) for leaf in leaves) and bool(leaves)
        self._columns = [_Column(leaf) for leaf in leaves] if self.supported else []
        self._paths = [leaf.path for leaf in leaves]
        self._flat = all(len(p) == 1 for p in self._paths)
        self._names = [p[-1] for p in self._paths]

    def decode(self, records: Sequence[bytes]) -> list[dict[str, Any]] | None:
        """The decoded records, or None if the batch needs the general path."""
        if not self.supported or not records:
            return None
        records = [r if type(r) is bytes else bytes(r) for r in records]
        spans = []
        n_leaves = len(self._columns)
        for r in records:
            s = scan(r)
            if s is None:
                return None
            if len(s) != n_leaves:  # other features: their names must still be UTF-8
                try:
                    [k.decode("utf-8") for k in s]
                except UnicodeDecodeError:
                    return None
            spans.append(s)
        try:
            columns = [c.values(records, spans) for c in self._columns]
        except (_Odd, CorruptSourceError, FeatureError):
            return None
        if self._flat:
            names = self._names
            return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]
        out: list[dict[str, Any]] = [{} for _ in records]
        for path, column in zip(self._paths, columns, strict=True):
            for example, value in zip(out, column, strict=True):
                node = example
                for k in path[:-1]:
                    node = node.setdefault(k, {})
                node[path[-1]] = value
        return out

