"""A small protobuf wire-format reader for ``tf.train.Example`` records.

An Example is ``Features features = 1``; Features is ``map<string, Feature> feature = 1``;
a Feature is one of ``BytesList bytes_list = 1``, ``FloatList float_list = 2`` or
``Int64List int64_list = 3``, each a ``repeated`` field 1 (floats and ints packed or not).
:func:`parse_example` turns the record bytes into ``{key: value}`` where a value is a
list of ``bytes``, a float32 array or an int64 array. Packed numbers are converted with
NumPy in one step (``frombuffer`` for floats, a vectorised varint decode for ints), so
large tensors cost little Python; no TensorFlow or ``protobuf`` package is needed.

Example:
    >>> from thresher.sources.formats.tfds.wire import parse_example
    >>> # {"label": int64_list [3]}: Example{features{feature{key:"label" value{int64_list{3}}}}}
    >>> rec = bytes([10, 15, 10, 13, 10, 5]) + b"label" + bytes([18, 4, 26, 2, 8, 3])
    >>> parse_example(rec)
    {'label': array([3])}
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["Value", "WireError", "decode_varints", "parse_example"]

Value = list[bytes] | np.ndarray

_EMPTY_F = np.zeros(0, np.float32)
_EMPTY_I = np.zeros(0, np.int64)
_F32 = np.dtype("<f4")


class WireError(ValueError):
    """The bytes are not a valid ``tf.train.Example`` (the message says where)."""


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos < end and buf[pos] < 0x80:  # most varints (tags, short lengths) are one byte
        return buf[pos], pos + 1
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise WireError(f"truncated varint at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError(f"varint longer than 10 bytes at byte {pos}")


def decode_varints(data: bytes) -> np.ndarray:
    """Decodes packed varints to int64 (two's complement, as protobuf's int64).

    Example:
        >>> decode_varints(bytes([1, 0xAC, 0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        ...                       0xFF, 0xFF, 0x01]))
        array([  1, 300,  -1])
    """
    raw = np.frombuffer(data, np.uint8)
    if raw.size == 0:
        return _EMPTY_I
    last = raw < 0x80
    if not last[-1]:
        raise WireError("packed varints end in the middle of a number")
    if last.all():
        return raw.astype(np.int64)
    ends = np.flatnonzero(last)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    if lengths.max() > 10:
        raise WireError("a packed varint is longer than 10 bytes")
    # byte j of number i contributes (byte & 0x7f) << 7*(j - start_i)
    number = np.repeat(np.arange(ends.size), lengths)
    offset = np.arange(raw.size) - starts[number]
    parts = (raw & 0x7F).astype(np.uint64) << (7 * offset).astype(np.uint64)
    out = np.zeros(ends.size, np.uint64)
    np.add.at(out, number, parts)  # disjoint bits: add is or
    return out.view(np.int64)


def _skip(buf: bytes, pos: int, end: int, wire: int) -> int:
    if wire == 0:
        return _varint(buf, pos, end)[1]
    if wire == 1:
        return pos + 8
    if wire == 2:
        n, pos = _varint(buf, pos, end)
        return pos + n
    if wire == 5:
        return pos + 4
    raise WireError(f"unsupported wire type {wire} at byte {pos}")


def _list(buf: bytes, pos: int, end: int, kind: int) -> Value:
    """The repeated field 1 of a BytesList (1), FloatList (2) or Int64List (3)."""
    if kind == 1:
        items: list[bytes] = []
        while pos < end:
            tag, pos = _varint(buf, pos, end)
            if tag == 10:
                n, pos = _varint(buf, pos, end)
                if pos + n > end:
                    raise WireError(f"bytes value runs past its list at byte {pos}")
                items.append(buf[pos:pos + n])
                pos += n
            else:
                pos = _skip(buf, pos, end, tag & 7)
        return items
    chunks: list[np.ndarray] = []
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        if tag == 10:  # packed
            n, pos = _varint(buf, pos, end)
            if pos + n > end:
                raise WireError(f"packed list runs past its end at byte {pos}")
            data = buf[pos:pos + n]
            if kind == 2:
                if n % 4:
                    raise WireError(f"packed floats of {n} bytes (not a multiple of 4)")
                chunks.append(np.frombuffer(data, _F32))
            elif n == 1 and data[0] < 0x80:  # a single small int (labels): no vector work
                chunks.append(np.array([data[0]], np.int64))
            else:
                chunks.append(decode_varints(data))
            pos += n
        elif tag == 13 and kind == 2:
            chunks.append(np.frombuffer(buf[pos:pos + 4], _F32))
            pos += 4
        elif tag == 8 and kind == 3:
            v, pos = _varint(buf, pos, end)
            chunks.append(np.array([v], np.uint64).view(np.int64))
        else:
            pos = _skip(buf, pos, end, tag & 7)
    if not chunks:
        return _EMPTY_F if kind == 2 else _EMPTY_I
    out = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    return out.astype(np.float32) if kind == 2 else out


def _len_fields(buf: bytes, pos: int, end: int, what: str) -> Iterator[tuple[int, int, int]]:
    """(field number, start, end) of each length-delimited field; others are skipped."""
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        if tag & 7 != 2:
            pos = _skip(buf, pos, end, tag & 7)
            continue
        n, pos = _varint(buf, pos, end)
        if pos + n > end:
            raise WireError(f"{what} field runs past its end at byte {pos}")
        yield tag >> 3, pos, pos + n
        pos += n


def _feature(buf: bytes, pos: int, end: int) -> Value:
    value: Value = []
    for kind, start, stop in _len_fields(buf, pos, end, "Feature"):
        if kind in (1, 2, 3):
            value = _list(buf, start, stop, kind)
    return value


def _entry(buf: bytes, pos: int, end: int) -> tuple[str, Value]:
    # The layout every protobuf serializer writes: key (field 1), then value (field 2)
    # holding one list field that fills it. Anything else takes the general path.
    if end - pos > 4 and buf[pos] == 10 and buf[pos + 1] < 0x80:
        kend = pos + 2 + buf[pos + 1]
        if kend + 2 < end and buf[kend] == 18:
            vlen, vpos = _varint(buf, kend + 1, end)
            if vpos + vlen == end and vpos + 1 < end and buf[vpos] in (10, 18, 26):
                llen, lpos = _varint(buf, vpos + 1, end)
                if lpos + llen == end:
                    try:
                        key = buf[pos + 2:kend].decode("utf-8")
                    except UnicodeDecodeError:
                        raise WireError(f"feature name at byte {pos} is not UTF-8") from None
                    return key, _list(buf, lpos, end, buf[vpos] >> 3)
    return _entry_general(buf, pos, end)


def _entry_general(buf: bytes, pos: int, end: int) -> tuple[str, Value]:
    key = ""
    value: Value = []
    for field, start, stop in _len_fields(buf, pos, end, "map entry"):
        if field == 1:
            try:
                key = buf[start:stop].decode("utf-8")
            except UnicodeDecodeError:
                raise WireError(f"feature name at byte {start} is not UTF-8") from None
        elif field == 2:
            value = _feature(buf, start, stop)
    return key, value


def parse_example(record: bytes) -> dict[str, Value]:
    """``{feature name: list of bytes | float32 array | int64 array}`` of one Example.

    Raises :class:`WireError` when the bytes are not a well-formed Example.
    """
    buf = bytes(record)
    out: dict[str, Value] = {}
    end = len(buf)
    pos = 0
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        if tag != 10:  # Example.features
            if tag & 7 not in (0, 1, 2, 5) or tag >> 3 == 0:
                raise WireError(f"bad field tag {tag} at byte {pos}")
            pos = _skip(buf, pos, end, tag & 7)
            continue
        n, pos = _varint(buf, pos, end)
        fend = pos + n
        if fend > end:
            raise WireError(f"Example.features runs past the record end ({fend} > {end})")
        while pos < fend:
            tag, pos = _varint(buf, pos, fend)
            if tag != 10:  # Features.feature (map entries)
                if tag & 7 not in (0, 1, 2, 5) or tag >> 3 == 0:
                    raise WireError(f"bad field tag {tag} at byte {pos}")
                pos = _skip(buf, pos, fend, tag & 7)
                continue
            m, pos = _varint(buf, pos, fend)
            if pos + m > fend:
                raise WireError(f"map entry runs past Example.features at byte {pos}")
            key, value = _entry(buf, pos, pos + m)
            out[key] = value
            pos += m
    if pos != end:
        raise WireError(f"the record ends inside a field ({pos} != {end})")
    return out
