"""Every format that reports natural blocks feeds BlockShuffle.of_source: whole files, shards or row
groups become blocks, and an epoch is still every record exactly once."""

from __future__ import annotations

import io
import os
import tarfile
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import thresher as th
from thresher.sources.formats.tfrecord.framing import frame_record


def _tfrecord(tmp: str) -> Any:
    for s, n in enumerate((5, 0, 7, 3)):  # an empty file among them
        with open(os.path.join(tmp, f"d.tfrecord-{s:05d}-of-00004"), "wb") as f:
            f.write(b"".join(frame_record(f"{s}-{i}".encode()) for i in range(n)))
    return th.sources.TFRecordSource(os.path.join(tmp, "d.tfrecord-*")), [0, 5, 12]


def _webdataset(tmp: str) -> Any:
    for s, n in enumerate((4, 6)):
        with tarfile.open(os.path.join(tmp, f"{s:06d}.tar"), "w") as tar:
            for i in range(n):
                data = f"caption {s}-{i}".encode()
                info = tarfile.TarInfo(f"sample{s:02d}{i:03d}.txt")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return th.sources.WebDatasetSource(os.path.join(tmp, "{000000..000001}.tar")), [0, 4]


def _parquet(tmp: str) -> Any:
    path = os.path.join(tmp, "x.parquet")
    pq.write_table(pa.table({"x": list(range(11))}), path, row_group_size=4)
    return th.sources.ParquetSource(path), [0, 4, 8]


def _huggingface(tmp: str) -> Any:
    batches = [pa.record_batch({"x": list(range(a, b))}) for a, b in ((0, 3), (3, 8), (8, 10))]
    return th.sources.HuggingFaceSource(pa.Table.from_batches(batches)), [0, 3, 8]


def _image_folder(tmp: str) -> Any:
    from PIL import Image

    for c, n in (("cat", 3), ("dog", 2)):
        os.makedirs(os.path.join(tmp, c))
        for i in range(n):
            Image.new("RGB", (4, 4), (i, 0, 0)).save(os.path.join(tmp, c, f"{i}.png"))
    return th.sources.ImageFolderSource(tmp), [0, 3]


@pytest.mark.parametrize("make", [_tfrecord, _webdataset, _parquet, _huggingface, _image_folder])
def test_natural_blocks_make_a_block_shuffle(tmp_path: Any, make: Any) -> None:
    src, starts = make(str(tmp_path))
    assert src.block_boundaries(1).tolist() == starts
    shuffle = th.BlockShuffle.of_source(src, block_size=1, window_blocks=1)  # a window: one natural block
    assert shuffle.boundaries is not None and shuffle.boundaries.tolist()[: len(starts)] == starts
    sampler = th.IndexSampler(len(src), shuffle=shuffle, seed=4)
    keys = [sampler[p].record_key for p in range(len(src))]
    assert sorted(keys) == list(range(len(src)))  # every record once
    ends = [*starts[1:], len(src)]
    block_of = {k: b for b, (a, e) in enumerate(zip(starts, ends, strict=True)) for k in range(a, e)}
    runs = [block_of[k] for i, k in enumerate(keys) if i == 0 or block_of[k] != block_of[keys[i - 1]]]
    assert sorted(runs) == list(range(len(starts)))  # each block's records are read together, once
    loader = th.DataLoader(src, sampler, [th.Batch(2, drop_remainder=False)])
    assert sum(len(np.atleast_1d(b if not isinstance(b, dict) else next(iter(b.values())))) for b in loader) == len(src)
