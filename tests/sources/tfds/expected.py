"""Loading what TFDS returned for the fixtures, and comparing values strictly (types too)."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import numpy as np

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "fixtures", "tfds")
DATA = os.path.join(FIXTURES, "data")
NAMES = ("tensors", "images", "sequences", "media")


def _decode(node: Any, arrays: Any) -> Any:
    if "dict" in node:
        return {k: _decode(v, arrays) for k, v in node["dict"].items()}
    if "list" in node:
        return [_decode(v, arrays) for v in node["list"]]
    if "objarray" in node:
        out = np.empty(len(node["objarray"]), object)
        out[:] = [_decode(v, arrays) for v in node["objarray"]]
        return out.reshape(node["shape"])
    if "npscalar" in node:
        return arrays[node["array"]][()]
    if "array" in node:
        return arrays[node["array"]]
    if "bytes" in node:
        return base64.b64decode(node["bytes"])
    if "str" in node:
        return node["str"]
    if "bool" in node:
        return bool(node["bool"])
    if "int" in node:
        return int(node["int"])
    if "float" in node:
        return float.fromhex(node["float"])
    raise AssertionError(f"unknown node {node}")


def load(name: str) -> dict[str, Any]:
    """``{"splits": {split: [values]}, "split_strings": {...}, ...}`` as TFDS returned."""
    with open(os.path.join(FIXTURES, "expected", f"{name}.json")) as f:
        obj = json.load(f)
    with np.load(os.path.join(FIXTURES, "expected", f"{name}.npz"), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    obj["splits"] = {s: [_decode(v, arrays) for v in vs] for s, vs in obj["splits"].items()}
    return obj


def assert_same(actual: Any, expected: Any, where: str = "") -> None:
    """Equal values of equal types: dict keys, list lengths, dtypes, shapes, Python types."""
    assert type(actual) is type(expected), f"{where}: {type(actual)} != {type(expected)}"
    if isinstance(expected, dict):
        assert sorted(actual) == sorted(expected), f"{where}: keys {sorted(actual)}"
        for k in expected:
            assert_same(actual[k], expected[k], f"{where}/{k}")
    elif isinstance(expected, list):
        assert len(actual) == len(expected), f"{where}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{i}]")
    elif isinstance(expected, np.ndarray) and expected.dtype == object:
        assert actual.dtype == object and actual.shape == expected.shape, where
        for i, (a, e) in enumerate(zip(actual.ravel(), expected.ravel())):
            assert_same(a, e, f"{where}[{i}]")
    elif isinstance(expected, (np.ndarray, np.generic)):
        assert actual.dtype == expected.dtype, f"{where}: {actual.dtype} != {expected.dtype}"
        assert np.shape(actual) == np.shape(expected), f"{where}: {np.shape(actual)}"
        assert np.array_equal(actual, expected, equal_nan=expected.dtype.kind in "fc"), where
    elif isinstance(expected, float):
        assert actual == expected or (actual != actual and expected != expected), where
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"
