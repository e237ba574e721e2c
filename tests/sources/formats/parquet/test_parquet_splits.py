"""th.data_source on a directory of Parquet files in the Hugging Face Hub's layout."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import thresher as th
from thresher.errors import SplitError
from thresher.sources.formats.parquet.splits import ParquetSplitSource


@pytest.fixture
def hub(tmp_path: Any) -> str:
    os.mkdir(tmp_path / "data")
    for i in range(4):  # 4 files of 25 rows, row groups of 10
        pq.write_table(pa.table({"x": list(range(25 * i, 25 * i + 25))}),
                       str(tmp_path / "data" / f"train-{i:05d}-of-00004.parquet"), row_group_size=10)
    pq.write_table(pa.table({"x": [-1, -2, -3]}), str(tmp_path / "data" / "test-00000-of-00001.parquet"))
    (tmp_path / "README.md").write_text("a dataset card")
    return str(tmp_path)


def _xs(src: Any) -> list[int]:
    return [int(r["x"]) for r in src.__getitems__(list(range(len(src))))]


def test_split_strings_select_what_tfds_semantics_say(hub: str) -> None:
    assert _xs(th.data_source(hub, split="train[:10%]")) == list(range(10))
    assert _xs(th.data_source(hub, split="train[-5:]+test")) == [95, 96, 97, 98, 99, -1, -2, -3]
    assert _xs(th.data_source(hub, split="train[1shard:2shard]")) == list(range(25, 50))
    both = th.data_source(hub)
    assert sorted(both) == ["test", "train"] and len(both["train"]) == 100
    a, b = th.data_source(hub, split=th.even_splits("train", 2))
    assert _xs(a) + _xs(b) == list(range(100))
    with pytest.raises(SplitError, match="valid"):
        th.data_source(hub, split="validation")


def test_blocks_are_row_groups_cut_to_the_split(hub: str) -> None:
    src = th.data_source(hub, split="train[5:30]")
    assert isinstance(src, ParquetSplitSource)
    assert src.block_boundaries().tolist() == [0, 5, 15, 20]
    assert src.block_boundaries(8).tolist() == [0, 15]


def test_the_config_split_folder_layout(tmp_path: Any) -> None:
    for split, n in (("train", 4), ("validation", 2)):
        os.makedirs(tmp_path / "default" / split)
        pq.write_table(pa.table({"x": list(range(n))}), str(tmp_path / "default" / split / "0000.parquet"))
    assert len(th.data_source(str(tmp_path), split="validation")) == 2
    assert _xs(th.data_source(str(tmp_path), split="train[50%:]")) == [2, 3]
