"""prepare -> data_source round trips: every feature kind, split selection, determinism."""

from __future__ import annotations

import os
import pickle
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import thresher as th
from thresher import features as F
from thresher.errors import RecordKeyError
from thresher.splits import resolve_split


def make(tmp_path, n_train=40, n_test=12, num_shards=3, **kw):
    path = tmp_path / "ds"
    feats = {"id": F.Scalar("int64"), "image": F.Image((4, 4, 1), encoding="none"),
             "label": F.ClassLabel(names=["a", "b", "c"])}
    rng = np.random.default_rng(0)

    def rows(n, sign):
        for i in range(n):
            yield {"id": sign * i, "image": rng.integers(0, 255, (4, 4, 1), dtype=np.uint8),
                   "label": i % 3}

    th.prepare(path, {"train": rows(n_train, 1), "test": rows(n_test, -1)}, features=feats,
               num_shards=num_shards, progress=False, **kw)
    return path


def ids(source):
    return [int(x["id"]) for x in source.__getitems__(range(len(source)))]


def test_whole_splits_hold_every_example_once(tmp_path):
    path = make(tmp_path)
    ds = th.data_source(path)
    assert list(ds) == ["train", "test"]
    assert sorted(ids(ds["train"])) == list(range(40))
    assert sorted(ids(ds["test"])) == [-i for i in range(11, -1, -1)]
    assert ids(ds["train"]) != list(range(40))  # shuffled on disk


def test_input_order_without_shuffle(tmp_path):
    path = make(tmp_path, shuffle=False)
    assert ids(th.data_source(path, split="train")) == list(range(40))
    assert th.builder(path).info.shuffled is False


@pytest.mark.parametrize("spec", [
    "train", "test", "all", "train[:75%]+test", "train[10:20]", "train[-5:]", "test+train[1shard]",
    "train[:2shard]", "train[25%:75%]", "train[:1.5%]", "train[-1shard]+train[:3]+train[:3]",
    "train[7:3]",
])
def test_split_expressions_read_the_resolved_ranges(tmp_path, spec):
    path = make(tmp_path)
    whole = {s: ids(src) for s, src in th.data_source(path).items()}
    info = th.builder(path).info
    expected = [whole[a.split][i] for a in resolve_split(spec, info.splits) for i in range(a.from_, a.to)]
    src = th.data_source(path, split=spec)
    assert ids(src) == expected
    assert len(src) == len(expected) == info.splits[spec].num_examples
    assert [int(src[k]["id"]) for k in range(len(src))] == expected


def test_shard_slices_are_the_shard_files(tmp_path):
    path = make(tmp_path)
    info = th.builder(path).info
    assert info.splits["train"].shard_lengths == (13, 14, 13)
    src = th.data_source(path, split="train[1shard]")
    assert src.paths == [os.path.join(str(path), "ds-train.array_record-00001-of-00003")]
    assert len(src) == 14


def test_lists_of_splits_and_even_splits(tmp_path):
    path = make(tmp_path)
    a, b = th.data_source(path, split=["train[:50%]", th.ReadInstruction("test", to=6)])
    assert (len(a), len(b)) == (20, 6)
    subs = th.even_splits("train[75%:]+test", 3)
    parts = [ids(th.data_source(path, split=s)) for s in subs]
    assert sorted(sum(parts, [])) == sorted(ids(th.data_source(path, split="train[75%:]+test")))
    assert [len(p) for p in parts] == [8, 7, 7]
    mine = th.split_for_jax_process("train", process_index=1, process_count=4)
    assert ids(th.data_source(path, split=mine)) == ids(th.data_source(path, split="train"))[10:20]


def test_builder_info(tmp_path):
    path = make(tmp_path, name="toy", version="2.1.0", description="a toy")
    info = th.builder(path).info
    assert (info.name, info.version, info.description) == ("toy", "2.1.0", "a toy")
    assert list(info.splits.keys()) == ["train", "test"]
    assert info.splits["train"].num_examples == 40
    assert info.splits["train[:75%]"].num_examples == 30
    assert info.splits["all"].num_examples == 52
    assert info.features["image"].shape == (4, 4, 1)
    assert info.features["label"].num_classes == 3
    assert info.features["label"].names == ["a", "b", "c"]
    assert sorted(os.listdir(path)) == ["dataset_info.json"] + [
        f"toy-{s}.array_record-{i:05d}-of-00003" for s in ("test", "train") for i in range(3)]


def test_random_access_batched_reads_and_pickle(tmp_path):
    src = th.data_source(make(tmp_path), split="train[5:]+test")
    keys = [3, 0, 46, 3, 17]
    batch = src.__getitems__(keys)
    single = [src[k] for k in keys]
    for x, y in zip(batch, single):
        assert x["id"] == y["id"] and np.array_equal(x["image"], y["image"])
    assert src.__getitems__([]) == []
    clone = pickle.loads(pickle.dumps(src))
    assert int(clone[46]["id"]) == int(src[46]["id"])
    for bad in (47, -1):
        with pytest.raises(RecordKeyError, match="out of range"):
            src[bad]
    with pytest.raises(RecordKeyError):
        src.__getitems__([0, 47])
    assert src.raw(0)[:2] == b"TH"


def test_empty_selection_and_empty_split(tmp_path):
    path = tmp_path / "e"
    th.prepare(path, {"train": [{"x": 1}], "empty": []}, features={"x": F.Scalar("int8")},
               progress=False)
    assert len(th.data_source(path, split="train[:0]")) == 0
    assert len(th.data_source(path, split="empty")) == 0
    assert th.builder(path).info.splits["empty"].shard_lengths == (0,)


def test_columnar_input_and_data_loader(tmp_path):
    path = tmp_path / "cols"
    x = np.arange(24, dtype=np.float32).reshape(12, 2)
    th.prepare(path, {"train": {"x": x, "meta": {"y": np.arange(12)}}},
               features={"x": F.Tensor((2,), "float32"), "meta": {"y": F.Scalar("int64")}},
               progress=False)
    src = th.data_source(path, split="train")
    loader = th.DataLoader(src, th.IndexSampler(len(src)), [th.Batch(4)])
    batches = list(loader)
    assert len(batches) == 3
    ys = np.concatenate([b["meta"]["y"] for b in batches])
    assert sorted(ys.tolist()) == list(range(12))
    for b in batches:
        np.testing.assert_array_equal(b["x"][:, 0], b["meta"]["y"] * 2)


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
def test_torch_data_loader(tmp_path):
    # Raw tensors decode to read-only views; torch warns once about that, and its
    # collate copies them into the batch anyway.
    import torch
    ds = th.data_source(make(tmp_path))
    batches = list(torch.utils.data.DataLoader(ds["train"], batch_size=8, shuffle=False))
    assert [b["image"].shape for b in batches] == [torch.Size([8, 4, 4, 1])] * 5
    assert batches[0]["image"].dtype == torch.uint8
    assert sorted(torch.cat([b["id"] for b in batches]).tolist()) == list(range(40))
    workers = torch.utils.data.DataLoader(ds["test"], batch_size=5, num_workers=1,
                                          multiprocessing_context="forkserver")  # never fork after jax
    assert sum(len(b["label"]) for b in workers) == 12


def test_a_top_level_feature_that_is_not_a_dict(tmp_path):
    th.prepare(tmp_path / "s", {"train": range(5)}, features=F.Scalar("int32"), progress=False)
    src = th.data_source(tmp_path / "s", split="train")
    assert sorted(int(src[k]) for k in range(5)) == list(range(5))


def test_two_writes_give_identical_bytes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for p in (a, b):
        th.prepare(p, {"train": [{"t": f"row {i}", "v": np.full(3, i, np.int16)} for i in range(30)]},
                   features={"t": F.Text(), "v": F.Tensor((None,), "int16")}, name="same",
                   num_shards=2, progress=False)
    assert sorted(os.listdir(a)) == sorted(os.listdir(b))
    for f in os.listdir(a):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def test_overwrite(tmp_path):
    path = make(tmp_path)
    with pytest.raises(th.errors.ConfigError, match="already exists"):
        make(tmp_path)
    make(tmp_path, n_train=10, overwrite=True)
    assert len(th.data_source(path, split="train")) == 10
    assert sorted(os.listdir(tmp_path)) == ["ds"]


# -- every feature kind, hypothesis over shapes and dtypes -------------------------------

@st.composite
def feature_examples(draw):
    dtype = draw(st.sampled_from(["uint8", "int32", "float32", "float64", "bool", "int64"]))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    known = tuple(None if draw(st.booleans()) else d for d in shape)
    channels = draw(st.sampled_from([1, 3, 4]))
    encoding = draw(st.sampled_from(["png", "none"]))
    n = draw(st.integers(1, 6))
    values = []
    for i in range(n):
        values.append({
            "tensor": draw(hnp.arrays(np.dtype(dtype), shape)),
            "scalar": draw(hnp.arrays(np.dtype(dtype), ()))[()],
            "label": draw(st.integers(0, 4)),
            "image": draw(hnp.arrays(np.uint8, (2, 3, channels))),
            "text": draw(st.text(max_size=5)),
            "nested": {"id": i},
        })
    feats = {"tensor": F.Tensor(known, dtype), "scalar": F.Scalar(dtype),
             "label": F.ClassLabel(num_classes=5),
             "image": F.Image((None, 3, channels), encoding=encoding), "text": F.Text(),
             "nested": {"id": F.Scalar("int32")}}
    return feats, values


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(feature_examples())
def test_every_feature_kind_round_trips_through_files(tmp_path, case):
    feats, values = case
    path = os.path.join(tempfile.mkdtemp(dir=tmp_path), "rt")
    th.prepare(path, {"train": values}, features=feats, num_shards=2, progress=False)
    src = th.data_source(path, split="train")
    got = sorted(src.__getitems__(range(len(src))), key=lambda x: int(x["nested"]["id"]))
    assert len(got) == len(values)
    for want, have in zip(values, got):
        assert sorted(have) == sorted(want)
        for k in ("tensor", "scalar", "image"):
            w, h = np.asarray(want[k]), np.asarray(have[k])
            assert h.dtype == w.dtype and h.shape == w.shape and h.tobytes() == w.tobytes(), k
        assert have["label"] == want["label"] and have["text"] == want["text"]
