"""ArrayRecordSource reports its chunks as natural blocks: BlockShuffle.of_source never cuts a chunk."""

from __future__ import annotations

import itertools
import os
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(st.integers(1, 300), min_size=1, max_size=3), groups=st.lists(st.sampled_from([1, 3, 16, 64]),
       min_size=3, max_size=3), block=st.integers(1, 200))
def test_blocks_are_whole_chunks_of_one_file(tmp_path: Any, lengths: list[int], groups: list[int], block: int) -> None:
    paths = []
    for i, (n, g) in enumerate(zip(lengths, groups, strict=False)):
        path = os.path.join(tmp_path, f"f{i}-{n}-{g}.array_record")
        if not os.path.exists(path):
            th.sources.write_array_record(path, [bytes([j % 256]) for j in range(n)], group_size=g)
        paths.append(path)
    src = th.sources.ArrayRecordSource(paths)
    sizes = src.group_sizes()  # what the footers say (a file shorter than its group records fewer)
    assert all(g == want for g, want, n in zip(sizes, groups, lengths, strict=False) if n >= want)
    groups = sizes
    shuffle = th.BlockShuffle.of_source(src, block_size=block, window_blocks=2)
    starts = shuffle.boundaries
    assert starts is not None and starts[0] == 0
    file_starts = np.concatenate([[0], np.cumsum(lengths)])
    for a in starts.tolist():
        f = int(np.searchsorted(file_starts, a, side="right")) - 1
        assert (a - file_starts[f]) % groups[f] == 0  # a block starts at a chunk
    assert set(file_starts[:-1].tolist()) <= set(starts.tolist())  # and never spans two files
    bounds = [*starts.tolist(), len(src)]
    for a, b in itertools.pairwise(bounds):
        f = int(np.searchsorted(file_starts, a, side="right")) - 1
        assert b - a >= block or b == file_starts[f + 1]  # at least block_size where the file allows
    s = th.IndexSampler(len(src), shuffle=shuffle, seed=1)
    assert sorted(s.keys(np.arange(len(src))).tolist()) == list(range(len(src)))
