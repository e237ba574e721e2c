"""The default serializer of on-disk caches: plain data in a tagged binary layout, never pickle.

``PLAIN`` stores what a pipeline's elements usually are: NumPy arrays (any numeric,
bool, string or datetime dtype; never ``object``), NumPy scalars, ``None``, bool,
int, float, complex, str, bytes, and dicts, lists and tuples nesting them. Reading
a record only ever builds those types, so a cache file written by someone else
cannot run code in the reader (unlike pickle, which the user may still pass
explicitly with ``cache(path, serializer=pickle)`` for files they trust).

Record layout (integers little-endian)::

    b"THC" + version (1 byte, = 1), then one value:
    tag (1 byte) + body, where the tags are
      N None, T True, F False, i int64 (8 bytes), L big int (u32 length + decimal ASCII),
      f float64 (8), c complex128 (16), s str (u64 length + UTF-8), b bytes (u64 length + raw),
      a ndarray (dtype, u8 ndim, u64 per axis, raw C-order data), g NumPy scalar (dtype, raw),
      l list / t tuple (u64 count + values), d dict (u64 count + key, value pairs)
    a dtype is u8 length + its ASCII ``dtype.str`` (``'<f4'``, ``'|u1'``, ``'<U3'``)

Example:
    >>> import numpy as np
    >>> from thresher.dataset.cache_codec import PLAIN
    >>> rec = PLAIN.dumps({"x": np.arange(3, dtype=np.int16), "id": (7, "a", b"b", None)})
    >>> out = PLAIN.loads(rec)
    >>> out["x"].tolist(), out["x"].dtype, out["id"]
    ([0, 1, 2], dtype('int16'), (7, 'a', b'b', None))
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from thresher.errors import CacheError

__all__ = ["MAGIC", "PLAIN", "PlainSerializer"]

MAGIC = b"THC\x01"
_U8, _U32, _U64 = struct.Struct("<B"), struct.Struct("<I"), struct.Struct("<Q")
_I64, _F64, _C128 = struct.Struct("<q"), struct.Struct("<d"), struct.Struct("<dd")
_ARRAY_KINDS = "biufcSUmM"
_PICKLE_START = b"\x80"


def _dtype_bytes(dtype: np.dtype, where: str) -> bytes:
    if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None:
        raise CacheError(f"{where}: dtype {dtype} cannot be cached without pickle (object, void "
                         "and structured dtypes are refused); convert it, or pass "
                         "serializer=pickle to cache() if you trust every reader's file")
    s = dtype.str.encode("ascii")
    return _U8.pack(len(s)) + s


def _dump(x: Any, out: list[bytes], where: str) -> None:
    if x is None:
        out.append(b"N")
    elif x is True or x is False:
        out.append(b"T" if x else b"F")
    elif isinstance(x, np.ndarray):
        a = x if x.flags.c_contiguous else np.array(x, order="C")
        out += [b"a", _dtype_bytes(a.dtype, where), _U8.pack(a.ndim)]
        out += [_U64.pack(d) for d in a.shape]
        out.append(a.tobytes())
    elif isinstance(x, np.generic):
        out += [b"g", _dtype_bytes(x.dtype, where), x.tobytes()]
    elif isinstance(x, int):
        if -(1 << 63) <= x < (1 << 63):
            out += [b"i", _I64.pack(x)]
        else:
            digits = str(x).encode("ascii")
            out += [b"L", _U32.pack(len(digits)), digits]
    elif isinstance(x, float):
        out += [b"f", _F64.pack(x)]
    elif isinstance(x, complex):
        out += [b"c", _C128.pack(x.real, x.imag)]
    elif isinstance(x, str):
        data = x.encode("utf-8", "surrogatepass")
        out += [b"s", _U64.pack(len(data)), data]
    elif isinstance(x, (bytes, bytearray, memoryview)):
        data = bytes(x)
        out += [b"b", _U64.pack(len(data)), data]
    elif isinstance(x, (list, tuple)):
        out += [b"l" if isinstance(x, list) else b"t", _U64.pack(len(x))]
        for i, v in enumerate(x):
            _dump(v, out, f"{where}[{i}]")
    elif isinstance(x, dict):
        out += [b"d", _U64.pack(len(x))]
        for k, v in x.items():
            _dump(k, out, f"{where} (a key)")
            _dump(v, out, f"{where}[{k!r}]")
    else:
        raise CacheError(f"{where}: a {type(x).__name__} cannot be cached without pickle (the "
                         "default serializer stores arrays, scalars, str/bytes and dicts/lists/"
                         "tuples of them); convert it in a map before cache(), or pass "
                         "serializer=pickle to cache() if you trust the file")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = memoryview(data), 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise CacheError(f"cache record truncated: needs {n} bytes at offset {self.pos}, "
                             f"has {len(self.data) - self.pos}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, s: struct.Struct) -> Any:
        return s.unpack(self.take(s.size))

    def dtype(self) -> np.dtype:
        (n,) = self.unpack(_U8)
        text = bytes(self.take(n)).decode("ascii", "replace")
        try:
            dtype = np.dtype(text)
        except (TypeError, ValueError, OverflowError):
            raise CacheError(f"cache record holds an unknown dtype {text!r}") from None
        if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None:
            raise CacheError(f"cache record holds dtype {text!r}, which plain caches never store")
        return dtype

    def value(self, depth: int = 0) -> Any:
        if depth > 100:
            raise CacheError("cache record nests deeper than 100 levels")
        tag = bytes(self.take(1))
        if tag == b"N":
            return None
        if tag in (b"T", b"F"):
            return tag == b"T"
        if tag == b"i":
            return self.unpack(_I64)[0]
        if tag == b"L":
            (n,) = self.unpack(_U32)
            try:
                return int(bytes(self.take(n)).decode("ascii"))
            except ValueError:
                raise CacheError("cache record holds a malformed big integer") from None
        if tag == b"f":
            return self.unpack(_F64)[0]
        if tag == b"c":
            re, im = self.unpack(_C128)
            return complex(re, im)
        if tag in (b"s", b"b"):
            (n,) = self.unpack(_U64)
            raw = bytes(self.take(n))
            if tag == b"b":
                return raw
            try:
                return raw.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                raise CacheError("cache record holds a str that is not UTF-8") from None
        if tag == b"a":
            dtype = self.dtype()
            (ndim,) = self.unpack(_U8)
            shape = tuple(self.unpack(_U64)[0] for _ in range(ndim))
            count = math.prod(shape)
            data = self.take(count * dtype.itemsize)
            return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
        if tag == b"g":
            dtype = self.dtype()
            return np.frombuffer(self.take(dtype.itemsize), dtype=dtype)[0].copy()
        if tag in (b"l", b"t"):
            (n,) = self.unpack(_U64)
            items = [self.value(depth + 1) for _ in range(min(n, len(self.data)))]
            return items if tag == b"l" else tuple(items)
        if tag == b"d":
            (n,) = self.unpack(_U64)
            out = {}
            for _ in range(min(n, len(self.data))):
                k = self.value(depth + 1)
                try:
                    out[k] = self.value(depth + 1)
                except TypeError:
                    raise CacheError("cache record holds an unhashable dict key") from None
            return out
        raise CacheError(f"cache record has an unknown tag {tag!r} at offset {self.pos - 1}")


class PlainSerializer:
    """``dumps``/``loads`` for plain data (see the module doc); the default of ``cache(path)``.

    Example:
        >>> from thresher.dataset.cache_codec import PlainSerializer
        >>> s = PlainSerializer()
        >>> s.loads(s.dumps([1, 2.5, "x"]))
        [1, 2.5, 'x']
    """

    name = "thresher.plain.v1"

    def dumps(self, x: Any) -> bytes:
        """The record bytes of ``x``; CacheError naming the part that cannot be stored."""
        out = [MAGIC]
        _dump(x, out, "cached element")
        return b"".join(out)

    def loads(self, data: bytes) -> Any:
        """The element of a record; CacheError for anything that is not a plain record."""
        head = bytes(data[:4])
        if head != MAGIC:
            hint = (" (it looks like a pickle: pass serializer=pickle to cache() only if you "
                    "trust whoever wrote the file)") if head[:1] == _PICKLE_START else ""
            raise CacheError(f"not a plain cache record (starts with {head!r}){hint}")
        reader = _Reader(data)
        reader.pos = 4
        value = reader.value()
        if reader.pos != len(reader.data):
            raise CacheError(f"cache record has {len(reader.data) - reader.pos} trailing bytes")
        return value

    def __repr__(self) -> str:
        return "PLAIN"


PLAIN = PlainSerializer()
