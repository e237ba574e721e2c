"""HuggingFaceSource: records equal ``datasets``' rows; workers open the Arrow files by path."""

from __future__ import annotations

import io
import os
import pickle
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

import thresher as th
from tests.helpers import digest
from tests.sources.formats.parquet.expected import plain
from thresher.errors import ConfigTypeError, FeatureError, SourceNotFoundError
from thresher.sources.formats.huggingface import decode_image

datasets.disable_progress_bars()


def _dataset(n: int = 60) -> datasets.Dataset:
    return datasets.Dataset.from_dict({
        "id": list(range(n)), "text": [f"t{i}" * (i % 3) for i in range(n)],
        "vec": [[float(i)] * (i % 4) for i in range(n)], "meta": [{"a": i, "b": None} for i in range(n)]})


def _same(src: Any, ds: datasets.Dataset, keys: list[int]) -> None:
    assert len(src) == len(ds)
    got = [plain(r) for r in src.__getitems__(keys)]
    assert got == [plain(ds[k]) for k in keys]


@pytest.fixture
def saved(tmp_path: Any) -> str:
    path = str(tmp_path / "ds")
    _dataset().save_to_disk(path, num_shards=3)
    return path


def test_in_memory_memory_mapped_views_directories_and_tables(saved: str) -> None:
    keys = [59, 0, 17, 17, 33]
    mem = _dataset()
    _same(th.sources.HuggingFaceSource(mem), mem, keys)
    mapped = datasets.load_from_disk(saved)
    src = th.sources.HuggingFaceSource(mapped)
    assert src.files is not None and len(src.files) == 3
    _same(src, mapped, keys)
    for view in (mapped.shuffle(seed=1), mapped.select([5, 3, 59, 0, 1, 2])):
        _same(th.sources.HuggingFaceSource(view), view, [0, 2, len(view) - 1])
    _same(th.sources.HuggingFaceSource(saved), mapped, keys)
    table = pa.table({"x": [1, 2, 3]})
    assert th.sources.HuggingFaceSource(table)[2] == {"x": 3}
    assert th.sources.HuggingFaceSource(mapped, columns=["id"])[4] == {"id": 4}


def test_pickles_carry_paths_never_the_table(saved: str) -> None:
    mapped = datasets.load_from_disk(saved)
    src = th.sources.HuggingFaceSource(mapped)
    src[0]
    blob = pickle.dumps(src)
    assert len(blob) < 2048
    assert plain(pickle.loads(blob)[42]) == plain(mapped[42])
    big = datasets.Dataset.from_dict({"x": list(range(100_000))})
    mem = th.sources.HuggingFaceSource(big)
    blob = pickle.dumps(mem)  # written once to a temporary Arrow file, opened there by path
    assert len(blob) < 2048
    again = pickle.loads(blob)
    assert again[99_999] == {"x": 99_999} and again.files is None


def _png(value: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((3, 2, 3), value, np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def test_images_come_back_as_encoded_bytes_or_decoded(tmp_path: Any) -> None:
    ds = datasets.Dataset.from_dict({"img": [{"bytes": _png(i), "path": None} for i in range(4)],
                                     "y": [0, 1, 2, 3]}).cast_column("img", datasets.Image())
    path = str(tmp_path / "images")
    ds.save_to_disk(path)
    for data in (ds, path):
        r = th.sources.HuggingFaceSource(data)[2]
        assert r["img"] == _png(2) and decode_image(r["img"]).tolist() == np.asarray(ds[2]["img"]).tolist()
    decoded = th.sources.HuggingFaceSource(ds, decode=True)[1]["img"]
    assert decoded.shape == (3, 2, 3) and int(decoded[0, 0, 0]) == 1


def _ids(r: dict[str, Any]) -> dict[str, Any]:
    return {"id": r["id"], "n": np.int64(len(r["text"]))}


@pytest.mark.parametrize("data", ["memory", "saved"])
def test_workers_give_the_batches_of_no_workers(saved: str, data: str) -> None:
    ds = _dataset() if data == "memory" else datasets.load_from_disk(saved)
    src = th.sources.HuggingFaceSource(ds)

    def run(workers: int) -> list[str]:
        loader = th.DataLoader(src, th.IndexSampler(len(src), shuffle=True, seed=2), [th.MapTransform(_ids), th.Batch(7)],
                               worker_count=workers)
        return [digest(b) for b in loader]

    assert run(2) == run(0)


def test_bad_input(tmp_path: Any, saved: str) -> None:
    with pytest.raises(SourceNotFoundError, match="state.json"):
        th.sources.HuggingFaceSource(str(tmp_path))
    with pytest.raises(ConfigTypeError, match=r"DatasetDict.*dd\['train'\]"):
        th.sources.HuggingFaceSource(datasets.DatasetDict({"train": _dataset(3)}))
    with pytest.raises(ConfigTypeError, match="takes a datasets.Dataset"):
        th.sources.HuggingFaceSource([1, 2])
    os.remove(os.path.join(saved, "data-00001-of-00003.arrow"))
    with pytest.raises(SourceNotFoundError, match="data-00001-of-00003.arrow"):
        th.sources.HuggingFaceSource(saved)


def test_tables_and_datasets_passed_to_the_loader_name_the_source_to_use() -> None:
    sampler = th.IndexSampler(3)
    for data in (pa.table({"x": [1, 2, 3]}), _dataset(3), datasets.DatasetDict({"train": _dataset(3)})):
        with pytest.raises(ConfigTypeError, match=r"thresher\.sources\.HuggingFaceSource\("):
            th.DataLoader(data, sampler, [])
    loader = th.DataLoader(th.sources.HuggingFaceSource(_dataset(3)), sampler, [])
    assert [int(r["id"]) for r in loader] == [0, 1, 2]


def test_an_arrow_map_is_a_dict_and_a_repeated_key_names_the_column() -> None:
    maps = pa.array([[("a", 1)], None, [("k", 2), ("k", 3)]], pa.map_(pa.string(), pa.int64()))
    src = th.sources.HuggingFaceSource(pa.table({"m": maps}))
    assert src[0] == {"m": {"a": 1}} and src[1] == {"m": None}
    with pytest.raises(FeatureError, match=r"column 'm' of .*the key 'k' more than once"):
        src[2]
