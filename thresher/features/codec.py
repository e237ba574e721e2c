"""RecordCodec: examples <-> record bytes, record encoding version 1 (never pickle).

Record layout (all integers little-endian; offsets from the start of the record)::

    header   8 bytes: b"TH", version (uint8, = 1), flags (uint8, = 0),
                      number of leaves (uint32)
    leaf i   length L (uint64), then L payload bytes, then zero bytes up to the next
             multiple of 8, so every payload starts 8-byte aligned

Leaves are the non-dict features in depth-first order with dict keys sorted (by code
point): ``{"image", "label", "meta": {"id"}}`` has leaves image, label, meta/id. The
payload of each leaf kind is documented in its module (Tensor/Scalar/ClassLabel: raw
little-endian elements; Image: raw pixels or the PNG/JPEG file; Text: UTF-8).

When every leaf has a fixed size (fixed-shape tensors and raw images, scalars, class
labels) every record has the same length and the leaves sit at fixed offsets: the codec
then decodes with a generated function that checks the record length and makes one
``np.ndarray`` view per leaf and nothing else, which is what keeps the feature layer as
cheap as a hand-written decode. (That path does not re-check the header of each record:
the files are checksummed by ArrayRecord and described by ``dataset_info.json``;
:meth:`RecordCodec.decode_slow` checks everything.)

Example:
    >>> import numpy as np
    >>> from thresher.features import RecordCodec, Image, ClassLabel
    >>> codec = RecordCodec({"image": Image((2, 2, 1), encoding="none"),
    ...                      "label": ClassLabel(num_classes=3)})
    >>> rec = codec.encode({"image": np.eye(2, dtype=np.uint8)[:, :, None], "label": 2})
    >>> len(rec), codec.record_size
    (40, 40)
    >>> ex = codec.decode(rec)
    >>> ex["image"][:, :, 0].tolist(), ex["label"]
    ([[1, 0], [0, 1]], np.int64(2))
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from thresher.errors import CorruptSourceError, FeatureError
from thresher.features.base import Feature
from thresher.features.features_dict import FeaturesDict, as_feature

__all__ = ["HEADER_SIZE", "RECORD_MAGIC", "RECORD_VERSION", "RecordCodec"]

RECORD_MAGIC = b"TH"
RECORD_VERSION = 1
HEADER_SIZE = 8
_LEN = struct.Struct("<Q")
_HEADER = struct.Struct("<2sBBI")
_PAD = b"\0" * 8

# A structure is a leaf index (int) or a list of (key, structure) pairs.
Structure = int | list


def _pad(n: int) -> int:
    return (n + 7) & ~7


class RecordCodec:
    """Encodes examples into records and decodes records, for one feature spec.

    Args:
        features: a Feature or a (nested) dict of them.

    A codec pickles as its features (the generated decoder is rebuilt on unpickling).
    """

    def __init__(self, features: Any) -> None:
        self.features: Feature = as_feature(features)
        self.leaves: list[tuple[str, Feature]] = []
        self._structure = self._flatten(self.features, "")
        self._header = _HEADER.pack(RECORD_MAGIC, RECORD_VERSION, 0, len(self.leaves))
        self.record_size: int | None = self._fixed_layout()
        self.decode: Callable[[bytes], Any] = (
            self._generate_fast_decoder() if self.record_size is not None else self.decode_slow)

    def _flatten(self, feature: Feature, path: str) -> Structure:
        if isinstance(feature, FeaturesDict):
            return [(k, self._flatten(f, f"{path}/{k}" if path else k)) for k, f in feature.items()]
        self.leaves.append((path or "value", feature))
        return len(self.leaves) - 1

    def _fixed_layout(self) -> int | None:
        offset = HEADER_SIZE
        self._offsets = []
        for _, leaf in self.leaves:
            size = leaf.fixed_size
            if size is None or leaf.array_view is None:
                return None
            self._offsets.append(offset + 8)
            offset += 8 + _pad(size)
        return offset

    def __getstate__(self) -> dict[str, Any]:
        return {"features": self.features}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["features"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"RecordCodec({self.features!r})"

    # ---- encoding ----------------------------------------------------------------

    def encode(self, example: Any, where: str = "example") -> bytes:
        """The record bytes of ``example``; FeatureError naming the field if it does not fit."""
        payloads: list[bytes] = []
        self._encode_into(self.features, example, where, "", payloads)
        parts = [self._header]
        for p in payloads:
            parts.append(_LEN.pack(len(p)))
            parts.append(p)
            if len(p) & 7:
                parts.append(_PAD[: 8 - (len(p) & 7)])
        return b"".join(parts)

    def _encode_into(self, feature: Feature, value: Any, where: str, path: str,
                     out: list[bytes]) -> None:
        if isinstance(feature, FeaturesDict):
            if not isinstance(value, Mapping):
                raise FeatureError(f"{where}{', ' + repr(path) if path else ''}: expected a dict "
                                   f"with keys {list(feature)}, got {type(value).__name__}")
            missing = [k for k in feature if k not in value]
            extra = [k for k in value if k not in feature]
            if missing or extra:
                at = f" in {path!r}" if path else ""
                raise FeatureError(
                    f"{where}: " + (f"missing feature(s) {missing}" if missing else "")
                    + ("; " if missing and extra else "")
                    + (f"unexpected key(s) {extra}" if extra else "")
                    + f"{at} (the features are {list(feature)})")
            for k, f in feature.items():
                self._encode_into(f, value[k], where, f"{path}/{k}" if path else k, out)
            return
        out.append(feature.encode_payload(value, f"{where}, feature {path or 'value'!r}"))

    # ---- decoding ----------------------------------------------------------------

    def decode_many(self, records: Sequence[bytes]) -> list[Any]:
        """Decodes a list of records."""
        decode = self.decode
        return [decode(r) for r in records]

    def decode_slow(self, record: bytes) -> Any:
        """Decodes any record, checking the header and every length (the general path)."""
        n = len(record)
        if n < HEADER_SIZE:
            raise CorruptSourceError(f"record of {n} bytes is too short for a thresher record")
        magic, version, _, count = _HEADER.unpack_from(record, 0)
        if magic != RECORD_MAGIC:
            raise CorruptSourceError(f"not a thresher record (starts with {bytes(record[:4])!r})")
        if version != RECORD_VERSION:
            raise CorruptSourceError(f"record encoding version {version} is not supported "
                                     f"(this thresher reads version {RECORD_VERSION})")
        if count != len(self.leaves):
            raise CorruptSourceError(f"record has {count} leaves but the features have "
                                     f"{len(self.leaves)}")
        values = []
        offset = HEADER_SIZE
        for path, leaf in self.leaves:
            if offset + 8 > n:
                raise CorruptSourceError(f"record of {n} bytes ends before feature {path!r}")
            (length,) = _LEN.unpack_from(record, offset)
            offset += 8
            if offset + length > n:
                raise CorruptSourceError(f"feature {path!r} claims {length} bytes but the record "
                                         f"has {n - offset} left")
            try:
                values.append(leaf.decode_payload(record, offset, length))
            except CorruptSourceError as e:
                raise CorruptSourceError(f"feature {path!r}: {e}") from None
            offset += _pad(length)
        if offset != n:
            raise CorruptSourceError(f"record has {n - offset} trailing bytes")
        return self._assemble(self._structure, values)

    def _assemble(self, structure: Structure, values: list[Any]) -> Any:
        if isinstance(structure, int):
            return values[structure]
        return {k: self._assemble(s, values) for k, s in structure}

    def _generate_fast_decoder(self) -> Callable[[bytes], Any]:
        # Only identifiers we make and integer offsets go into the source; keys, shapes
        # and dtypes are passed in the namespace, never written into the code.
        ns: dict[str, Any] = {"_nd": np.ndarray, "_slow": self.decode_slow}
        exprs = []
        for i, ((_, leaf), offset) in enumerate(zip(self.leaves, self._offsets, strict=False)):
            shape, dtype, scalar = leaf.array_view  # type: ignore[misc]
            ns[f"_s{i}"], ns[f"_d{i}"] = shape, dtype
            exprs.append(f"_nd(_s{i}, _d{i}, r, {int(offset)})" + ("[()]" if scalar else ""))
        keys: list[str] = []

        def build(structure: Structure) -> str:
            if isinstance(structure, int):
                return exprs[structure]
            items = []
            for k, s in structure:
                name = f"_k{len(keys)}"
                ns[name] = k
                keys.append(k)
                items.append(f"{name}: {build(s)}")
            return "{" + ", ".join(items) + "}"

        body = build(self._structure)
        src = (f"def decode(r):\n"
               f"    if len(r) != {int(self.record_size or 0)}:\n"
               f"        return _slow(r)\n"
               f"    return {body}\n")
        exec(compile(src, f"<thresher record decoder {len(self.leaves)} leaves>", "exec"), ns)
        fn: Callable[[bytes], Any] = ns["decode"]
        fn.__doc__ = "Decodes one record (generated fixed-layout fast path)."
        return fn
