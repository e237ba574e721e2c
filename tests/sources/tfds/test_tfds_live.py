"""Live comparison with tensorflow-datasets (installed without TensorFlow by the test extra).

Hypothesis draws a feature spec (no images: writing them needs TensorFlow), TFDS writes a
small array_record dataset with it, and every split string read through thresher must
equal what ``tfds`` data sources return for it: same keys, types, dtypes, shapes, values.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import thresher as th
from tests.sources.tfds.expected import assert_same

_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float16",
           "float32", "float64", "bool"]
_COUNTER = itertools.count()

# a spec: ("scalar", dtype) | ("tensor", shape, dtype) | ("text",) | ("label", n)
#         | ("seq", spec, length) | ("dict", {name: spec})


def _leaves(first_dims: list) -> st.SearchStrategy:
    return st.one_of(
        st.tuples(st.just("scalar"), st.sampled_from(_DTYPES)),
        st.tuples(st.just("tensor"),
                  st.tuples(st.sampled_from(first_dims), st.integers(1, 3)).map(tuple)
                  | st.tuples(st.integers(1, 4)).map(tuple),
                  st.sampled_from(_DTYPES)),
        st.tuples(st.just("text")),
        st.tuples(st.just("label"), st.integers(2, 6)),
    )


_leaf = _leaves([None, 1, 3])
_fixed_leaf = _leaves([1, 3])  # TFDS cannot write Sequences of tensors of varying shapes
_spec = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.tuples(st.just("seq"), _fixed_leaf, st.sampled_from([None, 2])),
        st.tuples(st.just("dict"), st.dictionaries(st.sampled_from("abcd"), inner,
                                                   min_size=1, max_size=3))),
    max_leaves=4)
_top = st.dictionaries(st.sampled_from(["x", "y", "z", "w"]), _spec, min_size=1, max_size=3)


def _feature(tfds: Any, spec: tuple) -> Any:
    f = tfds.features
    kind = spec[0]
    if kind == "scalar":
        return f.Scalar(np.dtype(spec[1]))
    if kind == "tensor":
        return f.Tensor(shape=spec[1], dtype=np.dtype(spec[2]))
    if kind == "text":
        return f.Text()
    if kind == "label":
        return f.ClassLabel(num_classes=spec[1])
    if kind == "seq":
        return f.Sequence(_feature(tfds, spec[1]), length=spec[2])
    return f.FeaturesDict({k: _feature(tfds, v) for k, v in spec[1].items()})


def _value(spec: tuple, rng: np.random.Generator) -> Any:
    kind = spec[0]
    if kind in ("scalar", "tensor"):
        dtype = np.dtype(spec[-1])
        shape = () if kind == "scalar" else tuple(
            int(rng.integers(0, 3)) if d is None else d for d in spec[1])
        if dtype.kind == "b":
            return rng.integers(0, 2, shape).astype(bool)
        if dtype.kind == "f":
            return rng.normal(size=shape).astype(np.float32).astype(dtype)
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -2**40), min(info.max, 2**40), shape,
                            endpoint=True).astype(dtype)
    if kind == "text":
        return "".join(rng.choice(list("abcé😀 "), int(rng.integers(0, 6))))
    if kind == "label":
        return int(rng.integers(0, spec[1]))
    if kind == "seq":
        n = spec[2] if spec[2] is not None else int(rng.integers(0, 4))
        return [_value(spec[1], rng) for _ in range(n)]
    return {k: _value(v, rng) for k, v in spec[1].items()}


def _write(spec: dict, n_train: int, n_test: int, root: str) -> str:
    import tensorflow_datasets as tfds

    def info(self: Any) -> Any:
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(
            {k: _feature(tfds, v) for k, v in spec.items()}))

    def split_generators(self: Any, dl_manager: Any) -> Any:
        return {"train": self._generate_examples(0, n_train),
                "test": self._generate_examples(1, n_test)}

    def generate(self: Any, seed: int, n: int) -> Any:
        rng = np.random.default_rng(seed)
        for i in range(n):
            yield i, {k: _value(v, rng) for k, v in spec.items()}

    name = f"live_{next(_COUNTER)}_{os.getpid()}"
    cls = type(name, (tfds.core.GeneratorBasedBuilder,), {
        "VERSION": tfds.core.Version("1.0.0"), "_info": info,
        "_split_generators": split_generators, "_generate_examples": generate})
    builder = cls(data_dir=root, file_format="array_record")
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=2))
    return str(builder.data_dir)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(_top, st.integers(3, 30), st.integers(2, 9),
       st.lists(st.sampled_from(["train", "test", "all", "train[:50%]", "train[-2:]",
                                 "train[1:]+test", "test[:1shard]", "train[33%:66%]",
                                 "train[1shard:]+test[:1]"]), min_size=1, max_size=3))
def test_random_feature_specs_read_as_tfds_reads_them(spec: dict, n_train: int, n_test: int,
                                                      splits: list) -> None:
    import tensorflow_datasets as tfds

    with tempfile.TemporaryDirectory() as root:
        path = _write(spec, n_train, n_test, root)
        theirs_builder = tfds.builder_from_directory(path)
        for split in splits:
            try:
                theirs = theirs_builder.as_data_source(split=split)
            except ValueError:  # TFDS refuses a split that selects no shard file
                assert len(th.data_source(path, split=split)) == 0
                continue
            ours = th.data_source(path, split=split)
            assert len(ours) == len(theirs), split
            for k in range(len(theirs)):
                assert_same(ours[k], theirs[k], f"{split}[{k}] of {spec}")
            assert_same(ours.__getitems__(list(range(len(ours)))),
                        [theirs[k] for k in range(len(theirs))], split)
