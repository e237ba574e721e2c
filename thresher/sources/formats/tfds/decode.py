"""Decoding TFDS records (``tf.train.Example``) to exactly what ``tfds.data_source`` returns.

TFDS flattens a feature tree to leaves named by their path (``objects/label``) and stores
each leaf as one Example feature: ints and bools as int64, floats as float32, strings,
images and byte-encoded tensors as bytes. Its NumPy reader then

- casts the values to the leaf's dtype; a scalar leaf becomes a *Python* scalar
  (``int``, ``float``, ``bool``, ``bytes``), other leaves are reshaped (``None`` -> -1);
- nested Sequences (``ragged_flat_values`` + ``ragged_row_lengths_i``) become lists of
  arrays, split from the innermost dimension outwards;
- a leaf inside one Sequence becomes a *list* of its per-element values (NumPy scalars
  for scalar leaves); Text stays ``bytes``; images are decoded (OpenCV, else Pillow,
  keeping the file's channels; grey images are repeated to the declared channels).

:class:`TfdsCodec` reproduces those rules (they are checked against records TFDS decoded
in ``tests/sources/tfds``).

Example:
    >>> from thresher.sources.formats.tfds.decode import TfdsCodec
    >>> from thresher.sources.formats.tfds.features import ClassLabel, FeaturesDict
    >>> codec = TfdsCodec(FeaturesDict({"label": ClassLabel(10)}))
    >>> codec.decode(bytes([10, 15, 10, 13, 10, 5]) + b"label" + bytes([18, 4, 26, 2, 8, 3]))
    {'label': 3}
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Sequence as Seq
from typing import Any

import numpy as np

from thresher._optional import available, require
from thresher.errors import CorruptSourceError, FeatureError
from thresher.sources.formats.tfds.features import (
    FeaturesDict,
    Image,
    Sequence,
    Tensor,
    Text,
    TfdsFeature,
)
from thresher.sources.formats.tfds.wire import WireError, parse_example

__all__ = ["TfdsCodec", "reshape_ragged"]

_OBJ = np.dtype(object)


def reshape_ragged(values: np.ndarray, row_lengths: list[np.ndarray],
                   shape: tuple[int | None, ...]) -> Any:
    """TFDS's reshape of flat values with ragged row lengths (lists of arrays).

    Example:
        >>> reshape_ragged(np.arange(5), [np.array([2, 0, 3])], (None, None))
        [array([0, 1]), array([], dtype=int64), array([2, 3, 4])]
    """
    if not row_lengths:
        return values.reshape([-1 if d is None else d for d in shape])
    full: list[Seq[int]] = []
    if shape and shape[-1] is None:
        full = [r.tolist() for r in reversed(row_lengths)]
    else:
        cur = len(row_lengths) - 1
        for dim in reversed(shape):
            if dim is None:
                if cur < 0:
                    break
                full.append(row_lengths[cur].tolist())
                cur -= 1
            else:
                full.append([dim] * (len(values) // dim))
    out: Any = values
    for lengths in full:
        parts, i = [], 0
        for n in lengths:
            parts.append(out[i:i + n])
            i += n
        out = parts
    return out


_CODEC: list[tuple[str, Any]] = []  # the image library, found once per process


def _image_codec() -> tuple[str, Any]:
    if _CODEC:
        return _CODEC[0]
    if available("cv2"):
        _CODEC.append(("cv2", require("cv2", "TFDS Image features")))
    else:
        _CODEC.append(("pil", require("PIL.Image", "TFDS Image features (OpenCV or Pillow)")))
    return _CODEC[0]


def decode_image(data: bytes, feature: Image) -> np.ndarray:
    """Decodes PNG/JPEG bytes the way TFDS's NumPy reader does."""
    kind, mod = _image_codec()
    dtype = np.dtype(feature.dtype)
    if kind == "cv2":
        arr = mod.imdecode(np.frombuffer(data, np.uint8), mod.IMREAD_UNCHANGED)
        if arr is None:
            raise FeatureError(f"cannot decode {len(data)} bytes as an image (OpenCV)")
        arr = arr.astype(dtype, copy=False)
        if arr.ndim == 3 and arr.shape[2] == 3:
            arr = mod.cvtColor(arr, mod.COLOR_BGR2RGB)
        elif arr.ndim == 3 and arr.shape[2] == 4:
            arr = mod.cvtColor(arr, mod.COLOR_BGRA2RGBA)
    else:
        try:
            with mod.open(io.BytesIO(data)) as im:
                arr = np.asarray(im, dtype=dtype)
        except (OSError, ValueError, SyntaxError) as e:
            raise FeatureError(f"cannot decode {len(data)} bytes as an image ({e})") from None
    if arr.ndim == 2:
        channels = feature.channels
        return arr[:, :, None] if channels == 1 else np.repeat(arr[..., None], channels, -1)
    if arr.ndim == 3 and arr.shape[2] == 1 and feature.channels != 1:
        return np.repeat(arr, feature.channels, axis=-1)
    return arr


class _Leaf:
    """One flattened leaf: its path, feature, sequence dims and how it is stored."""

    def __init__(self, path: tuple[str, ...], feature: TfdsFeature,
                 seq: tuple[int | None, ...]) -> None:
        self.path = path
        self.name = "/".join(path)
        self.feature = feature
        self.rank = len(seq)
        # TFDS stores a tensor with several unknown dimensions as name/value + name/shape
        # (the value is one encoded bytes value when the tensor has an encoding)
        self.dynamic = isinstance(feature, Tensor) and feature.shape.count(None) > 1
        if isinstance(feature, Tensor) and feature.encoding == "none":
            self.dtype, inner = feature.np_dtype, feature.shape
        else:  # Text, Image, ClassLabel-free bytes: one bytes value (ClassLabel is a Tensor)
            self.dtype, inner = _OBJ, ()
        self.shape = seq + inner
        if self.dynamic and self.rank:
            raise FeatureError(f"feature {self.name!r}: a Tensor with several unknown "
                               "dimensions inside a Sequence is not supported")
        if self.rank > 1 and isinstance(feature, Image):
            raise FeatureError(f"feature {self.name!r}: {feature!r} in nested Sequences is not supported by "
                               "thresher (images are decoded one value at a time)")

    def _values(self, raw: Any, key: str, where: str) -> np.ndarray:
        if isinstance(raw, list):
            if self.dtype != _OBJ and raw:
                raise CorruptSourceError(f"{where}: feature {key!r} holds bytes, but "
                                         f"{self.feature!r} stores numbers")
            arr = np.empty(len(raw), _OBJ)
            arr[:] = raw
            return arr if self.dtype == _OBJ else arr.astype(self.dtype)
        if self.dtype == _OBJ:
            if raw.size:
                raise CorruptSourceError(f"{where}: feature {key!r} holds numbers, but "
                                         f"{self.feature!r} stores bytes")
            return np.empty(0, _OBJ)
        return raw.astype(self.dtype)

    def parse(self, flat: dict[str, Any], where: str) -> Any:
        """The value TFDS's parser gives this leaf (before the feature's decoding)."""
        if self.dynamic:
            assert isinstance(self.feature, Tensor)
            raw = self._get(flat, self.name + "/value", where)
            shape = self._get(flat, self.name + "/shape", where)
            dims = [int(s) if d is None else d for s, d in zip(shape, self.feature.shape, strict=False)]
            if self.feature.encoding == "none":
                return self._reshape(raw.astype(self.dtype), dims, where)
            if not (isinstance(raw, list) and len(raw) == 1):
                raise CorruptSourceError(f"{where}: encoded tensor {self.name!r} must be one bytes value")
            return self._reshape(self._unbytes(raw[0], self.feature, where, [-1]), dims, where)
        key = self.name + "/ragged_flat_values" if self.rank > 1 else self.name
        raw = self._get(flat, key, where)
        if not self.shape and self.dtype == _OBJ and isinstance(raw, list) and len(raw) == 1:
            return raw[0]  # one bytes value (an image, a text): what .item() would give
        values = self._values(raw, key, where)
        if not self.shape:
            if values.size != 1:
                raise CorruptSourceError(f"{where}: scalar feature {key!r} has {values.size} "
                                         "values")
            return values.item()
        lengths: list[np.ndarray] = []
        while f"{self.name}/ragged_row_lengths_{len(lengths)}" in flat:
            lengths.append(np.asarray(flat[f"{self.name}/ragged_row_lengths_{len(lengths)}"]))
        try:
            return reshape_ragged(values, lengths, self.shape)
        except ValueError as e:
            raise CorruptSourceError(f"{where}: feature {key!r} has {values.size} values, "
                                     f"which do not fit shape {self.shape}: {e}") from None

    def _reshape(self, value: np.ndarray, dims: Seq[int | None], where: str) -> np.ndarray:
        try:
            return value.reshape([-1 if d is None else d for d in dims])
        except ValueError as e:
            raise CorruptSourceError(f"{where}: feature {self.name!r}: {e}") from None

    @staticmethod
    def _get(flat: dict[str, Any], key: str, where: str) -> Any:
        try:
            return flat[key]
        except KeyError:
            raise CorruptSourceError(f"{where}: the Example has no feature {key!r} (it has "
                                     f"{sorted(flat)[:20]}); is this record from this "
                                     "dataset?") from None

    def decode_one(self, value: Any, where: str) -> Any:
        """The feature's own decoding of one (non-sequence) value."""
        f = self.feature
        if isinstance(f, Tensor):
            if f.encoding == "none" or self.dynamic:
                if isinstance(value, np.ndarray) and f.shape and not self.dynamic:
                    return self._reshape(value, f.shape, where)
                return value
            return self._unbytes(value, f, where)
        if isinstance(f, Image):
            try:
                return decode_image(value, f)
            except FeatureError as e:
                raise CorruptSourceError(f"{where}: image {self.name!r}: {e}") from None
        return value  # Text: bytes as stored

    def _unbytes(self, value: Any, f: Tensor, where: str, dims: list[int] | None = None) -> Any:
        dims = [-1 if d is None else d for d in f.shape] if dims is None else dims

        def one(b: bytes) -> np.ndarray:
            try:
                data = zlib.decompress(b) if f.encoding == "zlib" else b
                return np.frombuffer(data, f.np_dtype).reshape(dims)
            except (zlib.error, ValueError) as e:
                raise CorruptSourceError(f"{where}: encoded tensor {self.name!r}: {e}") from None

        if isinstance(value, bytes):
            return one(value)
        return np.array([one(b) for b in value])

    def decode(self, flat: dict[str, Any], where: str) -> Any:
        value = self.parse(flat, where)
        if self.rank == 0:
            return self.decode_one(value, where)
        if self.rank == 1:
            return [self.decode_one(x, where) for x in value]
        return self.decode_one(value, where)  # nested: TFDS's Tensor keeps the lists


def _leaves(feature: TfdsFeature, path: tuple[str, ...],
            seq: tuple[int | None, ...]) -> list[_Leaf]:
    if isinstance(feature, FeaturesDict):
        return [leaf for k, v in feature.items() for leaf in _leaves(v, (*path, k), seq)]
    if isinstance(feature, Sequence):
        return _leaves(feature.feature, path, (*seq, feature.length))
    if isinstance(feature, (Tensor, Text, Image)):
        return [_Leaf(path, feature, seq)]
    raise FeatureError(f"unsupported feature {feature!r}")  # pragma: no cover


class TfdsCodec:
    """Decodes the records of a TFDS dataset with feature tree ``features``."""

    def __init__(self, features: TfdsFeature) -> None:
        if not isinstance(features, FeaturesDict):
            raise FeatureError(f"the top-level TFDS feature must be a FeaturesDict, got "
                               f"{features!r}")
        self.features = features
        self._leaves = _leaves(features, (), ())

    def __repr__(self) -> str:
        return f"TfdsCodec({self.features!r})"

    @property
    def leaves(self) -> list[_Leaf]:
        """The flattened leaves, in the order their values are put in an example."""
        return list(self._leaves)

    def decode(self, record: bytes, where: str = "record") -> dict[str, Any]:
        """The example TFDS's data source returns for ``record`` (nested dict)."""
        try:
            flat = parse_example(record)
        except WireError as e:
            raise CorruptSourceError(f"{where} is not a tf.train.Example ({e}): the file is "
                                     "corrupt or is not a TFDS shard") from None
        out: dict[str, Any] = {}
        for leaf in self._leaves:
            node = out
            for k in leaf.path[:-1]:
                node = node.setdefault(k, {})
            node[leaf.path[-1]] = leaf.decode(flat, where)
        return out

    def decode_many(self, records: Seq[bytes]) -> list[dict[str, Any]]:
        """``[decode(r) for r in records]``."""
        return [self.decode(r) for r in records]
