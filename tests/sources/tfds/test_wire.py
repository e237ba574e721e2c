"""The tf.train.Example wire decoder against protobuf's own encoder (from the test extra)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from thresher.sources.formats.tfds.wire import WireError, decode_varints, parse_example



def _proto() -> tuple:
    from tensorflow_datasets.proto import tf_example_pb2, tf_feature_pb2

    return tf_example_pb2, tf_feature_pb2


_int64 = st.integers(-(2**63), 2**63 - 1)
_value = st.one_of(
    st.tuples(st.just("int"), st.lists(_int64, max_size=20)),
    st.tuples(st.just("float"), st.lists(st.floats(width=32, allow_nan=False), max_size=20)),
    st.tuples(st.just("bytes"), st.lists(st.binary(max_size=40), max_size=5)),
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=12), _value, max_size=6))
def test_parse_example_equals_protobuf(features: dict) -> None:
    ex_pb2, feat_pb2 = _proto()
    proto = ex_pb2.Example()
    for key, (kind, values) in features.items():
        f = proto.features.feature[key]
        if kind == "int":
            f.int64_list.value.extend(values)
        elif kind == "float":
            f.float_list.value.extend(values)
        else:
            f.bytes_list.value.extend(values)
    parsed = parse_example(proto.SerializeToString())
    assert sorted(parsed) == sorted(features)
    for key, (kind, values) in features.items():
        got = parsed[key]
        if kind == "bytes":
            assert got == values or (not values and len(got) == 0)
        elif kind == "int":
            assert got.dtype == np.int64 and got.tolist() == values
        else:
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, np.asarray(values, np.float32))


@settings(max_examples=200, deadline=None)
@given(st.lists(_int64, max_size=50))
def test_decode_varints_matches_protobuf_packing(values: list) -> None:
    _, feat_pb2 = _proto()
    packed = feat_pb2.Int64List(value=values).SerializeToString()
    if values:  # field 1, wire type 2, length, then the varints
        body = packed[1:]
        n, i = 0, 0
        shift = 0
        while True:
            b = body[i]
            n |= (b & 0x7F) << shift
            i += 1
            shift += 7
            if b < 0x80:
                break
        assert decode_varints(body[i:i + n]).tolist() == values


def test_unpacked_numbers_are_read_too() -> None:
    # Int64List with two unpacked values (tag 8) and FloatList with one (tag 13)
    ints = bytes([8, 5, 8, 0x7F])
    floats = bytes([13]) + np.float32(1.5).tobytes()
    feat_i = bytes([26, len(ints)]) + ints
    feat_f = bytes([18, len(floats)]) + floats
    entries = b""
    for key, feat in ((b"i", feat_i), (b"f", feat_f)):
        entry = bytes([10, len(key)]) + key + bytes([18, len(feat)]) + feat
        entries += bytes([10, len(entry)]) + entry
    parsed = parse_example(bytes([10, len(entries)]) + entries)
    assert parsed["i"].tolist() == [5, 127] and parsed["f"].tolist() == [1.5]


@pytest.mark.parametrize("bad", [b"\x0a\x05ab", b"\x0a", b"\x80", b"\x0b", b"\x0a\x02\x0a\x09"])
def test_malformed_bytes_raise_wire_error(bad: bytes) -> None:
    with pytest.raises(WireError):
        parse_example(bad)
