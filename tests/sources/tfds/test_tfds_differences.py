"""The TFDS cases of issue 31, side by side with tensorflow-datasets (4.9.10, without TensorFlow).

- a ``Tensor(shape=(None, None))`` with ``encoding="bytes"`` or ``"zlib"`` (stored by TFDS as
  ``name/value`` + ``name/shape``) reads as TFDS reads it;
- ``Sequence(Sequence(Text()))`` decodes as TFDS's NumPy decoder decodes it (TFDS cannot write
  it without TensorFlow, so the record is serialized here with TFDS's own Example proto);
- an out-of-range key is a ValueError, as TFDS raises (and still an IndexError).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import thresher as th
from tests.sources.tfds.expected import assert_same
from tests.sources.tfds.test_tfds_batch import _serialize
from thresher.sources.formats.tfds.decode import TfdsCodec
from thresher.sources.formats.tfds.features import FeaturesDict, Sequence, Tensor, Text

tfds = pytest.importorskip("tensorflow_datasets")


def _write(data_dir: str) -> str:
    f = tfds.features

    def info(self: Any) -> Any:
        return tfds.core.DatasetInfo(builder=self, features=f.FeaturesDict({
            "b": f.Tensor(shape=(None, None), dtype=np.int32, encoding="bytes"),
            "z": f.Tensor(shape=(None, None, 2), dtype=np.float32, encoding="zlib"),
        }))

    def split_generators(self: Any, dl_manager: Any) -> Any:
        return {"train": self._generate_examples(7)}

    def generate(self: Any, n: int) -> Any:
        for i in range(n):
            yield i, {"b": np.arange((i + 1) * 3, dtype=np.int32).reshape(i + 1, 3),
                      "z": np.full((i % 3 + 1, i + 1, 2), i / 2, np.float32)}

    # made with type(), as tests/sources/tfds/test_tfds_live.py does (a unique name for TFDS's registry)
    cls = type(f"encoded_toy_{os.getpid()}", (tfds.core.GeneratorBasedBuilder,), {
        "VERSION": tfds.core.Version("1.0.0"), "_info": info, "_split_generators": split_generators,
        "_generate_examples": generate})
    builder = cls(data_dir=data_dir, file_format="array_record")
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=2))
    return str(builder.data_dir)


@pytest.fixture(scope="module")
def encoded(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _write(str(tmp_path_factory.mktemp("tfds_encoded")))


def test_encoded_tensors_with_several_unknown_dims_read_as_tfds_reads_them(encoded: str) -> None:
    theirs = tfds.builder_from_directory(encoded).as_data_source(split="train")
    ours = th.data_source(encoded, split="train")
    assert len(ours) == len(theirs) == 7
    for k in range(7):
        assert_same(ours[k], theirs[k], f"record {k}")
    assert sorted(ours[k]["b"].shape for k in range(7)) == [(i + 1, 3) for i in range(7)]
    batch = ours.__getitems__(list(range(7)))
    for k in range(7):
        assert_same(batch[k], theirs[k], f"batched record {k}")


def test_an_out_of_range_key_is_the_value_error_tfds_raises(encoded: str) -> None:
    theirs = tfds.builder_from_directory(encoded).as_data_source(split="train")
    ours = th.data_source(encoded, split="train")
    with pytest.raises(ValueError):
        theirs[7]
    with pytest.raises(ValueError) as e:
        ours[7]
    assert isinstance(e.value, IndexError) and isinstance(e.value, th.errors.RecordKeyError)


@pytest.mark.parametrize(("ours", "values", "lengths"), [
    (Sequence(Sequence(Text(), None), None), ("bytes", [b"a", b"bc", b"d"]), [2, 0, 1]),
    (Sequence(Sequence(Text(), None), None), ("bytes", []), []),
    (Sequence(Sequence(Tensor((), "int64"), None), None), ("int", [5, 6, 7, 8]), [1, 3]),
])
def test_nested_sequences_of_text_decode_as_tfds_decodes_them(ours: Any, values: tuple, lengths: list) -> None:
    from tensorflow_datasets.core import example_parser

    f = tfds.features
    inner = f.Text() if values[0] == "bytes" else f.Scalar(np.int64)
    theirs = f.FeaturesDict({"w": f.Sequence(f.Sequence(inner))})
    record = _serialize({"w/ragged_flat_values": values, "w/ragged_row_lengths_0": ("int", lengths)})
    expected = theirs.decode_example_np(example_parser.ExampleParserNp(theirs.get_serialized_info())
                                        .parse_example(record))
    assert_same(TfdsCodec(FeaturesDict({"w": ours})).decode(record), expected)


def test_the_docs_list_what_is_read() -> None:
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "tfds.md"), encoding="utf-8") as f:
        text = f.read()
    assert "Sequence(Sequence(Text()))" in text and 'encoding="bytes"/"zlib"' in text
