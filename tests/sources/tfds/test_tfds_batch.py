"""The column-wise batch decoder gives exactly what the record-by-record decoder gives.

Records are serialized by protobuf itself (tensorflow-datasets' copy of the Example proto,
in the test extra), for random feature trees; some records are then broken (a feature
missing or of another kind, one value more or less, an extra feature, bytes cut or a bit
changed). Whenever the reference
decoder fails on a record, the batch decoder must decline the batch (the source then goes
record by record and raises the reference's error); whenever it answers, it must equal the
reference value for value, type for type.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from tests.sources.tfds.expected import assert_same
from thresher.sources.formats.tfds.batch import BatchDecoder, scan
from thresher.sources.formats.tfds.decode import TfdsCodec
from thresher.sources.formats.tfds.features import ClassLabel, FeaturesDict, Sequence, Tensor, Text

_DTYPES = ["int8", "int32", "int64", "uint8", "uint32", "uint64", "float16", "float32",
           "float64", "bool"]

# A leaf: ("num", dtype, shape) | ("label", n) | ("text",) | ("encoded", dtype, shape)
_leaf = st.one_of(
    st.tuples(st.just("num"), st.sampled_from(_DTYPES),
              st.sampled_from([(), (1,), (3,), (2, 2), (None,), (None, 2)])),
    st.tuples(st.just("label"), st.integers(2, 5)),
    st.tuples(st.just("text")),
    st.tuples(st.just("encoded"), st.sampled_from(["uint8", "float32"]),
              st.sampled_from([(2,), (None,)])),
)
_tree = st.recursive(_leaf, lambda inner: st.dictionaries(st.sampled_from("abc"), inner,
                                                           min_size=1, max_size=3),
                     max_leaves=5)
_top = st.dictionaries(st.sampled_from(["x", "y", "label", "image"]), _tree, min_size=1,
                       max_size=4)


def _feature(spec: object) -> object:
    if isinstance(spec, dict):
        return FeaturesDict({k: _feature(v) for k, v in spec.items()})
    kind = spec[0]
    if kind == "num":
        return Tensor(spec[2], spec[1])
    if kind == "label":
        return ClassLabel(spec[1])
    if kind == "text":
        return Text()
    return Tensor(spec[2], spec[1], encoding="bytes")


def _flat(spec: object, path: str = "") -> list[tuple[str, tuple]]:
    if isinstance(spec, dict):
        return [x for k, v in spec.items() for x in _flat(v, f"{path}/{k}".lstrip("/"))]
    return [(path, spec)]


def _stored(spec: tuple, rng: np.random.Generator) -> tuple[str, list]:
    """The Example list TFDS stores for a random value of a leaf: (kind, values)."""
    kind = spec[0]
    if kind == "label":
        return "int", [int(rng.integers(0, spec[1]))]
    if kind == "text":
        return "bytes", [rng.bytes(int(rng.integers(0, 6)))]
    shape = tuple(int(rng.integers(0, 3)) if d is None else d for d in spec[2])
    dtype = np.dtype(spec[1])
    n = int(np.prod(shape))
    if dtype.kind == "f":
        values = rng.normal(size=n).astype(dtype)
    elif dtype.kind == "b":
        values = rng.integers(0, 2, n).astype(bool)
        if kind == "num":  # TFDS stores bools as ints
            return "int", [int(v) for v in values]
    else:
        info = np.iinfo(dtype)
        values = rng.integers(max(info.min, -2**40), min(info.max, 2**40), n).astype(dtype)
    if kind == "encoded":
        return "bytes", [values.tobytes()]
    return ("float" if dtype.kind == "f" else "int"), values.tolist()


def _serialize(features: dict[str, tuple[str, list]]) -> bytes:
    from tensorflow_datasets.proto import tf_example_pb2

    proto = tf_example_pb2.Example()
    for key, (kind, values) in features.items():
        f = proto.features.feature[key]
        getattr(f, {"int": "int64_list", "float": "float_list", "bytes": "bytes_list"}[kind]
                ).value.extend(values)
    return proto.SerializeToString()


def _break(features: dict, rng: np.random.Generator, how: int) -> dict:
    if not features:
        return features
    key = sorted(features)[int(rng.integers(0, len(features)))]
    kind, values = features[key]
    if how == 0:
        del features[key]
    elif how == 1:
        features[key] = ("bytes", [b"x"]) if kind != "bytes" else ("int", [1])
    elif how == 2:
        features[key] = (kind, values + values[:1] if values else [b"" if kind == "bytes" else 1])
    elif how == 3:
        features[key] = (kind, values[:-1])
    else:
        features["extra/feature"] = ("float", [1.5])
    return features


def _reference(codec: TfdsCodec, record: bytes) -> object:
    try:
        return codec.decode(record)
    except Exception as e:  # noqa: BLE001 - any failure means "the batch must decline"
        return e


@settings(max_examples=150, deadline=None)
@given(_top, st.integers(1, 6), st.integers(0, 2**32 - 1),
       st.lists(st.tuples(st.integers(0, 5), st.integers(0, 8)), max_size=2))
def test_batch_decoder_equals_the_record_decoder(spec: dict, n: int, seed: int,
                                                 damage: list[tuple[int, int]]) -> None:
    codec = TfdsCodec(_feature(spec))
    batch = BatchDecoder(codec)
    assert batch.supported
    rng = np.random.default_rng(seed)
    leaves = _flat(spec)
    records = []
    damage = [(which % n, how) for which, how in damage]
    for i in range(n):
        features = {path: _stored(leaf, rng) for path, leaf in leaves}
        for which, how in damage:
            if which == i and how < 5:
                features = _break(features, rng, how)
        records.append(_serialize(features))
    for which, how in damage:  # bytes-level damage: cut or change one byte
        if how >= 5 and records[which]:
            rec = bytearray(records[which])
            at = int(rng.integers(0, len(rec)))
            records[which] = bytes(rec[:at]) if how == 5 else bytes(
                rec[:at] + bytes([rec[at] ^ (1, 8, 128)[how - 6]]) + rec[at + 1:])
    expected = [_reference(codec, r) for r in records]
    got = batch.decode(records)
    if any(isinstance(e, Exception) for e in expected):
        assert got is None
        return
    if not damage:
        assert got is not None  # well-formed records take the fast path
    if got is not None:
        assert_same(got, expected, "batch")


def test_sequences_take_the_record_path() -> None:
    codec = TfdsCodec(FeaturesDict({"s": Sequence(Tensor((), "int64"), None)}))
    assert not BatchDecoder(codec).supported
    assert BatchDecoder(codec).decode([b""]) is None


def test_scan_declines_what_is_not_canonical() -> None:
    canonical = _serialize({"k": ("int", [300, 1])})
    assert scan(canonical) == {b"k": (3, len(canonical) - 3, len(canonical))}
    assert scan(canonical[:-1]) is None
    assert scan(b"") is None
    assert scan(_serialize({"k": ("bytes", [b"a", b"b"])})) is None  # two values


def test_a_varint_cut_at_a_record_end_does_not_run_into_the_next_record() -> None:
    codec = TfdsCodec(FeaturesDict({"k": Tensor((None,), "int64")}))
    good = _serialize({"k": ("int", [1, 2])})
    bad = good[:-1] + bytes([good[-1] | 0x80])  # the last number now "continues"
    assert isinstance(_reference(codec, bad), Exception)
    assert BatchDecoder(codec).decode([bad, good]) is None
    assert_same(BatchDecoder(codec).decode([good, good]), [codec.decode(good)] * 2, "good")
