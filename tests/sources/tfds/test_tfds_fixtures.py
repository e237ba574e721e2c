"""thresher reads of TFDS-written directories equal what tfds.data_source returned for them.

The directories and TFDS's values were made by ``tests/fixtures/tfds/make_fixtures.py``
with tensorflow-datasets itself (one dataset per feature family, 3 shards per split).
"""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import thresher as th
from thresher.errors import SplitError
from tests.sources.tfds.expected import DATA, NAMES, assert_same, load

_EXPECTED = {name: load(name) for name in NAMES}


def _dir(name: str) -> str:
    return os.path.join(DATA, name)


def _expected_records(name: str, keys: list[list]) -> list:
    splits = _EXPECTED[name]["splits"]
    return [splits[s][i] for s, i in keys]


@pytest.mark.parametrize("name", NAMES)
def test_every_split_reads_as_tfds_returned(name: str) -> None:
    expected = _EXPECTED[name]["splits"]
    sources = th.data_source(_dir(name))
    assert sorted(sources) == sorted(expected)
    for split, values in expected.items():
        ds = sources[split]
        assert len(ds) == len(values)
        for k, v in enumerate(values):
            assert_same(ds[k], v, f"{name}/{split}[{k}]")
        assert_same(ds.__getitems__(list(range(len(ds)))), values, f"{name}/{split} batched")


@pytest.mark.parametrize("name", NAMES)
def test_split_strings_select_what_tfds_selects(name: str) -> None:
    for spec, keys in _EXPECTED[name]["split_strings"].items():
        if isinstance(keys, dict):  # TFDS refused it (it selects no shard): thresher is empty
            assert len(th.data_source(_dir(name), split=spec)) == 0
            continue
        ds = th.data_source(_dir(name), split=spec)
        want = _expected_records(name, keys)
        assert len(ds) == len(want), spec
        assert_same(ds.__getitems__(list(range(len(ds)))), want, f"{name}:{spec}")
        assert th.builder(_dir(name)).info.splits[spec].num_examples == len(want)


@pytest.mark.parametrize("name", ["images", "sequences"])
def test_thresher_split_objects_match_tfds_objects(name: str) -> None:
    exp = _EXPECTED[name]
    for part, keys in zip(th.even_splits("train", 3), exp["even_splits_train_3"]):
        ds = th.data_source(_dir(name), split=part)
        assert len(ds) == len(keys)
        assert_same(ds.__getitems__(list(range(len(keys)))), _expected_records(name, keys),
                    str(part))
    ri = th.ReadInstruction("train", 10, 40, unit="%") + th.ReadInstruction("test", to=2)
    ds = th.data_source(_dir(name), split=ri)
    assert len(ds) == len(exp["read_instruction"]["keys"])
    assert_same(ds.__getitems__(list(range(len(ds)))),
                _expected_records(name, exp["read_instruction"]["keys"]), str(ri))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 10**6), max_size=20), st.sampled_from(NAMES))
def test_random_batched_reads_equal_single_reads(keys: list[int], name: str) -> None:
    ds = th.data_source(_dir(name), split="test+train")
    ks = [k % len(ds) for k in keys]
    batch = ds.__getitems__(ks)
    for k, v in zip(ks, batch):
        assert_same(v, ds[k], f"{name}[{k}]")


def test_dataset_dir_reads_newest_version_and_info() -> None:
    b = th.builder(_dir("images"))
    assert b.data_dir.endswith(os.path.join("images", "2.0.1"))
    info = b.info
    assert (info.name, info.version, info.file_format) == ("images", "2.0.1", "array_record")
    assert info.splits["train"].num_examples == 48 and info.splits["train"].num_shards == 3
    assert info.splits["test"].shard_lengths == (3, 4, 3)
    assert info.supervised_keys == ("image", "label")
    assert info.features["label"].names == ["zero", "one", "two", "three", "four"]
    assert info.features["label2"].num_classes == 3 and info.features["label2"].names is None
    assert info.features["image"].shape == (28, 28, 1)
    assert th.builder(_dir("sequences")).info.features["objects"].feature["label"].names == [
        "a", "b"]


def test_source_pickles_and_reads_in_another_process_layout() -> None:
    ds = th.data_source(_dir("tensors"), split="train[5:17]")
    clone = pickle.loads(pickle.dumps(ds))
    assert_same(clone.__getitems__([0, 11, 3]), ds.__getitems__([0, 11, 3]))


def test_loader_over_tfds_source_is_deterministic_for_any_worker_count() -> None:
    ds = th.data_source(_dir("images"), split="train")
    runs = []
    for workers in (0, 2):
        loader = th.DataLoader(ds, th.IndexSampler(len(ds), shuffle=True, seed=3, num_epochs=1),
                               [th.MapTransform(lambda x: x["label"])], worker_count=workers)
        runs.append([int(x) for x in loader])
    assert runs[0] == runs[1] and sorted(runs[0]) == sorted(
        v["label"] for v in _EXPECTED["images"]["splits"]["train"])


def test_bad_split_names_the_split() -> None:
    with pytest.raises(SplitError, match="validation"):
        th.data_source(_dir("images"), split="validation")
    np.testing.assert_equal(len(th.data_source(_dir("images"), split="all")), 58)


@pytest.mark.parametrize("name", ["images", "tensors"])
def test_tfds_split_objects_are_accepted_as_they_are(name: str) -> None:
    import tensorflow_datasets as tfds

    exp = _EXPECTED[name]
    for part, keys in zip(tfds.even_splits("train", n=3), exp["even_splits_train_3"]):
        ds = th.data_source(_dir(name), split=part)
        assert_same(ds.__getitems__(list(range(len(ds)))), _expected_records(name, keys),
                    repr(part))
        assert th.builder(_dir(name)).info.splits[part].num_examples == len(keys)
    ri = (tfds.core.ReadInstruction("train", from_=10, to=40, unit="%")
          + tfds.core.ReadInstruction("test", to=2))
    for ds in th.data_source(_dir(name), split=[ri]):
        assert_same(ds.__getitems__(list(range(len(ds)))),
                    _expected_records(name, exp["read_instruction"]["keys"]), repr(ri))
    with pytest.raises(SplitError, match="validation"):
        th.data_source(_dir(name), split=tfds.core.ReadInstruction("validation"))
