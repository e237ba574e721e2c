"""Every feature kind round-trips through the record encoding (hypothesis for shapes/dtypes)."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from thresher.errors import CorruptSourceError, FeatureError
from thresher.features import (
    ClassLabel,
    FeaturesDict,
    Image,
    RecordCodec,
    Scalar,
    Tensor,
    Text,
    feature_from_json,
)
from thresher.features.base import DTYPES

dtypes = st.sampled_from(DTYPES)


def assert_same(a, b):
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == sorted(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, str):
        assert a == b
    else:
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        assert a_arr.dtype == b_arr.dtype and a_arr.shape == b_arr.shape
        assert a_arr.tobytes() == b_arr.tobytes()  # bit-exact, NaNs included


@st.composite
def tensor_cases(draw):
    dtype = np.dtype(draw(dtypes))
    value = draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)))
    shape = tuple(None if draw(st.booleans()) else d for d in value.shape)
    return Tensor(shape, dtype), value


@settings(max_examples=150, deadline=None)
@given(tensor_cases())
def test_tensor_round_trip(case):
    feature, value = case
    codec = RecordCodec({"t": feature})
    rec = codec.encode({"t": value})
    assert len(rec) % 8 == 0
    out = codec.decode(rec)["t"]
    assert_same(value, out)
    assert not out.flags.writeable  # a view over the record
    assert codec.decode_slow(rec)["t"].tobytes() == value.tobytes()
    # Round trip through JSON and pickle gives the same codec.
    assert feature_from_json(feature.to_json()) == feature
    assert pickle.loads(pickle.dumps(codec)).decode(rec)["t"].tobytes() == value.tobytes()


@settings(max_examples=80, deadline=None)
@given(dtypes, st.data())
def test_scalar_round_trip(dtype, data):
    value = data.draw(hnp.arrays(np.dtype(dtype), ()))[()]
    codec = RecordCodec(Scalar(dtype))
    out = codec.decode(codec.encode(value))
    assert isinstance(out, np.generic) and out.dtype == np.dtype(dtype)
    assert np.asarray(out).tobytes() == np.asarray(value).tobytes()


@settings(max_examples=60, deadline=None)
@given(st.text(), st.text(max_size=3))
def test_text_round_trip(a, b):
    codec = RecordCodec({"a": Text(), "b": {"c": Text()}})
    assert codec.record_size is None
    assert codec.decode(codec.encode({"a": a, "b": {"c": b}})) == {"a": a, "b": {"c": b}}


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 1000), st.data())
def test_class_label_round_trip(n, data):
    c = ClassLabel(num_classes=n)
    v = data.draw(st.integers(0, n - 1))
    codec = RecordCodec({"label": c})
    out = codec.decode(codec.encode({"label": v}))["label"]
    assert out == v and isinstance(out, np.int64)


def test_class_label_names():
    c = ClassLabel(names=["cat", "dog", "eel"])
    codec = RecordCodec({"y": c})
    assert codec.decode(codec.encode({"y": "eel"}))["y"] == 2
    assert codec.decode(codec.encode({"y": np.int32(1)}))["y"] == 1
    assert feature_from_json(c.to_json()).names == ["cat", "dog", "eel"]
    with pytest.raises(FeatureError, match="unknown class name 'cow'"):
        codec.encode({"y": "cow"})
    with pytest.raises(FeatureError, match=r"class id 3 is not in \[0, 3\)"):
        codec.encode({"y": 3})
    with pytest.raises(FeatureError):
        codec.encode({"y": 1.0})
    with pytest.raises(FeatureError, match="num_classes=2 but 3 names"):
        ClassLabel(num_classes=2, names=["a", "b", "c"])
    with pytest.raises(FeatureError):
        ClassLabel()


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.sampled_from([1, 3, 4]),
       st.sampled_from(["png", "none"]), st.booleans(), st.data())
def test_lossless_image_round_trip(h, w, c, encoding, known, data):
    img = data.draw(hnp.arrays(np.uint8, (h, w, c)))
    feature = Image((h, w, c) if known else (None, None, c), encoding=encoding)
    codec = RecordCodec({"image": feature, "label": ClassLabel(num_classes=2)})
    rec = codec.encode({"image": img, "label": 1})
    out = codec.decode(rec)
    assert_same(img, out["image"])
    assert codec.record_size == (None if encoding == "png" or not known else len(rec))


def test_jpeg_image_is_close():
    y, x = np.mgrid[0:32, 0:32]
    img = np.stack([x * 8, y * 8, (x + y) * 4], axis=-1).astype(np.uint8)
    codec = RecordCodec(Image((32, 32, 3), encoding="jpeg"))
    out = codec.decode(codec.encode(img))
    assert out.shape == (32, 32, 3) and np.abs(out.astype(int) - img).mean() < 3


def test_encoded_image_input_is_stored_as_is(tmp_path):
    from PIL import Image as PILImage

    img = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    path = tmp_path / "x.png"
    PILImage.fromarray(img).save(path)
    data = path.read_bytes()
    feature = Image((None, None, 3), encoding="png")
    assert feature.encode_payload(data) == data
    assert feature.encode_payload(str(path)) == data
    assert np.array_equal(Image((4, 4, 3), encoding="none").decode_payload(
        Image((4, 4, 3), encoding="none").encode_payload(path), 0, 48), img)
    with pytest.raises(FeatureError, match=r"expected an image of shape \(5, 4, 3\)"):
        Image((5, 4, 3)).encode_payload(data)
    with pytest.raises(FeatureError, match="cannot decode"):
        feature.encode_payload(b"not an image")
    with pytest.raises(FeatureError, match="cannot read image file"):
        feature.encode_payload(tmp_path / "missing.png")


def test_grayscale_two_dimensional_input():
    f = Image((2, 2, 1), encoding="png")
    p = f.encode_payload(np.array([[0, 255], [7, 9]], np.uint8))
    assert f.decode_payload(p, 0, len(p))[:, :, 0].tolist() == [[0, 255], [7, 9]]


def test_nested_fixed_layout_dicts():
    codec = RecordCodec({"a": {"b": Scalar("int8"), "c": {"d": Scalar("int16")}},
                         "e": Tensor((2,), "uint8"), "f": {"g": Scalar("int32")}})
    ex = {"a": {"b": 1, "c": {"d": 2}}, "e": [3, 4], "f": {"g": 5}}
    assert codec.record_size is not None
    for decode in (codec.decode, codec.decode_slow):
        out = decode(codec.encode(ex))
        assert out["a"]["b"] == 1 and out["a"]["c"]["d"] == 2 and out["f"]["g"] == 5
        assert out["e"].tolist() == [3, 4] and list(out) == ["a", "e", "f"]


def test_nested_dicts_and_key_order():
    codec = RecordCodec({"z": Scalar("int8"), "a": {"y": Text(), "b": Tensor((2,), "float32")}})
    assert [p for p, _ in codec.leaves] == ["a/b", "a/y", "z"]
    ex = {"z": 3, "a": {"y": "hi", "b": [1.5, 2.5]}}
    out = codec.decode(codec.encode(ex))
    assert list(out) == ["a", "z"] and out["a"]["y"] == "hi" and out["z"] == 3
    assert out["a"]["b"].tolist() == [1.5, 2.5]


def test_record_layout_is_the_documented_one():
    codec = RecordCodec({"b": Text(), "a": Scalar("uint16")})
    rec = codec.encode({"a": 258, "b": "xyz"})
    assert rec[:8] == b"TH\x01\x00" + struct.pack("<I", 2)
    assert struct.unpack_from("<Q", rec, 8)[0] == 2 and rec[16:18] == b"\x02\x01"
    assert rec[18:24] == b"\0" * 6
    assert struct.unpack_from("<Q", rec, 24)[0] == 3 and rec[32:35] == b"xyz"
    assert len(rec) == 40


def test_fixed_layout_record_for_mnist():
    codec = RecordCodec({"image": Image((28, 28, 1), encoding="none"),
                         "label": ClassLabel(num_classes=10)})
    assert codec.record_size == 8 + 8 + 784 + 8 + 8


@pytest.mark.parametrize("example, why", [
    ({"x": [1, 2]}, r"missing feature\(s\) \['y'\]"),
    ({"x": [1, 2], "y": 1, "w": 0}, r"unexpected key\(s\) \['w'\]"),
    ({"x": [1, 2, 3], "y": 1}, r"feature 'x'.*expected shape \(2,\), got \(3,\)"),
    ({"x": [1.5, 2], "y": 1}, r"feature 'x'.*expected int16 values, got float64"),
    ({"x": [1, 70000], "y": 1}, r"out of range for int16"),
    ({"x": [1, 2], "y": "a"}, r"feature 'y'"),
    ([1, 2], r"expected a dict"),
])
def test_bad_examples_name_the_feature(example, why):
    codec = RecordCodec({"x": Tensor((2,), "int16"), "y": Scalar("int64")})
    with pytest.raises(FeatureError, match=why):
        codec.encode(example, where="example 7 of split 'train'")


def test_casts_that_lose_nothing_are_allowed():
    codec = RecordCodec({"f": Tensor((2,), "float32"), "u": Tensor((2,), "uint8"),
                         "b": Scalar("bool")})
    out = codec.decode(codec.encode({"f": [1, 2.5], "u": np.array([0, 255]), "b": True}))
    assert out["f"].dtype == np.float32 and out["u"].tolist() == [0, 255] and out["b"]


@pytest.mark.parametrize("make", [
    lambda: Tensor((2,), "object"), lambda: Tensor((2,), "str"), lambda: Tensor((-1,), "int8"),
    lambda: Tensor("ab", "int8"), lambda: Image((2, 2)), lambda: Image((2, 2, 2)),
    lambda: Image((2, 2, 4), encoding="jpeg"), lambda: Image(encoding="gif"),
    lambda: FeaturesDict({1: Text()}), lambda: RecordCodec({"a": 3}),
])
def test_bad_feature_specs(make):
    with pytest.raises(FeatureError):
        make()


@pytest.mark.parametrize("mutate, why", [
    (lambda r: r[:-8], "ends before|claims|trailing|expected"),
    (lambda r: r + b"\0" * 8, "trailing|expected"),
    (lambda r: b"XX" + r[2:], "not a thresher record"),
    (lambda r: r[:2] + b"\x09" + r[3:], "version 9"),
    (lambda r: r[:4] + struct.pack("<I", 5) + r[8:], "5 leaves"),
    (lambda r: b"", "too short"),
])
def test_corrupt_records(mutate, why):
    for features in [{"x": Tensor((3,), "int64"), "t": Text()}, {"x": Tensor((3,), "int64")}]:
        codec = RecordCodec(features)
        rec = codec.encode({k: ([1, 2, 3] if k == "x" else "abc") for k in features})
        bad = mutate(rec)
        # The fixed-layout fast path checks the length only; decode_slow checks everything.
        decode = codec.decode if len(bad) != len(rec) else codec.decode_slow
        with pytest.raises(CorruptSourceError, match=why):
            decode(bad)


def test_feature_json_errors():
    for bad in [{"type": "Nope"}, {"type": "Tensor", "dtype": "int8"}, [], {"no": "type"},
                {"type": "Image", "shape": [1, 1, 3], "dtype": "uint16", "encoding": "png"}]:
        with pytest.raises(FeatureError):
            feature_from_json(bad)
